package shed

import (
	"testing"
	"time"
)

// The queue's CoDel times follow the work's latency when left to their defaults under
// an adaptive limit, within their bounds; values set, and a fixed limit, keep them.
func TestQueueTimes_FollowTheBaselineLatency(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name                   string
		o                      Options
		baseline               time.Duration
		wantTarget, wantPeriod time.Duration
	}{
		{"work of 1 ms: CoDel's own", Options{}, 1 * ms, 5 * ms, 100 * ms},
		{"no baseline yet", Options{}, 0, 5 * ms, 100 * ms},
		{"work of 25 ms", Options{}, 25 * ms, 12500 * time.Microsecond, 250 * ms}, // b/2, 10·b
		{"work of 400 ms: bounded", Options{}, 400 * ms, 100 * ms, time.Second},
		{"a target set is kept", Options{Queue: QueueOptions{Target: 2 * ms}}, 25 * ms, 2 * ms, 250 * ms},
		{"an interval set is kept", Options{Queue: QueueOptions{Interval: 50 * ms}}, 25 * ms, 12500 * time.Microsecond, 50 * ms},
		{"a fixed limit", Options{Limit: LimitOptions{Fixed: 8}}, 0, 5 * ms, 100 * ms},
	} {
		s := MustNew(c.o)
		if s.adaptive != nil {
			s.adaptive.base.Store(int64(c.baseline))
		}
		target, interval := s.queueTimes()
		if target != c.wantTarget || interval != c.wantPeriod {
			t.Errorf("%s: queueTimes() = %v, %v; want %v, %v", c.name, target, interval, c.wantTarget, c.wantPeriod)
		}
	}
}
