// Package metrics turns Backstop's events into Prometheus series and structured logs. A
// rising retry rate is often the first sign that a dependency is in trouble. So every
// retry, suppression, breaker transition and shed request is counted.
//
// # Wiring
//
//	reg := prometheus.NewRegistry()
//	obs, err := metrics.New(reg, metrics.Options{
//		Budgets:  map[string]metrics.Leveler{"db": dbBudget},
//		Shedders: map[string]metrics.ShedGauges{"api": shedder},
//	})
//	p = p.With(policy.Name("db"), policy.Observe(event.Observers(obs, metrics.Slog(logger, slog.LevelInfo))))
//	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Register each thing once. A shedder listed in Options.Shedders (or added with
// [Observer.AddShedder]) exports every shed series: its gauges, its admissions and each
// of its refusals. Each refusal is counted once, whichever way it refused and whatever
// observer its own Options name. A stage inside a pipeline the Observer observes is
// exported when the pipeline is bound ([Observer.Register]). The db breaker of p above
// needs no Options.Breakers. List breakers that are in no observed pipeline (a
// shed.Options.Breaker, say).
//
// # Stages
//
// The Observer knows no stage by name: it reads what a stage publishes. Every
// event.Rejected counts in backstop_rejections_total, labelled with the stage's
// kind (policy), its name and its reason. Every event.Waited goes into
// backstop_wait_seconds. A stage that implements policy.Publisher has each of its
// gauges exported as backstop_stage_<gauge>{policy, name}. A rate limiter, say,
// publishes backstop_stage_tokens{policy="rate_limit"}. A stage written outside
// Backstop gets the same series. Add one that is in no observed pipeline with
// [Observer.AddStage].
//
// Use one [Observer] per registry and share it between pipelines. Each pipeline's
// series are resolved once, when the pipeline is bound, so a call does no label
// lookups. A call's own series (calls, attempts, duration) are Backstop's counters,
// read at scrape time. A call adds to a few words picked among per-pipeline stripes.
// There are about four stripes per processor, at most 32 stripes of 256 bytes with the
// default buckets. So calls on several cores do not contend. A call sums its duration
// in integer nanoseconds. With Options.NativeHistograms the duration goes through
// client_golang's histogram instead. Names of pipelines and stages become label values:
// keep them to a small fixed set.
//
// # Series
//
//	| name                                 | type      | labels                   | meaning                                              |
//	|--------------------------------------|-----------|--------------------------|------------------------------------------------------|
//	| backstop_calls_total                 | counter   | pipeline, outcome        | calls that left a pipeline                           |
//	| backstop_call_duration_seconds       | histogram | pipeline                 | time in the pipeline, retries and backoff included   |
//	| backstop_attempts_total              | counter   | pipeline, outcome        | attempts made by the pipeline's retry                |
//	| backstop_retries_total               | counter   | pipeline, reason         | retries scheduled (retryable, hint, timeout, network, custom, hedge) |
//	| backstop_retries_suppressed_total    | counter   | pipeline, why            | retries that did not happen (owner, budget, deadline, hint) |
//	| backstop_deadlines_exceeded_total    | counter   | pipeline, kind           | deadlines run out (deadline, attempt_timeout)        |
//	| backstop_budget_level                | gauge     | budget                   | tokens left, or retries that may start now           |
//	| backstop_breaker_state               | gauge     | breaker                  | 0 closed, 1 half-open, 2 open (live for Options.Breakers) |
//	| backstop_breaker_transitions_total   | counter   | breaker, from, to        | breaker state changes                                |
//	| backstop_shed_requests_total         | counter   | shedder, reason, priority| requests refused                                     |
//	| backstop_shed_retry_after_seconds    | histogram | shedder                  | Retry-After sent with refusals                       |
//	| backstop_shed_inflight               | gauge     | shedder                  | admitted requests in flight                          |
//	| backstop_shed_limit                  | gauge     | shedder                  | current concurrency limit                            |
//	| backstop_shed_queue_length           | gauge     | shedder                  | requests waiting for a slot                          |
//	| backstop_shed_admitted_total         | counter   | shedder                  | requests admitted (shed.Shedder registered)          |
//	| backstop_cache_requests_total        | counter   | cache, result            | coalesce gets: hit, miss, coalesced, stale (AddCache) |
//	| backstop_cache_refreshes_total       | counter   | cache                    | origin loads of a coalescing cache                   |
//	| backstop_cache_load_errors_total     | counter   | cache                    | origin loads that failed                             |
//	| backstop_redeliver_deliveries_total  | counter   | queue                    | deliveries a redelivery policy decided (AddRedeliver) |
//	| backstop_redeliver_delay_seconds     | histogram | queue                    | delays of redeliveries; _count is the redeliveries   |
//	| backstop_redeliver_dead_lettered_total | counter | queue, reason            | dead-lettered: permanent, exhausted                  |
//	| backstop_fleet_transitions_total     | counter   | policy, kind, to         | fleet policies falling back to local state, and back (kind: breaker, budget, quota; to: local, shared) |
//	| backstop_panics_total                | counter   | pipeline, source         | panics recovered on goroutines Backstop started (source: coalesce, hedge, redeliver/jetstream) |
//	| backstop_throttle_probability        | gauge     | throttle                 | the chance an adaptive throttle refuses a request now (AddThrottle) |
//	| backstop_throttle_refused_total      | counter   | throttle                 | requests an adaptive throttle refused locally (AddThrottle) |
//	| backstop_fallbacks_total             | counter   | pipeline, fallback, reason, from | failed calls a fallback answered (reason: failure, rejected, deadline; from: value, func, last_good) |
//	| backstop_rejections_total            | counter   | pipeline, policy, name, reason | calls or attempts a stage rejected (event.Rejected) |
//	| backstop_wait_seconds                | histogram | policy, name             | waits of calls a stage held, then let through (event.Waited) |
//	| backstop_stage_<gauge>               | gauge     | policy, name             | a gauge a stage publishes (policy.Publisher), read at scrape |
//
// The label outcome is one of success, failure, rejected, canceled, deadline
// (policy.Outcome). The label policy is a stage's Placement().Kind: "rate_limit", say,
// or a third party's kind. No label ever holds error text, a URL or request data.
//
// Series exist from the start, at 0, wherever their labels are known in advance:
//
//   - a pipeline's calls, attempts, retries, suppressions and deadlines, when it is
//     bound;
//   - the state and transitions of breakers listed in Options.Breakers (or added with
//     [Observer.AddBreaker]);
//   - the gauges of budgets and shedders listed in Options.
//
// A breaker transition that reaches the Observer through several pipelines that share
// the breaker is counted once.
//
// # Logs
//
// [Slog] logs the same events with attributes named as the labels above.
package metrics
