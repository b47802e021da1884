// Package wraporder is a go/analysis check that refuses, at compile time, the policy
// stacks policy.Wrap refuses at start-up: calls of policy.Wrap and policy.MustWrap whose
// arguments come from Backstop's constructors and break the ordering rules O1–O7. The
// rules are policy.CheckKinds's, the ones Wrap applies: they live in one place.
//
// A stack that is wrong on purpose (a test of Wrap's refusal) carries a comment:
//
//	//backstopvet:ignore wraporder (why)
package wraporder
