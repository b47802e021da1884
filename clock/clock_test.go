package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
)

func TestStopwatch_ReadsOnlyWhatTheEventNeeds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		needs   event.Needs
		reads   int
		now     time.Time
		elapsed time.Duration
	}{
		{event.NeedsNothing, 0, time.Time{}, 0},
		{event.NeedsEvent, 0, time.Time{}, 0},
		{event.NeedsElapsed, 2, t0.Add(3 * time.Second), 3 * time.Second}, // a fake clock is read as it is
		{event.NeedsTiming, 2, t0.Add(3 * time.Second), 3 * time.Second},
	} {
		fake := policytest.NewClock(t0)
		c := &countingClock{Clock: fake}
		w := clock.StartStopwatch(c, tt.needs)
		fake.Advance(3 * time.Second)
		now, elapsed := w.Stop()
		require.Equal(t, tt.reads, c.reads, "clock reads for needs %d", tt.needs)
		require.Equal(t, tt.now, now, "time for needs %d", tt.needs)
		require.Equal(t, tt.elapsed, elapsed, "elapsed for needs %d", tt.needs)
	}
}

func TestStopwatch_OnTheSystemClockElapsedAloneSkipsTheWallClock(t *testing.T) {
	before := time.Now()
	w := clock.StartStopwatch(clock.System(), event.NeedsElapsed)
	inner := time.Now()
	for time.Since(inner) <= 0 { // let the monotonic clock move
	}
	now, elapsed := w.Stop()
	outer := time.Since(before)
	require.True(t, now.IsZero(), "no wall time is read for NeedsElapsed: %v", now)
	require.Positive(t, elapsed)
	require.LessOrEqual(t, elapsed, outer, "the interval lies within the one measured around it")
	require.True(t, w.Started().IsZero())

	w = clock.StartStopwatch(clock.System(), event.NeedsTiming)
	require.False(t, w.Started().Before(before), "NeedsTiming reads the wall clock at the start")
	now, _ = w.Stop()
	require.False(t, now.Before(w.Started()))
}

// elapsedOnly reads call ends with their Elapsed, and nothing else.
type elapsedOnly struct{ ends []event.Event }

func (o *elapsedOnly) Observe(e event.Event) { o.ends = append(o.ends, e) }

func (o *elapsedOnly) Needs(k event.Kind) event.Needs {
	if k == event.CallEnd {
		return event.NeedsElapsed
	}
	return event.NeedsNothing
}

func TestDo_TimesACallForAnObserverOfElapsedAlone(t *testing.T) {
	obs := &elapsedOnly{}
	p := policy.Must(policy.Wrap(policy.Name("db"), policy.Observe(obs)))
	errDown := errors.New("down")
	var inner time.Duration
	before := time.Now()
	err := p.Do(context.Background(), func(context.Context) error {
		start := time.Now()
		for time.Since(start) <= 0 { // let the monotonic clock move
		}
		inner = time.Since(start)
		return errDown
	})
	outer := time.Since(before)
	require.ErrorIs(t, err, errDown)
	require.Len(t, obs.ends, 1, "one call end")
	e := obs.ends[0]
	require.Equal(t, event.CallEnd, e.Kind)
	require.Equal(t, "db", e.Pipeline)
	require.ErrorIs(t, e.Err, errDown)
	require.True(t, e.Time.IsZero(), "no wall time is read: %v", e.Time)
	require.GreaterOrEqual(t, e.Elapsed, inner, "Elapsed covers fn")
	require.LessOrEqual(t, e.Elapsed, outer, "Elapsed lies within the interval measured around Do")
}

// countingClock counts its reads.
type countingClock struct {
	clock.Clock
	reads int
}

func (c *countingClock) Now() time.Time { c.reads++; return c.Clock.Now() }
