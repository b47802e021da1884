package sim

import (
	"testing"
	"testing/synctest"
	"time"
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
