package metrics

import (
	"context"
	"log/slog"

	"github.com/backstop-go/backstop/event"
)

// Slog returns an Observer that logs, at level, the events an operator wants to read.
// These are retries scheduled and suppressed, deadlines exceeded, breaker transitions,
// requests shed, and fallbacks used. Any stage's rejections and waits are logged too,
// and panics recovered (the error attribute holds the stack). Calls and attempts are
// left to metrics. Attribute names match the metric labels: pipeline, reason, why,
// breaker, from, to, shedder, priority, source, fallback, policy, name.
func Slog(logger *slog.Logger, level slog.Level) event.Observer {
	return &slogObserver{l: logger, level: level}
}

type slogObserver struct {
	l     *slog.Logger
	level slog.Level
}

// Needs says the log has no line for calls and attempts, so stages skip those events.
func (o *slogObserver) Needs(k event.Kind) event.Needs {
	switch k {
	case event.CallStart, event.CallEnd, event.AttemptStart, event.AttemptEnd:
		return event.NeedsNothing
	}
	return event.NeedsTiming
}

func (o *slogObserver) Observe(e event.Event) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, o.level) {
		return
	}
	switch e.Kind {
	case event.RetryScheduled:
		o.l.LogAttrs(ctx, o.level, "retry scheduled", slog.String("pipeline", e.Pipeline), slog.Int("attempt", e.Attempt),
			slog.Duration("delay", e.Delay), slog.String("reason", e.Reason), errAttr(e.Err))
	case event.RetrySuppressed:
		o.l.LogAttrs(ctx, o.level, "retry suppressed", slog.String("pipeline", e.Pipeline), slog.Int("attempts", e.Attempt),
			slog.String("why", e.Reason), errAttr(e.Err))
	case event.DeadlineExceeded:
		o.l.LogAttrs(ctx, o.level, "deadline exceeded", slog.String("pipeline", e.Pipeline), slog.String("kind", e.Source),
			slog.Duration("elapsed", e.Elapsed))
	case event.BreakerState:
		o.l.LogAttrs(ctx, o.level, "breaker state changed", slog.String("breaker", e.Source), slog.String("from", e.From),
			slog.String("to", e.To), slog.String("pipeline", e.Pipeline))
	case event.Shed:
		o.l.LogAttrs(ctx, o.level, "request shed", slog.String("shedder", e.Source), slog.String("reason", e.Reason),
			slog.String("priority", e.Priority), slog.Duration("retry_after", e.Delay))
	case event.Fleet:
		o.l.LogAttrs(ctx, o.level, "fleet policy changed what decides", slog.String("policy", e.Source), slog.String("kind", e.Reason), slog.String("from", e.From),
			slog.String("to", e.To), errAttr(e.Err))
	case event.Fallback:
		o.l.LogAttrs(ctx, o.level, "fallback answered", slog.String("pipeline", e.Pipeline), slog.String("fallback", e.Source),
			slog.String("reason", e.Reason), slog.String("from", e.To), errAttr(e.Err))
	case event.Rejected:
		o.l.LogAttrs(ctx, o.level, "stage rejected", slog.String("pipeline", e.Pipeline), slog.String("policy", e.Stage),
			slog.String("name", e.Source), slog.String("reason", e.Reason), slog.Duration("retry_after", e.Delay),
			slog.Duration("waited", e.Elapsed))
	case event.Waited:
		o.l.LogAttrs(ctx, o.level, "stage waited", slog.String("pipeline", e.Pipeline), slog.String("policy", e.Stage),
			slog.String("name", e.Source), slog.Duration("waited", e.Delay))
	case event.Panic:
		o.l.LogAttrs(ctx, o.level, "panic recovered", slog.String("pipeline", e.Pipeline), slog.String("source", e.Source),
			slog.Int("attempt", e.Attempt), errAttr(e.Err))
	}
}

func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String("error", err.Error())
}
