package policyotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/backstop-go/backstop/event"
)

// admission holds the instruments of the stages that admit, refuse or replace calls
// client-side: fallbacks, bulkheads and rate limiters.
type admission struct {
	fallbacks, bulkhead, limited metric.Int64Counter
	waits                        metric.Float64Histogram
}

func newAdmission(m metric.Meter) (*admission, []error) {
	a := &admission{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	a.fallbacks = counter("backstop.fallbacks", "{call}", "Failed calls a fallback answered, by the failure's outcome and what answered.")
	a.bulkhead = counter("backstop.bulkhead.rejections", "{call}", "Calls or attempts a bulkhead refused, by why.")
	a.limited = counter("backstop.ratelimit.rejections", "{call}", "Calls or attempts a rate limiter refused, by why.")
	var err error
	a.waits, err = m.Float64Histogram("backstop.ratelimit.wait", metric.WithUnit("s"),
		metric.WithDescription("Waits for a rate limiter's token by calls that then went through."))
	errs = append(errs, err)
	return a, errs
}

func (a *admission) observe(ctx context.Context, e event.Event, span trace.Span, recording bool) {
	pipeline := attribute.String("pipeline", e.Pipeline)
	reason := attribute.String("reason", e.Reason)
	switch e.Kind {
	case event.Fallback:
		src := attribute.String("fallback", e.Source)
		a.fallbacks.Add(ctx, 1, metric.WithAttributes(pipeline, src, reason, attribute.String("from", e.To)))
		if recording {
			span.AddEvent("backstop.fallback", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline, src,
				attribute.String("backstop.reason", e.Reason), attribute.String("backstop.from", e.To)))
		}
	case event.BulkheadRejected:
		src := attribute.String("bulkhead", e.Source)
		a.bulkhead.Add(ctx, 1, metric.WithAttributes(pipeline, src, reason))
		if recording {
			span.AddEvent("backstop.bulkhead.rejected", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline, src,
				attribute.String("backstop.reason", e.Reason), attribute.Float64("backstop.retry_after_seconds", e.Delay.Seconds())))
		}
	case event.RateLimited:
		src := attribute.String("limiter", e.Source)
		if e.Err == nil { // it waited, and the call went through
			a.waits.Record(ctx, e.Delay.Seconds(), metric.WithAttributes(src))
			if recording {
				span.AddEvent("backstop.ratelimit.wait", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline, src,
					attribute.Float64("backstop.delay_seconds", e.Delay.Seconds())))
			}
			return
		}
		a.limited.Add(ctx, 1, metric.WithAttributes(pipeline, src, reason))
		if recording {
			span.AddEvent("backstop.ratelimit.rejected", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline, src,
				attribute.String("backstop.reason", e.Reason), attribute.Float64("backstop.retry_after_seconds", e.Delay.Seconds())))
		}
	}
}
