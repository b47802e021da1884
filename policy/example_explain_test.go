package policy_test

import (
	"fmt"
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// Explain says what a stack will do before production finds out: the README's stack,
// with a budget and a per-attempt timeout.
func ExamplePipeline_Explain() {
	p := policy.Must(policy.Wrap(
		policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})),
		policy.Must(breaker.New(breaker.Options{Name: "db"})),
		policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})),
		policy.Must(retry.New(retry.Options{MaxAttempts: 3, Strategy: retry.None{}})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond})),
	)).With(policy.Name("db"))
	fmt.Print(p.Explain())
	// Output:
	// db: deadline → breaker → budget → retry → attempt_timeout
	//   deadline:        the whole call, every attempt and sleep included, ends after 2s (deadline.ErrExceeded)
	//   breaker:         breaker "db" trips after 5 failures in a row (the caller's cancellation, refusals and client faults do not count); stays open 750ms to 825ms, then lets 1 probe through every 750ms to 825ms until one succeeds
	//   budget:          gRFC A6 retry throttling: 10 tokens; each retryable failure costs 1; retries stop after the 5th failure in a row (tokens ≤ 5) and resume as successes refund 0.1 each
	//   retry:           up to 3 attempts; retries transient errors only (marked retryable, timeouts, refused or reset connections); None backoff from 100ms to at most 5s; waits a server's hint up to 30s (a longer one ends the call); starts no attempt with less than its per-attempt timeout, if any, left before the deadline
	//                    before attempt 2: 100ms–100ms, mean 100ms
	//                    before attempt 3: 200ms–200ms, mean 200ms
	//   attempt_timeout: each attempt ends after 300ms; the retry above may retry a timed-out attempt
	//   attempts:        at most 3 per call; 1 per call when another layer owns retries on the call path
	//   worst case:      2s, the overall deadline
	//   ends a call:     breaker "db", open, ends the call before any attempt (breaker.ErrOpen, with the time it reopens)
	//   ends a call:     an exhausted budget stops the retrying: the call returns its last error (retry.ErrBudget)
}
