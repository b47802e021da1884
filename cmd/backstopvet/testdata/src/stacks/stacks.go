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
	overall := deadline.MustNew(2 * time.Second)
	brk := breaker.MustNew("db", breaker.Options{})
	rt := retry.MustNew(retry.Options{MaxAttempts: 3})
	_, _ = policy.Wrap(overall, brk, rt)
	_ = policy.MustWrap(overall, brk, budget.MustNewTokenBucket(10, 0.1), retry.MustNew(retry.Options{}), deadline.MustPerAttempt(time.Second))
}

// The wrong stacks of the docs.
func wrong() {
	d, err := deadline.New(2 * time.Second)
	_ = err
	r := retry.MustNew(retry.Options{})
	_, _ = policy.Wrap(r, d)                                                                                                     // want `policy: O1: deadline at position 2 is inside retry at position 1; move the deadline outward or use deadline.PerAttempt`
	_ = policy.MustWrap(retry.MustNew(retry.Options{}), breaker.MustNew("x", breaker.Options{}), retry.MustNew(retry.Options{})) // want `policy: O2: retries at positions 1 and 3`
	_ = policy.MustWrap(deadline.MustPerAttempt(time.Second), retry.MustNew(retry.Options{}))                                    // want `policy: O3: attempt_timeout at position 1 is outside retry`
	_ = policy.MustWrap(budget.MustNewTokenBucket(10, 0.1), breaker.MustNew("x", breaker.Options{}))                             // want `policy: O4: budget at position 1 has no retry inside it`
	_ = policy.MustWrap(deadline.MustNew(time.Second), shed.MustNew(shed.Options{}))                                             // want `policy: O5: shed at position 2 is not outermost`
	_ = policy.MustWrap(r, breaker.MustNew("x", breaker.Options{}), r)                                                           // want `policy: O6: the same retry policy \(r\) stands at positions 1 and 3`
}

// The fallback stands outermost (O7); a bulkhead and a rate limiter stand either side
// of the retry.
func fallbacks() {
	fb := fallback.MustNew("prices", fallback.Options[int]{Value: 1})
	bh := bulkhead.MustNew("prices", bulkhead.Options{MaxConcurrent: 8})
	rl := ratelimit.MustNew("prices", ratelimit.Options{Rate: 10})
	_ = policy.MustWrap(fb, deadline.MustNew(time.Second), bh, retry.MustNew(retry.Options{}), rl, deadline.MustPerAttempt(time.Second))
	_ = policy.MustWrap(deadline.MustNew(time.Second), fb, retry.MustNew(retry.Options{}))                                       // want `policy: O7: fallback at position 2 is inside deadline at position 1; move the fallback outward`
	_ = policy.MustWrap(ratelimit.MustNew("x", ratelimit.Options{Rate: 1}), fallback.MustNew[int]("x", fallback.Options[int]{})) // want `policy: O7: fallback at position 2 is inside rate_limit at position 1`
	_ = policy.MustWrap(retry.MustNew(retry.Options{}), fb, policy.Name("prices"))                                               // want `policy: O7: fallback at position 2 is inside retry at position 1`
	_ = policy.MustWrap(policy.Name("prices"), fb, retry.MustNew(retry.Options{}), policy.Observe(nil))
	_ = policy.MustWrap(bh, policy.Name("x"), rl, bh)                                                                   // want `policy: O6: the same bulkhead policy \(bh\) stands at positions 1 and 3`
	_ = policy.MustWrap(fallback.MustNew("a", fallback.Options[int]{}), fallback.MustNew("b", fallback.Options[int]{})) // want `policy: O7: fallbacks at positions 1 and 2`
}

// Stages reached through an interface: a conversion, a variable assigned once, a
// budget of another package whose placement is budget.Place.
func throughInterfaces() {
	var p policy.Policy = retry.MustNew(retry.Options{})
	_ = policy.MustWrap(p, deadline.MustNew(time.Second))                                // want `policy: O1: deadline at position 2 is inside retry at position 1`
	_ = policy.MustWrap(policy.Policy(deadline.MustPerAttempt(time.Second)), p)          // want `policy: O3: attempt_timeout at position 1 is outside retry at position 2`
	_ = policy.MustWrap(fleet.NewTokenBucket(), breaker.MustNew("x", breaker.Options{})) // want `policy: O4: budget at position 1 has no retry inside it`
	_ = policy.MustWrap(fleet.NewTokenBucket(), p)
	_ = policy.MustWrap(shed.MustNew(shed.Options{}), shed.MustNew(shed.Options{})) // want `policy: O5: sheds at positions 1 and 2`
	d, _ := deadline.PerAttempt(time.Second)
	_ = policy.MustWrap(d, retry.MustNew(retry.Options{})) // want `policy: O3: attempt_timeout at position 1 is outside retry at position 2`
	_ = policy.MustWrap(retry.MustNew(retry.Options{}), d)
}

// Stacks it cannot know statically are left alone.
func unknown(p policy.Policy, ps []policy.Policy) {
	_ = policy.MustWrap(p, retry.MustNew(retry.Options{}), deadline.MustNew(time.Second))
	_ = policy.MustWrap(ps...)
	d := deadline.MustNew(time.Second)
	d = deadline.MustPerAttempt(time.Second) // assigned twice: unknown
	_ = policy.MustWrap(d, retry.MustNew(retry.Options{}))
}

// A test of Wrap's refusal, wrong on purpose.
func deliberate() {
	_, _ = policy.Wrap(retry.MustNew(retry.Options{}), deadline.MustNew(time.Second)) //backstopvet:ignore wraporder (Wrap must refuse it)
}
