package policyotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/backstop-go/backstop/event"
)

// admission holds the instruments of the stages that admit, refuse or replace calls
// client-side. That is fallbacks, and every stage's rejections and waits.
type admission struct {
	fallbacks, rejections metric.Int64Counter
	waits                 metric.Float64Histogram
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
	a.rejections = counter("backstop.rejections", "{call}", "Calls or attempts a stage rejected, by the stage's kind (policy), its name and why.")
	var err error
	a.waits, err = m.Float64Histogram("backstop.wait", metric.WithUnit("s"),
		metric.WithDescription("Time calls waited in a stage that then let them through."))
	errs = append(errs, err)
	return a, errs
}

func (a *admission) observe(ctx context.Context, e event.Event, span trace.Span, recording bool) {
	pipeline := attribute.String("pipeline", e.Pipeline)
	switch e.Kind {
	case event.Fallback:
		src := attribute.String("fallback", e.Source)
		a.fallbacks.Add(ctx, 1, metric.WithAttributes(pipeline, src, attribute.String("reason", e.Reason), attribute.String("from", e.To)))
		if recording {
			span.AddEvent("backstop.fallback", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline, src,
				attribute.String("backstop.reason", e.Reason), attribute.String("backstop.from", e.To)))
		}
	case event.Rejected:
		stage, name := attribute.String("policy", e.Stage), attribute.String("name", e.Source)
		a.rejections.Add(ctx, 1, metric.WithAttributes(pipeline, stage, name, attribute.String("reason", e.Reason)))
		if recording {
			span.AddEvent("backstop.rejected", stamp(e, trace.WithAttributes(pipeline, stage, name,
				attribute.String("backstop.reason", e.Reason), attribute.Float64("backstop.retry_after_seconds", e.Delay.Seconds())))...)
		}
	case event.Waited:
		stage, name := attribute.String("policy", e.Stage), attribute.String("name", e.Source)
		a.waits.Record(ctx, e.Delay.Seconds(), metric.WithAttributes(stage, name))
		if recording {
			span.AddEvent("backstop.wait", stamp(e, trace.WithAttributes(pipeline, stage, name,
				attribute.Float64("backstop.delay_seconds", e.Delay.Seconds())))...)
		}
	}
}
