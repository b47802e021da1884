package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/backstop-go/backstop/event"
)

// admission holds the series of the stages that admit, refuse or replace calls
// client-side: fallbacks, bulkheads and rate limiters, fed by their events.
type admission struct {
	fallbacks *prometheus.CounterVec   // pipeline, fallback, reason, from
	bulkhead  *prometheus.CounterVec   // pipeline, bulkhead, reason
	limited   *prometheus.CounterVec   // pipeline, limiter, reason
	waits     *prometheus.HistogramVec // limiter
}

func newAdmission(nativeFactor float64) *admission {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	return &admission{
		fallbacks: counter("fallbacks_total", "Failed calls a fallback answered, by the failure's outcome (failure, rejected, deadline) and what answered (value, func, last-good).",
			"pipeline", "fallback", "reason", "from"),
		bulkhead: counter("bulkhead_rejections_total", "Calls or attempts a bulkhead refused, by why (limit, queue, wait, deadline).",
			"pipeline", "bulkhead", "reason"),
		limited: counter("ratelimit_rejections_total", "Calls or attempts a rate limiter refused, by why (no_token, deadline, wait_limit).",
			"pipeline", "limiter", "reason"),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "ratelimit_wait_seconds",
			Help:    "Waits for a rate limiter's token by calls that then went through.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}, NativeHistogramBucketFactor: nativeFactor}, []string{"limiter"}),
	}
}

func (a *admission) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.fallbacks, a.bulkhead, a.limited, a.waits}
}

func (a *admission) observe(e event.Event) {
	switch e.Kind {
	case event.Fallback:
		a.fallbacks.WithLabelValues(e.Pipeline, e.Source, e.Reason, e.To).Inc()
	case event.BulkheadRejected:
		a.bulkhead.WithLabelValues(e.Pipeline, e.Source, e.Reason).Inc()
	case event.RateLimited:
		if e.Err == nil { // it waited, and the call went through
			a.waits.WithLabelValues(e.Source).Observe(e.Delay.Seconds())
			return
		}
		a.limited.WithLabelValues(e.Pipeline, e.Source, e.Reason).Inc()
	}
}

// BulkheadGauges is what AddBulkhead reads: bulkhead.Bulkhead has it.
type BulkheadGauges interface {
	InFlight() int
	Waiting() int
	Limit() int
}

// AddBulkhead exports b as backstop_bulkhead_inflight, _waiting and _limit {bulkhead},
// read at every scrape. Adding the same one again does nothing; another under name is an error.
func (m *Observer) AddBulkhead(name string, b BulkheadGauges) error {
	if b == nil {
		return fmt.Errorf("%w: AddBulkhead(%q, nil)", ErrInvalidOptions, name)
	}
	labels := prometheus.Labels{"bulkhead": name}
	gauge := func(metric, help string, f func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: metric, Help: help, ConstLabels: labels},
			func() float64 { return float64(f()) })
	}
	return m.once("bulkhead", name, b, func() error {
		return m.register(
			gauge("bulkhead_inflight", "Slots of a bulkhead taken now.", b.InFlight),
			gauge("bulkhead_waiting", "Calls waiting for a slot of a bulkhead now.", b.Waiting),
			gauge("bulkhead_limit", "A bulkhead's slots (MaxConcurrent).", b.Limit),
		)
	})
}

// LimiterGauges is what AddLimiter reads: ratelimit.Limiter has it.
type LimiterGauges interface {
	// Tokens is the tokens in the bucket now, below 0 while calls wait.
	Tokens() float64
}

// AddLimiter exports l as backstop_ratelimit_tokens{limiter}, read at every scrape. A
// name already exported is an error.
func (m *Observer) AddLimiter(name string, l LimiterGauges) error {
	if l == nil {
		return fmt.Errorf("%w: AddLimiter(%q, nil)", ErrInvalidOptions, name)
	}
	return m.once("limiter", name, l, func() error {
		return m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "ratelimit_tokens",
			Help: "Tokens in a rate limiter's bucket now; below 0 while calls wait for theirs.", ConstLabels: prometheus.Labels{"limiter": name}}, l.Tokens))
	})
}
