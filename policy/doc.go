// Package policy is Backstop's engine. It stacks resilience policies into one
// [Pipeline]: an overall deadline, a circuit breaker, a retry budget, a retry, a
// per-attempt timeout. It refuses a stack in a wrong order when the pipeline is
// built. It keeps exactly one retrying layer on every call path.
//
// # Composition
//
// [Wrap] takes policies outermost first, as function composition reads:
// Wrap(d, b, r) runs d(b(r(fn))). The stack is bound once; a call does no lookups.
//
//	overall := policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second}))
//	perTry := policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond}))
//	brk := policy.Must(breaker.New(breaker.Options{Name: "db"}))
//	bud := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
//	rt := policy.Must(retry.New(retry.Options{MaxAttempts: 3}))
//
//	p, err := policy.Wrap(overall, brk, bud, rt, perTry, policy.Name("db"), policy.Observe(obs))
//	if err != nil {
//		return err // a wrong order is refused here, never at call time
//	}
//
//	err = p.Do(ctx, func(ctx context.Context) error {
//		return db.Ping(ctx)
//	})
//	user, err := policy.Get(ctx, p, func(ctx context.Context) (User, error) {
//		return db.LoadUser(ctx, id)
//	})
//
// Read it from the outside in:
//   - The whole call, sleeps included, has 2 s.
//   - An open breaker ends the call before any attempt. Placed inside the retry
//     instead, the breaker would count attempts rather than calls.
//   - The budget decides whether each retry may happen.
//   - The retry makes up to 3 attempts.
//   - Each attempt has 300 ms.
//
// # Ordering rules
//
// [Wrap] refuses a stack that breaks a rule with an [*OrderError]. It matches
// [ErrOrder], and its text names the rule, the positions and the fix:
//
//	policy: O1: deadline at position 3 is inside retry at position 2; move the deadline outward or use deadline.NewPerAttempt
//
//	| rule | what                                                                | why                                                   |
//	|------|---------------------------------------------------------------------|-------------------------------------------------------|
//	| O1   | at most one overall deadline, outside every retry                   | one deadline bounds every attempt and every sleep     |
//	| O2   | at most one retry per pipeline                                      | retries multiply: 4 × 4 × 4 = 64 attempts             |
//	| O3   | a per-attempt timeout stands inside the retry; without one, refused | outside the retry it is the overall deadline misnamed |
//	| O4   | a budget stands outside its retry; a budget with no retry, refused  | the budget decides whether the retries below happen   |
//	| O5   | a shedder is outermost, and its pipeline holds no retry             | shedding guards a server's own work                   |
//	| O6   | no nil policy, no policy object twice                               |                                                       |
//	| O7   | at most one fallback, outside every stage but a shedder             | it answers the failures of the stages inside it       |
//
// The rules read each stage's [Placement], never its type. So a third-party stage
// is checked as a built-in one is. A breaker declares no trait: it stands on either
// side of the retry. Outside it, it counts calls; inside it, attempts. A fallback
// encloses (O7): it stands outside every stage but a shedder. It sees the retry's
// last failure, an open breaker's refusal and the deadline's expiry. A free stage
// stands anywhere, outside a shedder too. O6 also refuses two stages of a kind that
// stands once. Wrap() with no policies is a pass-through.
//
// # One retry owner per call path
//
// A pipeline with a retry marks the context of each attempt as owned
// (callpath.WithAttempt). Take a repository's retrying pipeline, called from a
// handler's retrying pipeline. Its retry runs under an owned context, so it makes
// exactly one attempt. It reports an [event.RetrySuppressed] with Reason
// [event.SuppressedOwner]. The outermost layer owns retries. Three layers of 4
// attempts thus make 4 attempts against the database, not 4 × 4 × 4 = 64. Code
// with loops of its own asks callpath.Owned. A retry that can never retry
// (MaxAttempts 1) does not claim the call path. It marks nothing, so the layers
// below it keep their own retries.
//
// A retry that does not own the call path leaves the budget outside it alone. Only
// the owner deposits, pays for failures and withdraws. So a budget shared by nested
// pipelines is charged once per failed attempt.
//
// Across services, Backstop's HTTP transport sends callpath.HeaderAttempt on every
// request made under an owner. Server middleware reads it with callpath.ParseAttempt,
// and Envoy's and gRPC's attempt headers too. It marks the handler's context with
// callpath.WithUpstreamAttempt, so the handler's outbound pipelines fail fast too.
// A request made under an owner in another process is sent as attempt 1. It carries
// the ownership on. The number says truthfully that this process made it once.
//
// # Errors
//
// Every refusal by a policy on the call path matches [ErrRejected]: a breaker open,
// a request shed. A refusal is never retried.
//
// A retry that stops early is different. It may stop because its budget is
// exhausted, or another layer owns retries. It may stop because the next attempt
// could not finish before the deadline. It then returns a *retry.Error whose Cause
// says why. That error unwraps to the last attempt's error. It does not match
// ErrRejected, on purpose. The retry that owns the call path further up must still
// see the retryable failure underneath, and may retry it. A retry may stop because
// the context ended, or because its deadline left no room. Its error then matches
// context.Canceled or context.DeadlineExceeded. [Outcome] names an error's class for
// metrics labels.
//
// # Events
//
// [Observe] sets an [event.Observer] that receives every stage's [event.Event].
// With no observer, no event work is done at all.
//
// # Writing a policy
//
// A [Policy] declares its [Placement] and binds a [Runner]. The Policy
// documentation gives the rules. Package policytest has a conformance suite that
// checks them.
package policy
