// Package wraporder is a go/analysis check that refuses, at compile time, the policy
// stacks policy.Wrap refuses at start-up: calls of policy.Wrap, alone or in
// policy.Must(policy.Wrap(…)), whose stages break the ordering rules O1–O7. The
// rules are policy.CheckPlacements's, the ones Wrap applies: they live in one place.
//
// # Placements
//
// The check knows no stage by name. It learns each stage's placement from the stage's
// own code, a third party's as a built-in one, and passes it on as an analysis fact:
//
//   - a method Placement() policy.Placement that returns a policy.Placement literal
//     with constant fields, or a package-level variable holding one (in its own
//     package or another);
//   - a method that returns one of two such placements by a bool field of its
//     receiver, together with the constructors that set that field to a constant
//     (deadline.New and deadline.NewPerAttempt make one type, placed two ways).
//
// At a call of Wrap it takes each argument's type, through conversions, policy.Must
// and a variable assigned once, and reads the placement of that type, or of the
// constructor that made the stage: policy.Must(deadline.NewPerAttempt(o)) is an
// attempt timeout. Options among the stages are set aside, as Wrap sets them aside.
// A stack holding a stage whose placement it cannot tell is left alone, as is an
// OutsideRetry stage that is not a policy.RetryBudget (CheckPlacements would take it
// for a budget).
//
// A stack that is wrong on purpose (a test of Wrap's refusal) carries a comment:
//
//	//backstopvet:ignore wraporder (why)
package wraporder
