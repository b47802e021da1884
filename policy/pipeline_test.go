package policy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

var errBoom = errors.New("boom")

// recorder is an Observer that keeps every event.
type recorder struct{ events []event.Event }

func (r *recorder) Observe(e event.Event) { r.events = append(r.events, e) }

func (r *recorder) kinds() []event.Kind {
	var ks []event.Kind
	for _, e := range r.events {
		ks = append(ks, e.Kind)
	}
	return ks
}

func TestPipeline_DoReportsCallEvents(t *testing.T) {
	clock := policytest.NewClock(time.Unix(1000, 0))
	var rec recorder
	p := policy.Must(policy.Wrap(br())).With(policy.Name("db"), policy.Observe(&rec), policy.UseClock(clock))
	err := p.Do(context.Background(), func(context.Context) error {
		clock.Advance(30 * time.Millisecond)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, []event.Kind{event.CallStart, event.CallEnd}, rec.kinds())
	end := rec.events[1]
	require.Equal(t, "db", end.Pipeline)
	require.Equal(t, 30*time.Millisecond, end.Elapsed, "CallEnd.Elapsed by the pipeline's clock")
	require.ErrorIs(t, end.Err, errBoom)
}

func TestPipeline_DoRefusesNilFunc(t *testing.T) {
	p := policy.Must(policy.Wrap())
	if err := p.Do(context.Background(), nil); err == nil {
		t.Error("Do(ctx, nil) = nil; want an error")
	}
}

// TestPipeline_NilPipelineRunsNoCall: a nil pipeline never runs a call bare; only
// NoProtection, named so in the source, does.
func TestPipeline_NilPipelineRunsNoCall(t *testing.T) {
	var p *policy.Pipeline
	calls := 0
	fn := func(context.Context) error { calls++; return errBoom }
	require.ErrorIs(t, p.Do(context.Background(), fn), policy.ErrNoPipeline)
	_, err := policy.Get(context.Background(), p, func(context.Context) (int, error) { calls++; return 1, nil })
	require.ErrorIs(t, err, policy.ErrNoPipeline)
	require.Equal(t, 0, calls)
	require.Equal(t, "", p.Name())
	require.Equal(t, "(nil pipeline)", p.String())
	require.Nil(t, p.With(policy.Name("x")), "With keeps a nil pipeline nil")

	bare := policy.NoProtection()
	require.Equal(t, "no protection: (empty)", bare.String())
	require.ErrorIs(t, bare.Do(context.Background(), fn), errBoom)
	require.Equal(t, 1, calls)
}

func TestGet(t *testing.T) {
	p := policy.Must(policy.Wrap(dl(), rt()))
	v, err := policy.Get(context.Background(), p, func(context.Context) (int, error) { return 42, nil })
	require.NoError(t, err)
	require.Equal(t, 42, v)

	v, err = policy.Get(context.Background(), p, func(context.Context) (int, error) { return 7, errBoom })
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, 0, v, "Get returns the zero value with an error")
}

func TestObservers(t *testing.T) {
	require.Nil(t, event.Observers(), "Observers() with none")
	require.Nil(t, event.Observers(nil, nil), "Observers(nil, nil)")
	var a, b recorder
	require.Same(t, &a, event.Observers(nil, &a), "a single observer is returned as is")
	all := event.Observers(&a, event.Observers(&b, nil), nil)
	all.Observe(event.Event{Kind: event.CallStart})
	require.Len(t, a.events, 1)
	require.Len(t, b.events, 1)
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "success"},
		{errBoom, "failure"},
		{fmt.Errorf("wrapped: %w", policy.ErrRejected), "rejected"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), "deadline"},
	}
	for _, tt := range tests {
		if got := policy.Outcome(tt.err); got != tt.want {
			t.Errorf("Outcome(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}

func TestKindAndEventNames(t *testing.T) {
	require.Equal(t, "retry_suppressed", event.RetrySuppressed.String())
	require.Equal(t, "unknown", event.Kind(0).String())
}

// preparing is an Observer with a ForPipeline method that records the names it was
// prepared for.
type preparing struct {
	recorder
	names []string
}

func (p *preparing) ForPipeline(name string) event.Observer {
	p.names = append(p.names, name)
	return &p.recorder
}

func TestForPipeline_PreparedOncePerBinding(t *testing.T) {
	var po preparing
	var plain recorder
	p := policy.Must(policy.Wrap(br())).With(policy.Name("db"), policy.Observe(event.Observers(&po, &plain)))
	for range 3 {
		_ = p.Do(context.Background(), func(context.Context) error { return nil })
	}
	require.Equal(t, []string{"db"}, po.names, "prepared once, when bound")
	require.Len(t, po.events, 6, "its prepared observer gets the events")
	require.Len(t, plain.events, 6, "a plain observer beside it too")
	p.With(policy.Name("orders"))
	require.Equal(t, []string{"db", "orders"}, po.names, "prepared again when re-bound")
}

// selective needs what its map says, and records what it is handed.
type selective struct {
	needs  map[event.Kind]event.Needs
	events []event.Event
}

func (s *selective) Observe(e event.Event)          { s.events = append(s.events, e) }
func (s *selective) Needs(k event.Kind) event.Needs { return s.needs[k] }

// countingClock counts its reads.
type countingClock struct {
	clock.Clock
	reads int
}

func (c *countingClock) Now() time.Time { c.reads++; return c.Clock.Now() }

func TestNeeds_StagesSkipWhatTheObserverDoesNotRead(t *testing.T) {
	clk := &countingClock{Clock: policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)}
	obs := &selective{needs: map[event.Kind]event.Needs{
		event.CallEnd:    event.NeedsTiming,
		event.AttemptEnd: event.NeedsEvent,
	}}
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{Clock: clk})))).With(policy.Observe(obs), policy.UseClock(clk))
	require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }))
	require.Len(t, obs.events, 2, "no call start, no attempt start")
	require.Equal(t, event.AttemptEnd, obs.events[0].Kind)
	require.True(t, obs.events[0].Time.IsZero(), "an attempt end without its time: no clock read for it")
	require.Equal(t, event.CallEnd, obs.events[1].Kind)
	require.False(t, obs.events[1].Time.IsZero())
	require.Equal(t, 2, clk.reads, "the call's start and end, nothing else")

	// Observers together need what any of them needs; a plain Observer needs everything, timed.
	plain := event.ObserverFunc(func(event.Event) {})
	require.Equal(t, event.NeedsTiming, event.NeedsOf(event.Observers(obs, plain), event.AttemptStart))
	require.Equal(t, event.NeedsEvent, event.NeedsOf(event.Observers(obs, &selective{}), event.AttemptEnd))
	require.Equal(t, event.NeedsNothing, event.NeedsOf(nil, event.CallEnd))
}

// TestGet_UnderAHedgeKeepsOneAttemptsValue guards the value Get returns when a hedge
// runs two attempts at once and both succeed: only the winner writes it (run with
// -race, two writers are a data race).
func TestGet_UnderAHedgeKeepsOneAttemptsValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: time.Millisecond}))))
		for range 10 {
			v, err := policy.Get(context.Background(), p, func(ctx context.Context) (int, error) {
				n, _, _ := callpath.Attempt(ctx)
				time.Sleep(3 * time.Millisecond) // the hedge starts attempt 2 while attempt 1 runs
				return n, nil
			})
			require.NoError(t, err)
			require.Contains(t, []int{1, 2}, v)
		}
	})
}
