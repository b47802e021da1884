// Package awsretry makes a Backstop pipeline the one retry owner of AWS SDK for Go v2
// clients: a [Retryer] is the client's aws.RetryerV2 and puts a middleware around the
// SDK's retry loop, so every attempt the client sends is one the pipeline allowed.
//
// # Who owns the retries
//
// Every AWS SDK client retries on its own: 3 attempts in its standard mode, behind a
// retry quota. Put a Backstop retry on the same call path — a policyhttp transport as
// the client's HTTP client, or a pipeline around the call — and the two multiply: a
// GET that S3 answers 503 SlowDown is sent 3 × 3 = 9 times, and a throttled DynamoDB
// call 9 times under a retrying pipeline, to a service that asked for less. With a
// Retryer the SDK's loop makes one attempt each time the pipeline calls it, and the
// pipeline decides the rest:
//
//	r := awsretry.NewStandard("dynamodb") // or awsretry.New(p, awsretry.Options{})
//	r.Configure(&cfg)                     // cfg from config.LoadDefaultConfig
//	db := dynamodb.NewFromConfig(cfg)
//
// The pipeline's retry makes the attempts (3 per call: the server counts 3), its budget
// prices them — budget.RetryQuota is the SDKs' retry quota: 500 tokens, 14 a retry, 5
// after a throttling error, given back by a retry that succeeds, 1 back per call that
// succeeds at its first attempt — and its breaker, deadline and per-attempt timeout
// bound them. [NewStandard] waits as the SDKs' standard mode does: retry i waits a
// random time under min(50 ms × 2^(i−1), 20 s), from 1 s after a throttling error,
// and a service's X-Amz-Retry-After within 5 s above that (the SDKs' behaviour of
// 2026, their default since November 2026). Under a caller that already owns
// the call path (callpath.Owned: a pipeline with a retry further up this process, or a
// request whose attempt header a Backstop server middleware read) the call makes one
// attempt, and its error, still marked retryable, goes up to that owner. A client
// built with a Retryer under such an owner, over a policyhttp transport, still sends
// one request per attempt: the transport sees the owner too.
//
// # What the SDK keeps
//
// The SDK still builds, signs and sends each attempt, rewinds its body, corrects its
// clock skew from the service's Date header and numbers it: the Retryer's middleware
// rewrites the SDK's attempt header (amz-sdk-request: attempt=2; max=3) with the
// pipeline's numbers and adds Backstop's own (callpath.HeaderAttempt), both signed,
// while amz-sdk-invocation-id stays one per call. A Retryer installed as the client's
// aws.Retryer without its middleware refuses every call with [ErrNotInstalled] rather
// than silently never retrying.
//
// # What is retried
//
// [Classify] marks each attempt's error by the SDK's own rules
// (aws/retry.DefaultRetryables): throttling codes (ThrottlingException, SlowDown,
// ProvisionedThroughputExceededException, …; fault.Throttled), HTTP 500, 502, 503 and
// 504, connection errors and a request signed with a skewed clock are retryable,
// honouring a server's X-Amz-Retry-After or Retry-After; RequestTimeout is a timeout; other 4xx answers are
// the caller's (fault.Client), which a breaker does not count. The pipeline's retry
// then judges the marked error with its classifier, as for any other call.
//
// # What the SDK's options still say
//
// A client's RetryMaxAttempts, AWS_MAX_ATTEMPTS and a profile's max_attempts reach
// the Retryer as they reach any retryer: the SDK puts retry.AddWithMaxAttempts over
// it, and numbers its attempt header from that. The Retryer reads the number there on
// a call's first attempt. Under [NewStandard] the call then makes that many attempts,
// 1 meaning no retry, sharing the one quota. Under [New] the pipeline's retry is the
// ceiling: a smaller number ends the call sooner (with retry.ErrExhausted), a larger
// one changes nothing, since the pipeline was built as the policy.
//
// A long-polling operation (SQS ReceiveMessage; the SDK marks it with the
// [LongPollingID] middleware) whose retry the quota refuses still waits the backoff
// before it returns, as the SDKs' rule of 2026 requires: a caller polling in a loop
// does not poll again at once.
//
// # Conformance
//
// The package's tests run the scenarios of the SDK's own retry tests (the 2026
// standard mode, its retryable errors, long polling, RetryMaxAttempts) with the
// SDK's retry.NewStandard and with [NewStandard] on the same service clients, and
// require the same attempts, outcome, quota and waits at the same random draws.
// They differ nowhere. The SDKs' DynamoDB defaults (4 attempts, a 25 ms base) apply
// only to a client with no Retryer of its own, in the SDK as here.
//
// A pipeline with a hedge (retry.NewHedge) cannot run SDK calls: two attempts of one
// request cannot be in flight at once ([ErrHedged]).
package awsretry
