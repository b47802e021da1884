package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/throttle"
)

// --- 7. hedging: the success path, no hedge sent (the call answers at once) -----------

func BenchmarkHedge_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: time.Second}))))
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkHedge_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[any](hedgepolicy.NewBuilderWithDelay[any](time.Second).WithMaxHedges(1).Build())
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}

// --- 8. client-side adaptive throttling: the success path -----------------------------

func BenchmarkThrottle_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := policy.Must(policy.Wrap(policy.Must(throttle.New(throttle.Options{Name: "db"}))))
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkThrottle_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[any](adaptivethrottler.NewWithDefaults[any]())
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}
