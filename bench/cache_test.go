package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/maypok86/otter/v2"

	"github.com/backstop-go/backstop/coalesce"
)

// --- 7. caches: the hit path, and origin calls when a hot key expires ------------------

func originFunc(calls *atomic.Int64) func(context.Context, string) (string, error) {
	return func(context.Context, string) (string, error) {
		calls.Add(1)
		time.Sleep(time.Millisecond) // an origin call takes a while: callers pile up
		return "value", nil
	}
}

func BenchmarkCacheHit_Coalesce(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		var calls atomic.Int64
		c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: originFunc(&calls), TTL: time.Hour}))
		defer c.Close()
		ctx := context.Background()
		_, _ = c.Get(ctx, "hot")
		loop(b, parallel, func() { _, _ = c.Get(ctx, "hot") })
	})
}

func BenchmarkCacheHit_Otter(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		var calls atomic.Int64
		c := otter.Must(&otter.Options[string, string]{MaximumSize: 10_000, ExpiryCalculator: otter.ExpiryWriting[string, string](time.Hour)})
		loader := otter.LoaderFunc[string, string](originFunc(&calls))
		ctx := context.Background()
		_, _ = c.Get(ctx, "hot", loader)
		loop(b, parallel, func() { _, _ = c.Get(ctx, "hot", loader) })
	})
}

func loop(b *testing.B, parallel bool, f func()) {
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			f()
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f()
		}
	})
}

// expiries lets a hot key expire b.N times and, each time, has 64 callers ask for it
// at once; it reports the origin calls per expiry.
func expiries(b *testing.B, get func(context.Context) error, calls *atomic.Int64, ttl time.Duration) {
	ctx := context.Background()
	_ = get(ctx)
	calls.Store(0)
	for b.Loop() {
		time.Sleep(ttl + time.Millisecond) // the key expires
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Add(1)
			go func() { defer wg.Done(); <-start; _ = get(ctx) }()
		}
		close(start)
		wg.Wait()
	}
	b.ReportMetric(float64(calls.Load())/float64(b.N), "origin-calls/expiry")
}

const benchTTL = 5 * time.Millisecond

func BenchmarkCacheExpiry_Coalesce(b *testing.B) {
	var calls atomic.Int64
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: originFunc(&calls), TTL: benchTTL, Jitter: -1,
		StaleWhileRefresh: time.Hour}))
	defer c.Close()
	expiries(b, func(ctx context.Context) error { _, err := c.Get(ctx, "hot"); return err }, &calls, benchTTL)
}

func BenchmarkCacheExpiry_Otter(b *testing.B) {
	var calls atomic.Int64
	c := otter.Must(&otter.Options[string, string]{MaximumSize: 10_000, ExpiryCalculator: otter.ExpiryWriting[string, string](benchTTL)})
	loader := otter.LoaderFunc[string, string](originFunc(&calls))
	expiries(b, func(ctx context.Context) error { _, err := c.Get(ctx, "hot", loader); return err }, &calls, benchTTL)
}

// BenchmarkCacheExpiry_PlainMap is the stampede: a map with expiry times and no
// coalescing, every caller that finds the key expired loads it.
func BenchmarkCacheExpiry_PlainMap(b *testing.B) {
	var calls atomic.Int64
	load := originFunc(&calls)
	var mu sync.Mutex
	var value string
	var until time.Time
	expiries(b, func(ctx context.Context) error {
		mu.Lock()
		fresh := time.Now().Before(until)
		mu.Unlock()
		if fresh {
			return nil
		}
		v, err := load(ctx, "hot")
		mu.Lock()
		value, until = v, time.Now().Add(benchTTL)
		mu.Unlock()
		_ = value
		return err
	}, &calls, benchTTL)
}
