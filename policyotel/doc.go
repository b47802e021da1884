// Package policyotel is an event.Observer that records Backstop's events as
// OpenTelemetry metrics and as events on the active trace span of each call.
//
// # Metrics
//
// Instruments follow OTel's naming guidance (dotted names, units in UCUM, counts as
// {annotations}); their attributes are bounded as the Prometheus series' are:
// pipeline, outcome, reason, breaker, shedder, priority — never URLs or error text.
//
//	| instrument                     | kind      | unit       | attributes                  |
//	|--------------------------------|-----------|------------|-----------------------------|
//	| backstop.calls                 | counter   | {call}     | pipeline, outcome           |
//	| backstop.call.duration         | histogram | s          | pipeline                    |
//	| backstop.attempts              | counter   | {attempt}  | pipeline, outcome           |
//	| backstop.retries               | counter   | {retry}    | pipeline, reason            |
//	| backstop.retries.suppressed    | counter   | {retry}    | pipeline, reason            |
//	| backstop.deadlines.exceeded    | counter   | {deadline} | pipeline, kind              |
//	| backstop.breaker.transitions   | counter   | {transition} | breaker, from, to         |
//	| backstop.breaker.state         | gauge     | 1          | breaker (0 closed, 1 half-open, 2 open) |
//	| backstop.shed.requests         | counter   | {request}  | shedder, reason, priority   |
//	| backstop.shed.retry_after      | histogram | s          | shedder                     |
//	| backstop.shed.admitted         | async counter | {request} | shedder (AddShedder)     |
//	| backstop.shed.inflight, .limit, .queue_length | async gauge | {request} | shedder (AddShedder) |
//	| backstop.budget.level          | async gauge | {retry}  | budget (AddBudget)          |
//	| backstop.fleet.transitions     | counter   | {transition} | policy, to (local, shared) |
//	| backstop.fallbacks             | counter   | {call}     | pipeline, fallback, reason, from |
//	| backstop.bulkhead.rejections   | counter   | {call}     | pipeline, bulkhead, reason  |
//	| backstop.ratelimit.rejections  | counter   | {call}     | pipeline, limiter, reason   |
//	| backstop.ratelimit.wait        | histogram | s          | limiter                     |
//
// # Traces
//
// On the span active in a call's context (the caller's, or an instrumented HTTP/gRPC
// client's) it adds an event per attempt (backstop.attempt, with
// http.request.resend_count for every attempt after the first, the HTTP semantic
// convention for a resend), per scheduled retry (backstop.retry: delay, reason), per
// suppressed retry (backstop.retry.suppressed: reason), per deadline exceeded, per
// refusal by a shedder (backstop.shed) and per call a policy refused — a breaker open,
// a request shed (backstop.call.rejected, with error.type the refusal's Go type), per
// fallback used (backstop.fallback), per refusal by a bulkhead or a rate limiter
// (backstop.bulkhead.rejected, backstop.ratelimit.rejected) and per wait for a token
// (backstop.ratelimit.wait). A span that is not recording costs nothing.
package policyotel
