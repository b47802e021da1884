// Package budget limits retries as a whole, so that during a broad outage retry load
// fades out instead of multiplying the load on a dependency that is already down.
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
// RetryQuota and InFlight implement policy.RetryLease: the retry tells them why each retry
// is made and when it has ended.
//
// # Placement
//
// A budget is a policy of kind Budget and stands outside its retry (rule O4):
//
//	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
//	p, err := policy.Wrap(deadline, b, retry)
//
// It does no per-call work itself: policy.Wrap hands it to the retry, which calls
// Deposit before a call, OnFailure after each retryable failure, Withdraw before each
// retry and OnSuccess after a success. A refused retry ends the call with
// retry.ErrBudget and an event retry_suppressed{why="budget"}.
//
// Budgets are shared state, safe for concurrent use: use one per dependency, in every
// pipeline that calls it.
package budget
