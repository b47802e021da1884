// Package connectpolicy runs connect-go calls through Backstop pipelines and keeps one
// retry owner per call path across connect hops — the Connect protocol, gRPC and
// gRPC-Web alike, over HTTP/1.1 or HTTP/2 — as policyhttp and policygrpc do for HTTP
// and grpc-go.
//
// # Who owns the retries
//
// connect-go retries nothing on its own; its users add a retrying interceptor in each
// service. A user call through a front, a middle and a back service whose clients each
// retry 3 times reaches the back end 3 × 3 = 9 times when it is down. With [NewInterceptor] on every client and handler the call path has one owner:
// the front client retries; each of its attempts carries Backstop's attempt header
// (callpath.HeaderAttempt, and Grpc-Previous-Rpc-Attempts for grpc-go servers); the
// middle handler reads it and marks its context as owned upstream, so its own client
// makes one attempt per incoming one — the back end gets 3 calls. A grpc-go server
// behind policygrpc's server interceptors reads the same headers, and a connect
// handler reads those of grpc-go clients and Envoy.
//
//	p, err := policy.Wrap(deadline, breaker, budget, retry)
//	ic, err := connectpolicy.NewInterceptor(p, connectpolicy.Options{})
//	client := greetv1connect.NewGreetServiceClient(http.DefaultClient, url, connect.WithInterceptors(ic))
//	mux.Handle(greetv1connect.NewGreetServiceHandler(svc, connect.WithInterceptors(ic)))
//
// (greetv1connect is the code connect generates for a GreetService; any generated
// client and handler take the interceptor the same way.)
//
// Unary calls run through the pipeline: each attempt is one call, judged by its code
// ([Options].RetryableCodes, by default unavailable) and by the server's metadata
// ([Classify]: gRFC A6's pushback waited exactly, Retry-After, a Backstop server's
// refusal). The idempotency level (connect.WithIdempotency) changes neither: connect-go
// retries no level, and the retryable codes say the server did not run the call; a
// no-side-effects call sent as an HTTP GET is retried as a GET. Streams carry the
// ownership and are not retried: their messages are the caller's. A call under an owner makes one attempt, and its error, still marked
// retryable, goes up to that owner.
//
// # Shedding
//
// [NewShedInterceptor] admits a handler's calls through a shed.Shedder and answers the
// rest in the call's own protocol — resource_exhausted (HTTP 429 in the Connect
// protocol) with Retry-After, Grpc-Retry-Pushback-Ms and callpath.HeaderRefused — so
// connect, grpc-go and Backstop clients all come back later, and a Backstop caller's
// breaker does not count a server protecting itself. Retries are shed first.
package connectpolicy
