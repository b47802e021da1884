// Package bench holds side-by-side benchmarks of Backstop against its peers —
// failsafe-go, cenkalti/backoff v5, raw gobreaker v2 — and a hand-written floor. It is
// its own module so the peers never become dependencies of the library. Run
// `go run ./compare` here for the ratio table (see README.md).
package bench
