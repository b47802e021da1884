// Package policyotel is a policy.Observer that records Backstop's events as
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
//
// # Traces
//
// On the span active in a call's context (the caller's, or an instrumented HTTP/gRPC
// client's) it adds an event per attempt (backstop.attempt, with
// http.request.resend_count for every attempt after the first, the HTTP semantic
// convention for a resend), per scheduled retry (backstop.retry: delay, reason), per
// suppressed retry (backstop.retry.suppressed: reason), per deadline exceeded, per
// refusal by a shedder (backstop.shed) and per call a policy refused — a breaker open,
// a request shed (backstop.call.rejected, with error.type the refusal's Go type). A
// span that is not recording costs nothing.
package policyotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/backstop-go/backstop/policy"
)

// Scope is the instrumentation scope name of the meter.
const Scope = "github.com/backstop-go/backstop/policyotel"

// Observer records events as OTel metrics and span events. It is safe for concurrent
// use. Build it with [New].
type Observer struct {
	calls, attempts, retries, suppressed, deadlines, transitions, shed metric.Int64Counter
	duration, retryAfter                                               metric.Float64Histogram
	state                                                              metric.Int64Gauge
}

// New returns an Observer recording on mp's meter. mp is required: the global
// MeterProvider is used only if the caller passes it (otel.GetMeterProvider()).
func New(mp metric.MeterProvider) (*Observer, error) {
	if mp == nil {
		return nil, errors.New("policyotel: the MeterProvider is nil; pass one (otel.GetMeterProvider() for the global)")
	}
	m := mp.Meter(Scope)
	o := &Observer{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.calls = counter("backstop.calls", "{call}", "Calls that left a pipeline, by outcome.")
	o.attempts = counter("backstop.attempts", "{attempt}", "Attempts a pipeline's retry made, by outcome.")
	o.retries = counter("backstop.retries", "{retry}", "Retries scheduled, by why the error was retryable.")
	o.suppressed = counter("backstop.retries.suppressed", "{retry}", "Retries that would have happened and did not, by why.")
	o.deadlines = counter("backstop.deadlines.exceeded", "{deadline}", "Deadlines and per-attempt timeouts that ran out.")
	o.transitions = counter("backstop.breaker.transitions", "{transition}", "Breaker state changes.")
	o.shed = counter("backstop.shed.requests", "{request}", "Requests a shedder refused, by reason and priority.")
	var err error
	o.duration, err = m.Float64Histogram("backstop.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Time calls spent in a pipeline, retries and backoff included."))
	errs = append(errs, err)
	o.retryAfter, err = m.Float64Histogram("backstop.shed.retry_after", metric.WithUnit("s"),
		metric.WithDescription("Retry-After sent with refusals."))
	errs = append(errs, err)
	o.state, err = m.Int64Gauge("backstop.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("A breaker's state after its last transition: 0 closed, 1 half-open, 2 open."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policyotel: creating instruments: %w", err)
	}
	return o, nil
}

var states = map[string]int64{"closed": 0, "half-open": 1, "open": 2}

// Observe records e.
func (o *Observer) Observe(e policy.Event) {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	pipeline := attribute.String("pipeline", e.Pipeline)
	span := trace.SpanFromContext(ctx)
	recording := span.IsRecording()
	switch e.Kind {
	case policy.EventCallEnd:
		outcome := policy.Outcome(e.Err)
		o.calls.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("outcome", outcome)))
		o.duration.Record(ctx, e.Elapsed.Seconds(), metric.WithAttributes(pipeline))
		if recording && outcome == policy.OutcomeRejected {
			// error.type is the refusal's Go type (a breaker open, a shed): bounded, unlike its text.
			span.AddEvent("backstop.call.rejected", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline,
				attribute.String("error.type", fmt.Sprintf("%T", e.Err))))
		}
	case policy.EventAttemptStart:
		if recording {
			attrs := []attribute.KeyValue{pipeline, attribute.Int("backstop.attempt", e.Attempt)}
			if e.Attempt > 1 {
				attrs = append(attrs, attribute.Int("http.request.resend_count", e.Attempt-1))
			}
			span.AddEvent("backstop.attempt", trace.WithAttributes(attrs...), trace.WithTimestamp(e.Time))
		}
	case policy.EventAttemptEnd:
		o.attempts.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("outcome", policy.Outcome(e.Err))))
	case policy.EventRetryScheduled:
		o.retries.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("reason", e.Reason)))
		if recording {
			span.AddEvent("backstop.retry", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline,
				attribute.Int("backstop.attempt", e.Attempt), attribute.Float64("backstop.delay_seconds", e.Delay.Seconds()),
				attribute.String("backstop.reason", e.Reason)))
		}
	case policy.EventRetrySuppressed:
		o.suppressed.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("reason", e.Reason)))
		if recording {
			span.AddEvent("backstop.retry.suppressed", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline,
				attribute.String("backstop.reason", e.Reason), attribute.Int("backstop.attempts", e.Attempt)))
		}
	case policy.EventDeadlineExceeded:
		o.deadlines.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("kind", e.Source)))
		if recording {
			span.AddEvent("backstop.deadline.exceeded", trace.WithTimestamp(e.Time),
				trace.WithAttributes(pipeline, attribute.String("backstop.kind", e.Source)))
		}
	case policy.EventBreakerState:
		b := attribute.String("breaker", e.Source)
		o.transitions.Add(ctx, 1, metric.WithAttributes(b, attribute.String("from", e.From), attribute.String("to", e.To)))
		o.state.Record(ctx, states[e.To], metric.WithAttributes(b))
	case policy.EventShed:
		s := attribute.String("shedder", e.Source)
		o.shed.Add(ctx, 1, metric.WithAttributes(s, attribute.String("reason", e.Reason), attribute.String("priority", e.Priority)))
		if e.Delay > 0 {
			o.retryAfter.Record(ctx, e.Delay.Seconds(), metric.WithAttributes(s))
		}
		if recording {
			span.AddEvent("backstop.shed", trace.WithTimestamp(e.Time), trace.WithAttributes(s,
				attribute.String("backstop.reason", e.Reason), attribute.String("backstop.priority", e.Priority)))
		}
	}
}
