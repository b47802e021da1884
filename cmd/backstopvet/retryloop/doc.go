// Package retryloop is a go/analysis check for hand-rolled retry loops: a for loop
// that calls a dependency (an *http.Client method, or any function taking a
// context.Context and returning an error) and sleeps between iterations with no
// randomness — the fixed-interval, no-jitter loop whose clients, failing together,
// retry together — and says so louder when the loop has no attempt bound and no
// deadline.
//
// A loop it should leave alone carries a comment on the line above it:
//
//	//backstopvet:ignore retryloop (why)
package retryloop
