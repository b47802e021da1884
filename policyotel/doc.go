// Package policyotel is an event.Observer that records Backstop's events as
// OpenTelemetry metrics and as events on the active trace span of each call.
//
// # Metrics
//
// Instruments follow OTel's naming guidance: dotted names, units in UCUM, counts as
// {annotations}. Their attributes are bounded as the Prometheus series' are: pipeline,
// outcome, reason, breaker, shedder, priority, policy, name. They never hold URLs or
// error text.
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
//	| backstop.rejections            | counter   | {call}     | pipeline, policy, name, reason |
//	| backstop.wait                  | histogram | s          | policy, name                |
//	| backstop.stage.<gauge>         | async gauge | (none)   | policy, name (policy.Publisher) |
//
// The Observer knows no stage by name: it reads what a stage publishes. Every
// event.Rejected counts in backstop.rejections. Every event.Waited goes into
// backstop.wait. The attribute policy is the stage's Placement().Kind, and name its own
// name. Each gauge a policy.Publisher publishes is read as backstop.stage.<gauge>. A
// stage in an observed pipeline is added when the pipeline is bound. Add one in no
// pipeline with [Observer.AddStage]. A stage written outside Backstop gets the same
// instruments.
//
// # gRPC retry metrics (gRFC A96)
//
// For a gRPC client call it also records gRFC A96's histograms, once per call at its
// end. Each has grpc.method and grpc.target (gRFC A66's attributes) and A96's buckets:
//
//	| instrument                           | unit                | buckets            | recorded                        |
//	|--------------------------------------|---------------------|--------------------|---------------------------------|
//	| grpc.client.call.retries             | {retry}             | 1, 2, 3, 4, 5      | attempts after the first; not 0 |
//	| grpc.client.call.hedges              | {hedge}             | 1, 2, 3, 4, 5      | hedged attempts after the first; not 0 |
//	| grpc.client.call.transparent_retries | {transparent_retry} | 1, 2, 3, 4, 5, 10  | gRPC's own resends; not 0       |
//	| grpc.client.call.retry_delay         | s                   | A66's latency ones | every call, 0 included          |
//
// A call is a gRPC call when its context carries a [GRPCCall]. Package grpcmetrics
// starts one for every call of a channel. It does so from interceptors that stand
// outside the pipeline's (policygrpc's). The pipeline's events fill the call in when
// the Observer that started it observes the pipeline.
//
//   - Retries and hedges are the attempts the pipeline's retry or hedge started after
//     the first. They count whether or not a stage inside it refused one before it was
//     sent. A call is hedged if a hedge's timer started an attempt (retry_scheduled
//     with Reason "hedge"). It is hedged too if an attempt started while another was in
//     flight. A hedge whose every extra attempt followed a failure with nothing else in
//     flight cannot be told from a retry by its events. It is counted as retries.
//   - The retry delay is the time with no attempt in flight between an attempt's end
//     and the next one's start. It is read on the clock given to
//     [Observer.StartGRPCCall] (grpcmetrics.Options.Clock), as gRPC's call tracers time
//     it. It is the backoff slept, plus the retry's own overhead. The time before the
//     first attempt is not counted, nor is a backoff the call's end cut short.
//   - Transparent retries are the attempts gRPC itself sends again, below every
//     interceptor, when a stream never reached the server application. Only a stats
//     handler sees them: grpcmetrics installs one.
//
// grpc-go's own OpenTelemetry plugin (stats/opentelemetry) does not record these
// instruments in the version this module is tested with (v1.83). A plugin that does, on
// the same MeterProvider, records them under its own scope (grpc-go). With policygrpc's
// dial options grpc-go's retry is off, so that plugin would see no retry or hedge.
//
// # Traces
//
// The Observer writes to the span active in a call's context: the caller's, or an
// instrumented HTTP/gRPC client's. On it, it adds these events:
//   - backstop.attempt, per attempt, with http.request.resend_count for every
//     attempt after the first (the HTTP semantic convention for a resend);
//   - backstop.retry, per scheduled retry: delay, reason;
//   - backstop.retry.suppressed, per suppressed retry: reason;
//   - backstop.deadline.exceeded, per deadline exceeded;
//   - backstop.shed, per refusal by a shedder;
//   - backstop.rejected, per rejection a stage reports (event.Rejected): policy,
//     name, reason, retry_after;
//   - backstop.wait, per call a stage held, then let through (event.Waited):
//     policy, name, delay;
//   - backstop.fallback, per fallback used;
//   - backstop.call.rejected, per call a stage refused. Its error.type is the
//     refusing stage's kind ("breaker", "shed").
//
// A span that is not recording costs nothing.
package policyotel
