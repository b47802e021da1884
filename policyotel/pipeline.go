package policyotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// outcomes lists policy.Outcome's values in a fixed order, for attribute sets made
// once per pipeline.
var outcomes = [...]string{policy.OutcomeSuccess, policy.OutcomeFailure, policy.OutcomeRejected, policy.OutcomeCanceled, policy.OutcomeDeadline}

func outcomeIndex(outcome string) int {
	for i, o := range outcomes {
		if o == outcome {
			return i
		}
	}
	return len(outcomes) - 1
}

// ForPipeline prepares the observer for one pipeline, an optional method of
// event.Observer. Pipelines call it when they are bound. The Observer returned
// records their calls and attempts with attribute sets made once, not per event.
func (o *Observer) ForPipeline(name string) event.Observer {
	p := &pipelineObserver{o: o, pipeline: attribute.String("pipeline", name)}
	for i, oc := range outcomes {
		set := metric.WithAttributeSet(attribute.NewSet(p.pipeline, attribute.String("outcome", oc)))
		p.byOutcome[i] = []metric.AddOption{set}
	}
	p.duration = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(p.pipeline))}
	return p
}

// Needs says what the Observer reads; see needs.
func (o *Observer) Needs(k event.Kind) event.Needs { return needs(k) }

// needs says what the Observer reads of each kind. It reads nothing of call starts. It
// reads attempt starts and ends untimed, since an attempt's span event takes the span's
// own clock. It reads call ends with their Elapsed alone, for the duration histogram.
// It reads every other kind timed.
func needs(k event.Kind) event.Needs {
	switch k {
	case event.CallStart:
		return event.NeedsNothing
	case event.AttemptStart, event.AttemptEnd:
		return event.NeedsEvent
	case event.CallEnd:
		return event.NeedsElapsed
	}
	return event.NeedsTiming
}

// pipelineObserver is an Observer prepared for one pipeline.
type pipelineObserver struct {
	o         *Observer
	pipeline  attribute.KeyValue
	byOutcome [len(outcomes)][]metric.AddOption // {pipeline, outcome}
	duration  []metric.RecordOption             // {pipeline}
}

// Needs says what the Observer reads; see needs.
func (p *pipelineObserver) Needs(k event.Kind) event.Needs { return needs(k) }

func (p *pipelineObserver) Observe(e event.Event) {
	switch e.Kind {
	case event.CallStart:
	case event.CallEnd:
		ctx := contextOf(e)
		outcome := policy.Outcome(e.Err)
		p.o.calls.Add(ctx, 1, p.byOutcome[outcomeIndex(outcome)]...)
		p.o.duration.Record(ctx, e.Elapsed.Seconds(), p.duration...)
		if outcome == policy.OutcomeRejected {
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.AddEvent("backstop.call.rejected", stamp(e, trace.WithAttributes(p.pipeline, refusalType(e.Err)))...)
			}
		}
	case event.AttemptEnd:
		p.o.observeGRPC(e)
		p.o.attempts.Add(contextOf(e), 1, p.byOutcome[outcomeIndex(policy.Outcome(e.Err))]...)
	case event.AttemptStart:
		if e.Context != nil && trace.SpanFromContext(e.Context).IsRecording() {
			p.o.Observe(e) // the attempt's span event, and the gRPC call's count
		} else {
			p.o.observeGRPC(e)
		}
	default:
		p.o.Observe(e)
	}
}

// contextOf is the event's context, or context.Background() if it has none.
func contextOf(e event.Event) context.Context {
	if e.Context == nil {
		return context.Background()
	}
	return e.Context
}

// stamp returns opts with e's time as the span event's timestamp, if the event has one.
// Without it the span stamps the event with its own clock, now.
func stamp(e event.Event, opts ...trace.EventOption) []trace.EventOption {
	if e.Time.IsZero() {
		return opts
	}
	return append(opts, trace.WithTimestamp(e.Time))
}
