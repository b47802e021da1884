package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
)

type Price struct {
	Cents int
	Stale bool
}

// A fallback stands outermost: the retry inside it sees every failure, and the
// fallback answers the last one — here with the last good price, marked stale.
func ExampleFallback_Get() {
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	prices := policy.Must(fallback.New(fallback.Options[Price]{
		Name:     "prices",
		LastGood: 10 * time.Minute,
		Value:    Price{Stale: true}, // before the first good price: none known
		Clock:    clock,
	}))
	p := policy.Must(policy.Wrap(prices, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))))

	up := true
	load := func(context.Context) (Price, error) {
		if !up {
			return Price{}, fault.Retryable(errors.New("prices: 503"))
		}
		return Price{Cents: 1999}, nil
	}
	for _, state := range []bool{true, false} {
		up = state
		price, err := prices.Get(context.Background(), p, load)
		fmt.Printf("up=%v: %+v, err=%v\n", up, price, err)
	}
	fmt.Println("answered by the fallback:", prices.Answered())
	// Output:
	// up=true: {Cents:1999 Stale:false}, err=<nil>
	// up=false: {Cents:1999 Stale:false}, err=<nil>
	// answered by the fallback: 1
}

// Explain says what every stage of a full client stack does: the fallback outermost,
// then the overall deadline, a bulkhead counting calls, the breaker, the budget and
// its retry, a rate limiter counting attempts, and the per-attempt timeout.
func ExampleFallback_ExplainStage() {
	p := policy.Must(policy.Wrap(
		policy.Must(fallback.New(fallback.Options[Price]{Name: "prices", LastGood: 10 * time.Minute})),
		policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})),
		policy.Must(bulkhead.New(bulkhead.Options{Name: "prices", MaxConcurrent: 32, MaxQueue: 64, MaxWait: 100 * time.Millisecond})),
		policy.Must(breaker.New(breaker.Options{Name: "prices"})),
		policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})),
		policy.Must(retry.New(retry.Options{MaxAttempts: 3, Strategy: retry.None{}})),
		policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 100, Burst: 20})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond})),
		policy.Name("prices"),
	))
	fmt.Print(p.Explain())
	// Output:
	// prices: fallback → deadline → bulkhead → breaker → budget → retry → rate_limit → attempt_timeout
	//   fallback:        fallback "prices": answers a failed call with the last good value while younger than 10m0s, else the zero fallback_test.Price; it answers every failure, refusals and the deadline included, except when the caller has gone, or when a retry owner further up may retry it
	//   deadline:        the whole call, every attempt and sleep included, ends after 2s (deadline.ErrExceeded)
	//   bulkhead:        bulkhead "prices": at most 32 at once (calls outside the retry, attempts inside it); 64 more wait for a slot, each up to 100ms, never past its deadline
	//   breaker:         breaker "prices" trips after 5 failures in a row (the caller's cancellation, refusals and client faults do not count); stays open 750ms to 825ms, then lets 1 probe through every 750ms to 825ms until one succeeds
	//   budget:          gRFC A6 retry throttling: 10 tokens; each retryable failure costs 1; retries stop after the 5th failure in a row (tokens ≤ 5) and resume as successes refund 0.1 each
	//   retry:           up to 3 attempts; retries transient errors only (marked retryable, timeouts, refused or reset connections); None backoff from 100ms to at most 5s; waits a server's hint up to 30s (a longer one ends the call); starts no attempt with less than its per-attempt timeout, if any, left before the deadline
	//                    before attempt 2: 100ms–100ms, mean 100ms
	//                    before attempt 3: 200ms–200ms, mean 200ms
	//   rate_limit:      rate limiter "prices": 100 a second in bursts of up to 20 (calls outside the retry, attempts inside it); a call waits for its token, never past its deadline
	//   attempt_timeout: each attempt ends after 300ms; the retry above may retry a timed-out attempt
	//   attempts:        at most 3 per call; 1 per call when another layer owns retries on the call path
	//   worst case:      2s, the overall deadline
	//   ends a call:     bulkhead "prices" refuses a call that finds its 32 slots taken and 64 waiting, or has waited 100ms or until its deadline (bulkhead.ErrFull), with a Retry-After from the mean time a call holds its slot
	//   ends a call:     breaker "prices", open, ends the call before any attempt (breaker.ErrOpen, with the time it reopens)
	//   ends a call:     an exhausted budget stops the retrying: the call returns its last error (retry.ErrBudget)
	//   ends a call:     rate limiter "prices" refuses at once a call whose token would come after its deadline (ratelimit.ErrLimited), with a Retry-After when it would
}
