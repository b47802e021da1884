// Package policygrpc runs gRPC calls through Backstop pipelines and keeps one retry
// owner per call path across gRPC hops, as package policyhttp does for HTTP.
//
// # Client
//
// [UnaryClientInterceptor] runs each unary RPC through a *policy.Pipeline: every
// attempt is one invocation, classified by its status code ([Options].RetryableCodes,
// by default UNAVAILABLE) and by the server's pushback (gRFC A6's
// grpc-retry-pushback-ms trailer: a delay waited exactly on a retryable code, or — a
// negative, malformed or repeated value — a refusal to be retried whatever the code,
// which a budget outside the retry counts as a failure). Attempts carry Backstop's
// attempt metadata and grpc-previous-rpc-attempts, so that servers below fail fast
// instead of retrying again. The caller's context deadline bounds every attempt and
// every sleep; a pushback that leaves no time for another attempt ends the call at
// once with DEADLINE_EXCEEDED, whose message names the pushback and the time that was
// left.
//
// A channel must have one retry owner: Backstop's or grpc-go's built-in retry, never
// both. [DialOptions] returns the interceptors together with grpc.WithDisableRetry().
//
//	p, err := policy.Wrap(deadline, breaker, budget, retry, perAttempt)
//	conn, err := grpc.NewClient(target, policygrpc.DialOptions(p, policygrpc.Options{})...)
//
// [RetryStreamClientInterceptor] retries streams as A6 says: only until the stream
// commits (the server's response headers or a message received, or more sent than the
// replay buffer holds), replaying the messages sent on each new attempt. After the
// commit, errors are the caller's: a server that sends its headers and then fails is
// not retried, whether or not the caller read the headers, as with grpc-go's own
// retry.
//
// # Conformance with grpc-go's retry
//
// Backstop's interceptors stand in for grpc-go's own retry, and the conformance suite
// (conformance_test.go) runs the scenarios of grpc-go's retry tests against both on
// the same service config and server. What a caller observes is the same: the
// attempts made, the final status, grpc-previous-rpc-attempts, what retryThrottling
// allows. In particular a call commits at the server's response headers (unary calls
// too), at a request past the replay buffer (grpc.MaxRetryRPCBufferSize, honoured from
// the call's options and the channel's default call options), and, for a stream, when
// the caller asks for its Context.
//
// grpc.WithMaxCallAttempts is a dial option no interceptor can read: give the same
// bound to [ParseServiceConfigWith] as [ParseOptions].MaxCallAttempts. A channel that
// sets one and not the other keeps the service config's bound, at most 5 by default.
//
// grpc-go retries transparently beneath every interceptor, even with
// grpc.WithDisableRetry: a stream the server refused before processing it
// (REFUSED_STREAM, or a connection that closed before it was sent) is sent again,
// once per attempt. A6 allows it, since the RPC never reached the server's
// application. Backstop does not see these retries, as grpc-go's own retry does not
// count them: they carry no grpc-previous-rpc-attempts and cost no throttling token.
// A stats.Handler sees each one as a stats.Begin with IsTransparentRetryAttempt set.
//
// Where grpc-go departs from A6, Backstop follows A6:
//   - A grpc-retry-pushback-ms with a leading zero ("0100") is malformed: do not retry.
//     grpc-go reads it as a number.
//   - retryThrottling's bounds (maxTokens in (0, 1000], tokenRatio > 0) hold in every
//     config; grpc-go checks them only in a config that has a methodConfig.
//   - A call that fails with a retryable code after its server sent headers costs a
//     throttling token, as every failed RPC does; grpc-go charges only failures in
//     trailers only.
//   - maxTokens and tokenRatio keep three decimals, and a value that is 0 to three
//     decimals is refused; grpc-go keeps every decimal.
//   - A hedgingPolicy is read and validated; grpc-go ignores it.
//
// The waits are A6's and grpc-go's: min(initialBackoff·backoffMultiplier^(n−1),
// maxBackoff) · random(0.8, 1.2), a maxBackoff below initialBackoff included.
//
// # A mesh beneath
//
// [Options].Mesh says who owns the retries beneath the channel, as in package
// policyhttp, whose documentation ("A mesh beneath") gives Envoy's rules. The
// headers travel as metadata:
//
//	| Mesh                 | who retries  | each attempt sends                  | each response is read for          |
//	|----------------------|--------------|-------------------------------------|------------------------------------|
//	| MeshBackstopOwns (0) | the pipeline | x-envoy-max-retries: 0 if owned     | x-envoy-attempt-count > 1          |
//	| MeshEnvoyOwns        | the mesh     | backstop-attempt: 1                 | x-envoy-attempt-count              |
//	| MeshNone             | the pipeline | no Envoy metadata                   | nothing                            |
//
// The count is read from the attempt's response header metadata, or from its
// trailer when the server answered in trailers only. Envoy's router retries a gRPC
// call on the status in response headers (x-envoy-retry-grpc-on), so only before
// the call commits in A6's sense. A stream's count is read once per attempt: when
// it fails before the commit, or when its headers or first message arrive.
// [StreamClientInterceptor] sends x-envoy-max-retries: 0 under an owner, as the
// zero Mesh does. grpc-go's own retry sends grpc-previous-rpc-attempts and knows
// nothing of a mesh; with [DialOptions] it is off, so the channel has one owner.
//
// With MeshEnvoyOwns the pipeline makes one attempt, and a failure after the
// response headers is not retried anyway (A6). The mesh's retries are charged to
// [Options].MeshBudget and reported to [Options].MeshObserver as policyhttp does.
//
// # Server
//
// [UnaryServerInterceptor] and [StreamServerInterceptor] read the attempt metadata —
// Backstop's, grpc-previous-rpc-attempts and x-envoy-attempt-count — with
// callpath.ParseAttempt and mark the handler's context as owned upstream: its own
// retrying pipelines then make one attempt each. [ShedUnaryServerInterceptor] and
// [ShedStreamServerInterceptor] admit RPCs through a shed.Shedder (retries shed first)
// and answer the rest with RESOURCE_EXHAUSTED (or UNAVAILABLE) and a jittered
// grpc-retry-pushback-ms, without calling the handler.
//
// # Service config
//
// [ParseServiceConfig] reads a gRPC service config (methodConfig with timeout and
// retryPolicy, retryThrottling) into pipelines, validated as gRFC A6 says, so a
// channel configured for grpc-go's retry can move to Backstop unchanged.
//
// Its retryThrottling bucket ([ServiceConfig.Budget]) counts every RPC of the
// channel, as A6 says, whatever its method: a success refills tokenRatio; a failure
// with a code its method retries, or with a pushback that says not to retry, costs a
// token — methods without a retryPolicy included, and calls whose retries a caller in
// another process owns (they make one attempt here, and it still counts). A call
// under a retry owner in this process is counted by that owner, in the budget its
// pipeline holds, once per failed attempt.
//
// After a retry made on a server's pushback, the next backoff starts again from
// initialBackoff, as A6 says (TestUnary_BackoffRestartsAfterPushback).
//
// # Routing
//
// [RouterDialOptions] picks a pipeline per RPC from a [Router]: a [Routes] table names
// methods ("pkg.Service/Method"), services ("pkg.Service") and a default ("") as a
// service config's name entries do, the method's route winning over its service's.
// The config module's loader is a Router whose table a reload replaces.
package policygrpc
