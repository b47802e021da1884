package metrics

import (
	"context"
	"log/slog"

	"github.com/backstop-go/backstop/policy"
)

// Slog returns an Observer that logs, at level, the events an operator wants to read:
// retries scheduled and suppressed, deadlines exceeded, breaker transitions, refusals
// by a shedder and panics recovered (the error attribute holds the stack). Calls and
// attempts are left to metrics. Attribute names match the metric labels: pipeline,
// reason, why, breaker, from, to, shedder, priority, source.
func Slog(logger *slog.Logger, level slog.Level) policy.Observer {
	return &slogObserver{l: logger, level: level}
}

type slogObserver struct {
	l     *slog.Logger
	level slog.Level
}

// Needs says the log has no line for calls and attempts, so stages skip those events.
func (o *slogObserver) Needs(k policy.EventKind) policy.Needs {
	switch k {
	case policy.EventCallStart, policy.EventCallEnd, policy.EventAttemptStart, policy.EventAttemptEnd:
		return policy.NeedsNothing
	}
	return policy.NeedsTiming
}

func (o *slogObserver) Observe(e policy.Event) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, o.level) {
		return
	}
	switch e.Kind {
	case policy.EventRetryScheduled:
		o.l.LogAttrs(ctx, o.level, "retry scheduled", slog.String("pipeline", e.Pipeline), slog.Int("attempt", e.Attempt),
			slog.Duration("delay", e.Delay), slog.String("reason", e.Reason), errAttr(e.Err))
	case policy.EventRetrySuppressed:
		o.l.LogAttrs(ctx, o.level, "retry suppressed", slog.String("pipeline", e.Pipeline), slog.Int("attempts", e.Attempt),
			slog.String("why", e.Reason), errAttr(e.Err))
	case policy.EventDeadlineExceeded:
		o.l.LogAttrs(ctx, o.level, "deadline exceeded", slog.String("pipeline", e.Pipeline), slog.String("kind", e.Source),
			slog.Duration("elapsed", e.Elapsed))
	case policy.EventBreakerState:
		o.l.LogAttrs(ctx, o.level, "breaker state changed", slog.String("breaker", e.Source), slog.String("from", e.From),
			slog.String("to", e.To), slog.String("pipeline", e.Pipeline))
	case policy.EventShed:
		o.l.LogAttrs(ctx, o.level, "request shed", slog.String("shedder", e.Source), slog.String("reason", e.Reason),
			slog.String("priority", e.Priority), slog.Duration("retry_after", e.Delay))
	case policy.EventFleet:
		o.l.LogAttrs(ctx, o.level, "fleet policy changed what decides", slog.String("policy", e.Source), slog.String("kind", e.Reason), slog.String("from", e.From),
			slog.String("to", e.To), errAttr(e.Err))
	case policy.EventPanic:
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
