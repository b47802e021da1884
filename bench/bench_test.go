package bench

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/sony/gobreaker/v2"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// Equivalent settings on every side: a 1 s overall timeout, a breaker that trips after
// 5 consecutive failures, 3 attempts with exponential backoff from 100 ms to 5 s.
const (
	limit       = time.Second
	maxAttempts = 3
	base        = 100 * time.Millisecond
	maxDelay    = 5 * time.Second
)

func nop(context.Context) error { return nil }

var errDown = errors.New("down")

// run benchmarks do serially, or in parallel when parallel is set, under
// context.Background().
func run(b *testing.B, parallel bool, do func(ctx context.Context)) {
	runUnder(b, parallel, func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, do)
}

// runUnder is run with a context from newCtx per goroutine.
func runUnder(b *testing.B, parallel bool, newCtx func() (context.Context, context.CancelFunc), do func(ctx context.Context)) {
	b.ReportAllocs()
	if !parallel {
		ctx, cancel := newCtx()
		defer cancel()
		for b.Loop() {
			do(ctx)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		ctx, cancel := newCtx()
		defer cancel()
		for pb.Next() {
			do(ctx)
		}
	})
}

// requestCtx is a context that can be cancelled, as an HTTP handler's request
// context is.
func requestCtx() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func both(b *testing.B, bench func(b *testing.B, parallel bool)) {
	b.Run("serial", func(b *testing.B) { bench(b, false) })
	b.Run("parallel", func(b *testing.B) { bench(b, true) })
}

// --- 1. deadline + breaker + retry -------------------------------------------------

func backstopDBR() *policy.Pipeline {
	d := policy.Must(deadline.New(deadline.Options{Timeout: limit}))
	br := policy.Must(breaker.New(breaker.Options{Name: "db"}))
	rt := policy.Must(retry.New(retry.Options{MaxAttempts: maxAttempts, Base: base, Cap: maxDelay}))
	return policy.Must(policy.Wrap(d, br, rt))
}

func failsafeDBR() failsafe.Executor[any] {
	return failsafe.With[any](
		timeout.New[any](limit),
		circuitbreaker.NewBuilder[any]().WithFailureThreshold(5).Build(),
		retrypolicy.NewBuilder[any]().WithMaxAttempts(maxAttempts).WithBackoff(base, maxDelay).WithJitterFactor(0.5).Build(),
	)
}

// floorDBR is what a careful hand-written version does: one context.WithTimeout, one
// raw gobreaker Execute around a bounded loop.
func floorDBR() func(ctx context.Context) error {
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "db"})
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		_, err := cb.Execute(func() (struct{}, error) {
			var err error
			for n := 0; n < maxAttempts; n++ {
				if err = nop(ctx); err == nil {
					return struct{}{}, nil
				}
			}
			return struct{}{}, err
		})
		return err
	}
}

func BenchmarkDeadlineBreakerRetry_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := backstopDBR()
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkDeadlineBreakerRetry_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafeDBR()
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}

func BenchmarkDeadlineBreakerRetry_Floor(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		f := floorDBR()
		run(b, parallel, func(ctx context.Context) { _ = f(ctx) })
	})
}

// --- 2. breaker + budget + retry ---------------------------------------------------

func BenchmarkBreakerBudgetRetry_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		br := policy.Must(breaker.New(breaker.Options{Name: "db"}))
		bud := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
		rt := policy.Must(retry.New(retry.Options{MaxAttempts: maxAttempts, Base: base, Cap: maxDelay}))
		p := policy.Must(policy.Wrap(br, bud, rt))
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkBreakerBudgetRetry_RawGobreaker(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "db"})
		run(b, parallel, func(ctx context.Context) {
			_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, nop(ctx) })
		})
	})
}

func BenchmarkBreakerBudgetRetry_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[any](
			circuitbreaker.NewBuilder[any]().WithFailureThreshold(5).Build(),
			retrypolicy.NewBuilder[any]().WithMaxAttempts(maxAttempts).WithBackoff(base, maxDelay).WithJitterFactor(0.5).
				WithBudget(fsbudget.NewBuilder().Build()).Build(),
		)
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}

// --- 3. retry alone ------------------------------------------------------------------

func backstopRetry() *policy.Pipeline {
	return policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: maxAttempts, Base: base, Cap: maxDelay}))))
}

func cenkaltiRetry(ctx context.Context) {
	eb := backoff.NewExponentialBackOff()
	eb.InitialInterval, eb.MaxInterval = base, maxDelay
	_, _ = backoff.Retry(ctx, func() (struct{}, error) { return struct{}{}, nop(ctx) },
		backoff.WithBackOff(eb), backoff.WithMaxTries(maxAttempts))
}

