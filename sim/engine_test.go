package sim

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
	"weak"
)

// Events fire in time order, ties in the order they were scheduled; a stopped timer
// never fires, and Stop reports whether it stopped it; an hour of virtual time passes
// without an hour of waiting (synctest's clock moves only when everyone is blocked).
func TestEngine_OrderStopAndVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		c := e.Clock()
		start := c.Now()
		var got []string
		e.After(2*time.Millisecond, func() { got = append(got, "b") })
		e.After(time.Millisecond, func() { got = append(got, "a") })
		e.After(2*time.Millisecond, func() { got = append(got, "c") })
		stopped := c.NewTimer(time.Millisecond)
		if !stopped.Stop() {
			t.Error("Stop of a pending timer reported false")
		}
		long := c.NewTimer(time.Hour)
		var at time.Time
		done := false
		go func() {
			at = <-long.C()
			done = true
		}()
		e.loop(func() bool { return done })
		if want := "abc"; string(got[0]+got[1]+got[2]) != want {
			t.Errorf("fired %v, want a b c", got)
		}
		if d := at.Sub(start); d != time.Hour {
			t.Errorf("the hour's timer fired after %v of virtual time", d)
		}
		if long.Stop() {
			t.Error("Stop of a fired timer reported true")
		}
		select {
		case <-stopped.C():
			t.Error("a stopped timer fired")
		default:
		}
	})
}

// TestEngine_SweepsStoppedTimers guards the sweep of the bubble's timer heap: a
// context whose deadline was cancelled long before its time is no longer held by its
// stopped timer once the engine has fired sweepEvery events, and can be collected.
func TestEngine_SweepsStoppedTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		// The stopped timer stands between two running ones in the heap, neither
		// first nor last, where the runtime would drop it at once.
		before := time.AfterFunc(30*time.Minute, func() {})
		defer before.Stop()
		value := new([64]byte) // reachable only through the context
		held := weak.Make(value)
		_, cancel := context.WithTimeout(context.WithValue(context.Background(), valueKey{}, value), time.Hour)
		after := time.AfterFunc(2*time.Hour, func() {})
		defer after.Stop()
		cancel()
		value = nil
		// One event queued at a time: the engine sweeps after sweepEvery events.
		fired := 0
		var next func()
		next = func() {
			if fired++; fired <= sweepEvery {
				e.After(time.Millisecond, next)
			}
		}
		e.After(time.Millisecond, next)
		e.loop(func() bool { return fired == sweepEvery+1 })
		runtime.GC()
		if held.Value() != nil {
			t.Errorf("a cancelled context's value is still reachable after %d events: its stopped timer was not swept", fired)
		}
	})
}

type valueKey struct{}
