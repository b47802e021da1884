package policytest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/policy/policytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(tm interface{ C() <-chan time.Time }) (time.Time, bool) {
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestClock_ManualFiresTimersInOrderWhenDue(t *testing.T) {
	c := policytest.NewClock(t0)
	a := c.NewTimer(100 * time.Millisecond)
	b := c.NewTimer(50 * time.Millisecond)
	require.Equal(t, 2, c.Pending())

	c.Advance(49 * time.Millisecond)
	_, ok := fired(b)
	require.False(t, ok, "timer of 50ms fired at 49ms")

	c.Advance(time.Millisecond)
	at, ok := fired(b)
	require.True(t, ok, "timer of 50ms did not fire at 50ms")
	require.Equal(t, t0.Add(50*time.Millisecond), at)
	require.Equal(t, 1, c.Pending())

	require.True(t, a.Stop(), "Stop of a pending timer")
	require.False(t, a.Stop(), "second Stop")
	c.Advance(time.Hour)
	_, ok = fired(a)
	require.False(t, ok, "a stopped timer fired")
	require.Equal(t, []time.Duration{100 * time.Millisecond, 50 * time.Millisecond}, c.Waits())

	c.Set(t0) // never backward
	require.Equal(t, t0.Add(time.Hour+50*time.Millisecond), c.Now())
}

func TestClock_AutoAdvanceFiresAtOnce(t *testing.T) {
	c := policytest.NewClock(t0).AutoAdvance(true)
	tm := c.NewTimer(time.Second)
	at, ok := fired(tm)
	require.True(t, ok)
	require.Equal(t, t0.Add(time.Second), at)
	require.Equal(t, t0.Add(time.Second), c.Now())
	require.False(t, tm.Stop(), "Stop after firing")
}

func TestClock_BlockUntilWaitsForAGoroutinesTimer(t *testing.T) {
	c := policytest.NewClock(t0)
	done := make(chan time.Time)
	go func() {
		tm := c.NewTimer(time.Minute)
		done <- <-tm.C()
	}()
	c.BlockUntil(1)
	c.Advance(time.Minute)
	require.Equal(t, t0.Add(time.Minute), <-done)
}

func TestClock_ZeroTimerFiresAtOnce(t *testing.T) {
	c := policytest.NewClock(t0)
	_, ok := fired(c.NewTimer(0))
	require.True(t, ok)
	require.Equal(t, 0, c.Pending())
}

func TestRand_DrawsInTurnThenRepeats(t *testing.T) {
	r := policytest.NewRand(0.25, 0.5)
	got := []float64{r.Float64(), r.Float64(), r.Float64()}
	require.Equal(t, []float64{0.25, 0.5, 0.5}, got)
	require.Panics(t, func() { policytest.NewRand(1) }, "1 is outside [0, 1)")
	require.Panics(t, func() { policytest.NewRand() })
}
