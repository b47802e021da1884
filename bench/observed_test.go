package bench

import (
	"context"
	"testing"

	"github.com/failsafe-go/failsafe-go"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// --- 6. the observed path: breaker + budget + retry with metrics on --------------------
//
// What users run: the stack of 2. with its calls counted and timed in Prometheus.
// Backstop observes with metrics.New; failsafe-go with an OnDone listener that does the
// same work (a call counter by outcome, a duration histogram, children resolved once).
// Unobserved is Backstop's stack without an observer, for the observer's own cost.

func bbr() *policy.Pipeline {
	return policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "db"})), policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})),
		policy.Must(retry.New(retry.Options{MaxAttempts: maxAttempts, Base: base, Cap: maxDelay}))))
}

func BenchmarkObservedBreakerBudgetRetry_Backstop(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := bbr().With(policy.Name("db"), policy.Observe(policy.Must(metrics.New(prometheus.NewRegistry(), metrics.Options{}))))
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkObservedBreakerBudgetRetry_Unobserved(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		p := bbr()
		run(b, parallel, func(ctx context.Context) { _ = p.Do(ctx, nop) })
	})
}

func BenchmarkObservedBreakerBudgetRetry_Failsafe(b *testing.B) {
	both(b, func(b *testing.B, parallel bool) {
		reg := prometheus.NewRegistry()
		calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total"}, []string{"pipeline", "outcome"})
		duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "call_duration_seconds"}, []string{"pipeline"})
		reg.MustRegister(calls, duration)
		ok, failed, d := calls.WithLabelValues("db", "success"), calls.WithLabelValues("db", "failure"), duration.WithLabelValues("db")
		ex := failsafe.With[any](
			circuitbreaker.NewBuilder[any]().WithFailureThreshold(5).Build(),
			retrypolicy.NewBuilder[any]().WithMaxAttempts(maxAttempts).WithBackoff(base, maxDelay).WithJitterFactor(0.5).
				WithBudget(fsbudget.NewBuilder().Build()).Build(),
		).OnDone(func(e failsafe.ExecutionDoneEvent[any]) {
			if e.Error != nil {
				failed.Inc()
			} else {
				ok.Inc()
			}
			d.Observe(e.ElapsedTime().Seconds())
		})
		run(b, parallel, func(ctx context.Context) { _ = ex.WithContext(ctx).Run(func() error { return nil }) })
	})
}
