package event_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/event"
)

func TestEventString(t *testing.T) {
	refused := errors.New("dial tcp: connection refused")
	at := time.Date(2026, time.March, 1, 12, 0, 0, 500_000_000, time.UTC)
	tests := []struct {
		name string
		e    event.Event
		want string
	}{
		// One row per kind, with the fields its stage sets.
		{"call start", event.Event{Kind: event.CallStart, Pipeline: "db", Context: context.Background()},
			`call_start pipeline=db`},
		{"call end", event.Event{Kind: event.CallEnd, Pipeline: "db", Elapsed: 42 * time.Millisecond, Err: refused},
			`call_end pipeline=db elapsed=42ms err="dial tcp: connection refused"`},
		{"attempt start", event.Event{Kind: event.AttemptStart, Pipeline: "db", Stage: "retry", Attempt: 1},
			`attempt_start pipeline=db stage=retry attempt=1`},
		{"attempt end", event.Event{Kind: event.AttemptEnd, Pipeline: "db", Stage: "retry", Attempt: 2, Elapsed: 3 * time.Millisecond},
			`attempt_end pipeline=db stage=retry attempt=2 elapsed=3ms`},
		{"retry scheduled", event.Event{Kind: event.RetryScheduled, Pipeline: "db", Stage: "retry", Attempt: 2,
			Delay: 120 * time.Millisecond, Reason: "timeout", Err: refused},
			`retry_scheduled pipeline=db stage=retry attempt=2 delay=120ms reason=timeout err="dial tcp: connection refused"`},
		{"retry suppressed", event.Event{Kind: event.RetrySuppressed, Pipeline: "db", Stage: "retry", Attempt: 3,
			Reason: event.SuppressedBudget, Err: refused},
			`retry_suppressed pipeline=db stage=retry attempt=3 reason=budget err="dial tcp: connection refused"`},
		{"breaker state", event.Event{Kind: event.BreakerState, Pipeline: "db", Stage: "breaker", Source: "db", From: "closed", To: "open"},
			`breaker_state pipeline=db stage=breaker source=db from=closed to=open`},
		// Source equals Stage for a stage with no name: it is said once.
		{"deadline exceeded", event.Event{Kind: event.DeadlineExceeded, Pipeline: "db", Stage: "attempt_timeout",
			Source: "attempt_timeout", Elapsed: 300 * time.Millisecond, Err: context.DeadlineExceeded},
			`deadline_exceeded pipeline=db stage=attempt_timeout elapsed=300ms err="context deadline exceeded"`},
		{"shed", event.Event{Kind: event.Shed, Pipeline: "api", Stage: "shed", Source: "front", Reason: "limit",
			Priority: "sheddable", Delay: time.Second, Level: 12.5},
			`shed pipeline=api stage=shed source=front delay=1s reason=limit priority=sheddable level=12.5`},
		{"fleet", event.Event{Kind: event.Fleet, Stage: "breaker", Source: "db", Reason: "breaker",
			From: event.FleetShared, To: event.FleetLocal, Err: errors.New("redis: timeout")},
			`fleet_state stage=breaker source=db reason=breaker from=shared to=local err="redis: timeout"`},
		{"panic", event.Event{Kind: event.Panic, Pipeline: "db", Stage: "retry", Source: "hedge", Attempt: 2, Err: errors.New("panic: boom")},
			`panic pipeline=db stage=retry source=hedge attempt=2 err="panic: boom"`},
		{"fallback", event.Event{Kind: event.Fallback, Pipeline: "db", Stage: "fallback", Source: "cache", Reason: "rejected", To: "last_good", Err: refused},
			`fallback pipeline=db stage=fallback source=cache reason=rejected to=last_good err="dial tcp: connection refused"`},
		{"rejected", event.Event{Kind: event.Rejected, Pipeline: "db", Stage: "bulkhead", Source: "db", Reason: "queue",
			Delay: 1200 * time.Millisecond, Elapsed: 5 * time.Millisecond, Err: errors.New("bulkhead db: rejected (queue); retry after 1.2s")},
			`rejected pipeline=db stage=bulkhead source=db delay=1.2s elapsed=5ms reason=queue err="bulkhead db: rejected (queue); retry after 1.2s"`},
		{"waited", event.Event{Kind: event.Waited, Pipeline: "db", Stage: "rate_limit", Source: "api", Delay: 250 * time.Millisecond},
			`waited pipeline=db stage=rate_limit source=api delay=250ms`},
		{"config reload", event.Event{Kind: event.ConfigReload, Source: "config", Reason: event.ConfigRefused, Err: errors.New("line 3: unknown stage")},
			`config_reload source=config reason=refused err="line 3: unknown stage"`},
		{"stage reset", event.Event{Kind: event.StageReset, Pipeline: "db", Source: "breaker", Reason: "changed", To: "open"},
			`stage_reset pipeline=db source=breaker reason=changed to=open`},

		// The edges: time, quoting, nothing set, an unknown kind.
		{"time last", event.Event{Kind: event.CallStart, Pipeline: "db", Time: at},
			`call_start pipeline=db time=2026-03-01T12:00:00.5Z`},
		{"quoted name", event.Event{Kind: event.BreakerState, Stage: "breaker", Source: `my "db"`, From: "open", To: "half_open"},
			`breaker_state stage=breaker source="my \"db\"" from=open to=half_open`},
		{"zero", event.Event{}, `unknown`},
		{"unknown kind", event.Event{Kind: 200, Pipeline: "db"}, `unknown pipeline=db`},
	}
	covered := map[event.Kind]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			covered[tt.e.Kind] = true
			if got := tt.e.String(); got != tt.want {
				t.Errorf("Event.String() = %s\nwant                %s", got, tt.want)
			}
			if strings.Contains(tt.e.String(), "\n") {
				t.Errorf("Event.String() = %q, want one line", tt.e.String())
			}
		})
	}
	// A kind added later needs a row of its own.
	for k := event.Kind(1); k.String() != "unknown"; k++ {
		if !covered[k] {
			t.Errorf("no row for kind %s", k)
		}
	}
}
