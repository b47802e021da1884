package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// The wiring of the package documentation: one Observer per registry, given the
// budgets, shedders and breakers whose gauges it reads, observing a pipeline, and the
// registry served at /metrics. One call that fails twice and then succeeds shows in
// the series.
func Example() {
	dbBudget := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	dbBreaker := policy.Must(breaker.New(breaker.Options{Name: "db"}))
	shedder := policy.Must(shed.New(shed.Options{Name: "api"}))
	logger := slog.New(slog.DiscardHandler) // your service's logger
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), dbBreaker, dbBudget,
		policy.Must(retry.New(retry.Options{Base: time.Millisecond, Cap: time.Millisecond}))))
	mux := http.NewServeMux()

	reg := prometheus.NewRegistry()
	obs, err := metrics.New(reg, metrics.Options{
		Budgets:  map[string]metrics.Leveler{"db": dbBudget},
		Shedders: map[string]metrics.ShedGauges{"api": shedder},
		Breakers: []metrics.BreakerGauge{dbBreaker},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p = p.With(policy.Name("db"), policy.Observe(event.Observers(obs, metrics.Slog(logger, slog.LevelInfo))))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	n := 0
	_ = p.Do(context.Background(), func(context.Context) error {
		if n++; n < 3 {
			return fault.Retryable(errors.New("db busy"))
		}
		return nil
	})

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(w.Body.String(), "\n") {
		for _, want := range []string{`backstop_calls_total{outcome="success"`, `backstop_attempts_total{outcome="failure"`,
			`backstop_retries_total{pipeline="db",reason="retryable"`, `backstop_breaker_state{`} {
			if strings.HasPrefix(line, want) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// backstop_attempts_total{outcome="failure",pipeline="db"} 2
	// backstop_breaker_state{breaker="db"} 0
	// backstop_calls_total{outcome="success",pipeline="db"} 1
	// backstop_retries_total{pipeline="db",reason="retryable"} 2
}
