package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fsfallback "github.com/failsafe-go/failsafe-go/fallback"
	"github.com/failsafe-go/failsafe-go/ratelimiter"

	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/ratelimit"
)

// --- 9. a bulkhead: the success path, 64 slots, never full -----------------------------

func BenchmarkBulkhead_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := policy.Must(policy.Wrap(policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 64}))))
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkBulkhead_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[any](fsbulkhead.New[any](64))
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}

// --- 10. a rate limiter: the success path, a bucket that never runs dry ----------------

func BenchmarkRateLimiter_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1e12, Burst: 1 << 30}))))
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkRateLimiter_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[any](ratelimiter.NewBursty[any](1<<30, time.Millisecond))
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}

// --- 11. a fallback with a value: the call succeeds, and the call fails and is answered

func BenchmarkFallback_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
		p := policy.Must(policy.Wrap(fb))
		run(b, parallel, func(ctx context.Context) { _, _ = fb.Get(ctx, p, get) })
	})
}

func BenchmarkFallback_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[int](fsfallback.NewWithResult[int](-1))
		run(b, parallel, func(ctx context.Context) { _, _ = ex.WithContext(ctx).Get(func() (int, error) { return 1, nil }) })
	})
}

func BenchmarkFallbackAnswer_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
		p := policy.Must(policy.Wrap(fb))
		run(b, parallel, func(ctx context.Context) { _, _ = fb.Get(ctx, p, fail) })
	})
}

func BenchmarkFallbackAnswer_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[int](fsfallback.NewWithResult[int](-1))
		run(b, parallel, func(ctx context.Context) { _, _ = ex.WithContext(ctx).Get(func() (int, error) { return 0, errDown }) })
	})
}

func get(context.Context) (int, error)  { return 1, nil }
func fail(context.Context) (int, error) { return 0, errDown }

// TestAdmissionPeersAreConfiguredAlike: every bulkhead, rate limiter and fallback
// above lets the success path through, and both fallbacks answer a failure with -1.
func TestAdmissionPeersAreConfiguredAlike(t *testing.T) {
	ctx := context.Background()
	if err := policy.Must(policy.Wrap(policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 64})))).Do(ctx, nop); err != nil {
		t.Errorf("backstop bulkhead: %v", err)
	}
	if err := failsafe.With[any](fsbulkhead.New[any](64)).Run(func() error { return nil }); err != nil {
		t.Errorf("failsafe bulkhead: %v", err)
	}
	if err := policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1e12, Burst: 1 << 30})))).Do(ctx, nop); err != nil {
		t.Errorf("backstop rate limiter: %v", err)
	}
	if err := failsafe.With[any](ratelimiter.NewBursty[any](1<<30, time.Millisecond)).Run(func() error { return nil }); err != nil {
		t.Errorf("failsafe rate limiter: %v", err)
	}
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
	p := policy.Must(policy.Wrap(fb))
	if v, err := fb.Get(ctx, p, get); v != 1 || err != nil {
		t.Errorf("backstop fallback, success: %v, %v; want 1, nil", v, err)
	}
	if v, err := fb.Get(ctx, p, fail); v != -1 || err != nil {
		t.Errorf("backstop fallback, failure: %v, %v; want -1, nil", v, err)
	}
	ex := failsafe.With[int](fsfallback.NewWithResult[int](-1))
	if v, err := ex.Get(func() (int, error) { return 0, errDown }); v != -1 || err != nil {
		t.Errorf("failsafe fallback, failure: %v, %v; want -1, nil", v, err)
	}
}
