package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// ThrottleGauges is what AddThrottle reads of a client-side adaptive throttle:
// throttle.Throttle has it.
type ThrottleGauges interface {
	// Probability is the chance that a request is refused now.
	Probability() float64
	// Refused counts the requests refused so far.
	Refused() uint64
}

// AddThrottle exports t as backstop_throttle_probability{throttle}, the chance that a
// request is refused now. It also exports backstop_throttle_refused_total{throttle}.
// Both are read at every scrape. Adding t again does nothing. Another throttle under
// name is an error.
func (m *Observer) AddThrottle(name string, t ThrottleGauges) error {
	if t == nil {
		return fmt.Errorf("%w: AddThrottle(%q, nil)", ErrInvalidOptions, name)
	}
	labels := prometheus.Labels{"throttle": name}
	return m.once("throttle", name, t, func() error {
		return m.register(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "throttle_probability",
				Help: "The chance that a client-side adaptive throttle refuses a request now.", ConstLabels: labels}, t.Probability),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "throttle_refused_total",
				Help: "Requests a client-side adaptive throttle refused locally.", ConstLabels: labels},
				func() float64 { return float64(t.Refused()) }),
		)
	})
}
