// Package budget limits retries as a whole. During a broad outage, retry load then
// fades out. It does not multiply the load on a dependency that is already down.
//
// # Four budgets, and a cap
//
//	| budget        | allows a retry while                                                     | model                                  |
//	|---------------|--------------------------------------------------------------------------|----------------------------------------|
//	| [TokenBucket] | tokens > maxTokens/2; failures cost 1, successes refill                  | gRPC retryThrottling (A6)              |
//	| [Ratio]       | retries ≤ Ratio × calls + MinPerSecond, over a window                    | Finagle RetryBudget                    |
//	| [RetryQuota]  | 500 tokens hold the retry's 14 (5 after throttling); refunded on success | AWS SDKs' standard retry quota         |
//	| [Rate]        | a token bucket of r retries/s has a token                                | a retry rate per process (x/time/rate) |
//	| [InFlight]    | fewer than Max retries are in flight, and the budget it wraps allows     | Envoy's max_retries circuit            |
//
// RetryQuota and InFlight implement policy.RetryLease. The retry tells them why
// each retry is made, and when it has ended.
//
// # Placement
//
// A budget is a policy of kind Budget and stands outside its retry (rule O4):
//
//	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
//	p, err := policy.Wrap(deadline, b, retry)
//
// It does no per-call work itself. Package policy's Wrap hands it to the retry.
// The retry calls Deposit before a call, and OnFailure after each retryable
// failure. It calls Withdraw before each retry, and OnSuccess after a success. A
// refused retry ends the call with retry.ErrBudget. It reports an event
// retry_suppressed{why="budget"}.
//
// Budgets are shared state, safe for concurrent use. Use one per dependency, in
// every pipeline that calls it.
//
// # Rate and the AWS retry quota
//
// A [Rate] is refilled by the clock alone. The AWS SDKs' retry quota is not
// this. Its bucket of 500 tokens is refilled by outcomes, not by the clock. In the
// SDKs before 2026, a retry took 5 tokens, and a timeout retry 10. The tokens are
// given back when the retry succeeds. A call that succeeds at once adds 1. The
// [RetryQuota] budget follows it.
package budget
