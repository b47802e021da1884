package stacks

import (
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/fleet"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// The README's stack: right.
func readme() {
	overall := policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second}))
	brk := policy.Must(breaker.New(breaker.Options{Name: "db"}))
	rt := policy.Must(retry.New(retry.Options{MaxAttempts: 3}))
	_, _ = policy.Wrap(overall, brk, rt)
	_ = policy.Must(policy.Wrap(overall, brk, policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})), policy.Must(retry.New(retry.Options{})), policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))))
}

// The wrong stacks of the docs.
func wrong() {
	d, err := deadline.New(deadline.Options{Timeout: 2 * time.Second})
	_ = err
	r := policy.Must(retry.New(retry.Options{}))
	_, _ = policy.Wrap(r, d)                                                                                                                                                          // want `policy: O1: deadline at position 2 is inside retry at position 1; move the deadline outward or use deadline.NewPerAttempt`
	_ = policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{})), policy.Must(breaker.New(breaker.Options{Name: "x"})), policy.Must(retry.New(retry.Options{}))))              // want `policy: O2: retries at positions 1 and 3`
	_ = policy.Must(policy.Wrap(policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{}))))                                // want `policy: O3: attempt_timeout at position 1 is outside retry`
	_ = policy.Must(policy.Wrap(policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})), policy.Must(breaker.New(breaker.Options{Name: "x"})))) // want `policy: O4: budget at position 1 has no retry inside it`
	_ = policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(shed.New(shed.Options{}))))                                            // want `policy: O5: shed at position 2 is not outermost`
	_ = policy.Must(policy.Wrap(r, policy.Must(breaker.New(breaker.Options{Name: "x"})), r))                                                                                          // want `policy: O6: the same retry policy \(r\) stands at positions 1 and 3`
}

// The fallback stands outermost (O7); a bulkhead and a rate limiter stand either side
// of the retry.
func fallbacks() {
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: 1}))
	bh := policy.Must(bulkhead.New(bulkhead.Options{Name: "prices", MaxConcurrent: 8}))
	rl := policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 10}))
	_ = policy.Must(policy.Wrap(fb, policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), bh, policy.Must(retry.New(retry.Options{})), rl, policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))))
	_ = policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), fb, policy.Must(retry.New(retry.Options{}))))                      // want `policy: O7: fallback at position 2 is inside deadline at position 1; move the fallback outward`
	_ = policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "x", Rate: 1})), policy.Must(fallback.New[int](fallback.Options[int]{Name: "x"})))) // want `policy: O7: fallback at position 2 is inside rate_limit at position 1`
	_ = policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{})), fb, policy.Name("prices")))                                                                  // want `policy: O7: fallback at position 2 is inside retry at position 1`
	_ = policy.Must(policy.Wrap(policy.Name("prices"), fb, policy.Must(retry.New(retry.Options{})), policy.Observe(nil)))
	_ = policy.Must(policy.Wrap(bh, policy.Name("x"), rl, bh))                                                                                             // want `policy: O6: the same bulkhead policy \(bh\) stands at positions 1 and 3`
	_ = policy.Must(policy.Wrap(policy.Must(fallback.New(fallback.Options[int]{Name: "a"})), policy.Must(fallback.New(fallback.Options[int]{Name: "b"})))) // want `policy: O7: fallbacks at positions 1 and 2`
}

// Stages reached through an interface: a conversion, a variable assigned once, a
// budget of another package whose placement is budget.Place.
func throughInterfaces() {
	var p policy.Policy = policy.Must(retry.New(retry.Options{}))
	_ = policy.Must(policy.Wrap(p, policy.Must(deadline.New(deadline.Options{Timeout: time.Second}))))                          // want `policy: O1: deadline at position 2 is inside retry at position 1`
	_ = policy.Must(policy.Wrap(policy.Policy(policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))), p)) // want `policy: O3: attempt_timeout at position 1 is outside retry at position 2`
	_ = policy.Must(policy.Wrap(fleet.NewTokenBucket(), policy.Must(breaker.New(breaker.Options{Name: "x"}))))                  // want `policy: O4: budget at position 1 has no retry inside it`
	_ = policy.Must(policy.Wrap(fleet.NewTokenBucket(), p))
	_ = policy.Must(policy.Wrap(policy.Must(shed.New(shed.Options{})), policy.Must(shed.New(shed.Options{})))) // want `policy: O5: sheds at positions 1 and 2`
	d, _ := deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})
	_ = policy.Must(policy.Wrap(d, policy.Must(retry.New(retry.Options{})))) // want `policy: O3: attempt_timeout at position 1 is outside retry at position 2`
	_ = policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{})), d))
}

// Stacks it cannot know statically are left alone.
func unknown(p policy.Policy, ps []policy.Policy) {
	_ = policy.Must(policy.Wrap(p, policy.Must(retry.New(retry.Options{})), policy.Must(deadline.New(deadline.Options{Timeout: time.Second}))))
	_ = policy.Must(policy.Wrap(ps...))
	d := policy.Must(deadline.New(deadline.Options{Timeout: time.Second}))
	d = policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})) // assigned twice: unknown
	_ = policy.Must(policy.Wrap(d, policy.Must(retry.New(retry.Options{}))))
}

// A test of Wrap's refusal, wrong on purpose.
func deliberate() {
	_, _ = policy.Wrap(policy.Must(retry.New(retry.Options{})), policy.Must(deadline.New(deadline.Options{Timeout: time.Second}))) //backstopvet:ignore wraporder (Wrap must refuse it)
}

// The user's own constructors of a deadline, told apart as deadline's are: through
// policy.Must, or an error checked by hand.
func attemptTimeout() *deadline.Deadline { // want attemptTimeout:`^Placement\{Kind: "attempt_timeout", Retry: 2\}$`
	return policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))
}

func overall(d time.Duration) *deadline.Deadline { // want overall:`^Placement\{Kind: "deadline", Deadline: true, Retry: 1\}$`
	dl, err := deadline.New(deadline.Options{Timeout: d})
	if err != nil {
		panic(err)
	}
	return dl
}

// policy.Must's other forms: a value and an error apart, a type given by hand.
func musts() {
	_ = policy.Must(policy.Wrap(attemptTimeout(), policy.Must(retry.New(retry.Options{})))) // want `policy: O3: attempt_timeout at position 1 is outside retry at position 2`
	_ = policy.Must(policy.Wrap(overall(time.Second), policy.Must(retry.New(retry.Options{})), attemptTimeout()))
	_ = policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{})), overall(time.Second))) // want `policy: O1: deadline at position 2 is inside retry at position 1`
	d, err := deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})
	_ = policy.Must(policy.Wrap(policy.Must(d, err), policy.Must(retry.New(retry.Options{}))))                                                                        // want `policy: O3: attempt_timeout at position 1 is outside retry at position 2`
	_ = policy.Must(policy.Wrap(policy.Must[policy.Policy](deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{})))) // want `policy: O3: attempt_timeout at position 1 is outside retry at position 2`
	_ = policy.Must(policy.Wrap(policy.Must[policy.Policy](deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{}))))
	tb := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	_ = policy.Must(policy.Wrap(policy.Must(budget.NewInFlight(budget.InFlightOptions{Budget: tb, Max: 4})), policy.Must(retry.New(retry.Options{}))))
	_ = policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{})), policy.Must(budget.NewInFlight(budget.InFlightOptions{Budget: tb, Max: 4})))) // want `policy: O4: budget at position 2 is inside retry at position 1`
}