func BenchmarkRetry_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := backstopRetry()
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkRetry_CenkaltiBackoff(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) { run(b, parallel, cenkaltiRetry) })
}

func BenchmarkRetry_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		ex := failsafe.With[any](retrypolicy.NewBuilder[any]().WithMaxAttempts(maxAttempts).WithBackoff(base, maxDelay).WithJitterFactor(0.5).Build())
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}

// RequestRetry is Retry under a caller's context that can be cancelled, as an HTTP
// handler's request context is: the owner mark is then one context value per call.
func BenchmarkRequestRetry_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := backstopRetry()
		runUnder(b, parallel, requestCtx, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkRequestRetry_CenkaltiBackoff(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) { runUnder(b, parallel, requestCtx, cenkaltiRetry) })
}

// --- 4. admission ---------------------------------------------------------------------

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

func serveHTTP(b *testing.B, parallel bool, h http.Handler) {
	b.ReportAllocs()
	if !parallel {
		req := httptest.NewRequest("GET", "/", nil)
		w := &nopWriter{h: http.Header{}}
		for b.Loop() {
			h.ServeHTTP(w, req)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/", nil)
		w := &nopWriter{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}

func BenchmarkAdmit_BareHandler(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) { serveHTTP(b, parallel, okHandler) })
}

func BenchmarkAdmit_BackstopShed(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		s := policy.Must(shed.New(shed.Options{}))
		serveHTTP(b, parallel, shed.Middleware(okHandler, s))
	})
}

// BenchmarkAdmit_InFlightCounter is the floor of any exact concurrency limit: one
// shared count, incremented and decremented around the handler.
func BenchmarkAdmit_InFlightCounter(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		var inflight atomic.Int64
		serveHTTP(b, parallel, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inflight.Add(1)
			okHandler.ServeHTTP(w, r)
			inflight.Add(-1)
		}))
	})
}

func BenchmarkAdmit_FailsafeAdaptiveLimiter(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		l := adaptivelimiter.NewWithDefaults[any]()
		serveHTTP(b, parallel, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, ok := l.TryAcquirePermit()
			if !ok {
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			okHandler.ServeHTTP(w, r)
			p.Record()
		}))
	})
}

// --- 5. failure path: an open breaker refuses ----------------------------------------

func BenchmarkOpenBreaker_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		br := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: time.Hour}))
		p := policy.Must(policy.Wrap(br))
		_ = p.Do(context.Background(), func(context.Context) error { return errDown })
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkOpenBreaker_RawGobreaker(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "db", Timeout: time.Hour,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 }})
		_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, errDown })
		run(b, parallel, func(ctx context.Context) {
			_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, nop(ctx) })
		})
	})
}

func BenchmarkOpenBreaker_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		cb := circuitbreaker.NewBuilder[any]().WithFailureThreshold(1).WithDelay(time.Hour).Build()
		cb.Open()
		ex := failsafe.With[any](cb)
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}

// TestPeersAreConfiguredAlike checks the benchmarks measure what they claim: every
// stack succeeds on the success path, and every open breaker refuses.
func TestPeersAreConfiguredAlike(t *testing.T) {
	ctx := context.Background()
	if err := backstopDBR().Do(ctx, nop); err != nil {
		t.Errorf("backstop stack: %v", err)
	}
	if err := failsafeDBR().WithContext(ctx).Run(func() error { return nil }); err != nil {
		t.Errorf("failsafe stack: %v", err)
	}
	if err := floorDBR()(ctx); err != nil {
		t.Errorf("floor: %v", err)
	}
	br := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: time.Hour}))
	p := policy.Must(policy.Wrap(br))
	_ = p.Do(ctx, func(context.Context) error { return errDown })
	if err := p.Do(ctx, nop); !errors.Is(err, breaker.ErrOpen) {
		t.Errorf("backstop open breaker: %v", err)
	}
	cb := circuitbreaker.NewBuilder[any]().WithFailureThreshold(1).WithDelay(time.Hour).Build()
	cb.Open()
	if err := failsafe.With[any](cb).Run(func() error { return nil }); !errors.Is(err, circuitbreaker.ErrOpen) {
		t.Errorf("failsafe open breaker: %v", err)
	}
}

// BenchmarkAdmitBreakerQuota_Backstop is the admit path with every check on: a
// closed breaker guarding the handler and a per-client quota that never runs dry.
func BenchmarkAdmitBreakerQuota_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		br := policy.Must(breaker.New(breaker.Options{Name: "db"}))
		s := policy.Must(shed.New(shed.Options{Breaker: br, Quota: &shed.Quota{
			Key: func(*http.Request) string { return "tenant" }, Rate: 1e12, Burst: 1 << 30}}))
		serveHTTP(b, parallel, shed.Middleware(okHandler, s))
	})
}
