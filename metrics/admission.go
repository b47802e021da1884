package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/backstop-go/backstop/event"
)

// admission holds the series of the stages that admit, refuse or replace calls
// client-side. That is fallbacks, and every stage's rejections and waits, fed by
// events.
type admission struct {
	fallbacks  *prometheus.CounterVec   // pipeline, fallback, reason, from
	rejections *prometheus.CounterVec   // pipeline, policy, name, reason
	waits      *prometheus.HistogramVec // policy, name
}

func newAdmission(nativeFactor float64) *admission {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	return &admission{
		fallbacks: counter("fallbacks_total", "Failed calls a fallback answered, by the failure's outcome (failure, rejected, deadline) and what answered (value, func, last_good).",
			"pipeline", "fallback", "reason", "from"),
		rejections: counter("rejections_total", "Calls or attempts a stage rejected, by the stage's kind (policy), its name and why.",
			"pipeline", "policy", "name", "reason"),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "wait_seconds",
			Help:    "Time calls waited in a stage that then let them through.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, NativeHistogramBucketFactor: nativeFactor},
			[]string{"policy", "name"}),
	}
}

func (a *admission) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.fallbacks, a.rejections, a.waits}
}

func (a *admission) observe(e event.Event) {
	switch e.Kind {
	case event.Fallback:
		a.fallbacks.WithLabelValues(e.Pipeline, e.Source, e.Reason, e.To).Inc()
	case event.Rejected:
		a.rejections.WithLabelValues(e.Pipeline, e.Stage, e.Source, e.Reason).Inc()
	case event.Waited:
		a.waits.WithLabelValues(e.Stage, e.Source).Observe(e.Delay.Seconds())
	}
}
