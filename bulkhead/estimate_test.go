package bulkhead

import (
	"math"
	"testing"
	"time"
)

// FuzzEstimate: the Retry-After estimate is never negative, saturates instead of
// wrapping, and never shrinks as more calls wait ahead.
func FuzzEstimate(f *testing.F) {
	f.Add(int64(100*time.Millisecond), 2, int64(0))        // 50ms: one of two slots frees every 50ms
	f.Add(int64(time.Hour), 1, int64(1<<40))               // saturates
	f.Add(int64(math.MaxInt64), 1, int64(math.MaxInt64-1)) // the largest of each
	f.Add(int64(0), 10, int64(5))                          // no hold measured: 0
	f.Fuzz(func(t *testing.T, hold int64, limit int, queued int64) {
		if hold < 0 || limit < 1 || queued < 0 || queued == math.MaxInt64 {
			t.Skip()
		}
		b := &Bulkhead{max: limit}
		b.hold.Store(hold)
		got := b.estimate(queued)
		if got < 0 {
			t.Fatalf("estimate(hold %v, limit %d, queued %d) = %v; want ≥ 0", time.Duration(hold), limit, queued, got)
		}
		if hold > 0 && queued > 0 {
			if fewer := b.estimate(queued - 1); fewer > got {
				t.Fatalf("estimate(queued %d) = %v < estimate(queued %d) = %v; want it never to shrink as calls queue", queued, got, queued-1, fewer)
			}
		}
	})
}
