package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RedeliverCounts is what AddRedeliver reads of a redelivery policy:
// redeliver.Schedule has it. Its methods must be safe for concurrent use.
type RedeliverCounts interface {
	// Decisions returns the deliveries decided so far. Of those, it counts the ones
	// dead-lettered for a permanent error and after the last allowed delivery.
	Decisions() (deliveries, permanent, exhausted uint64)
	// Delays returns the redeliveries' delays as a histogram. Each cumulative[i] counts
	// the delays of at most bounds[i], and cumulative[len(bounds)] counts them all. The
	// sum adds up every delay.
	Delays() (bounds []time.Duration, cumulative []uint64, sum time.Duration)
}

// AddRedeliver exports a redelivery policy's decisions under queue=name, read at every
// scrape:
//
//   - backstop_redeliver_deliveries_total counts every delivery decided;
//   - backstop_redeliver_delay_seconds is a histogram of the redeliveries' delays,
//     bucketed by the bounds r reports; its _count is the redeliveries;
//   - backstop_redeliver_dead_lettered_total{reason} counts dead-letters (permanent,
//     exhausted).
//
// Deliveries minus redeliveries minus dead-letters are the successes. A name already
// exported is an error.
func (m *Observer) AddRedeliver(name string, r RedeliverCounts) error {
	if r == nil {
		return fmt.Errorf("%w: AddRedeliver(%q, nil)", ErrInvalidOptions, name)
	}
	labels := prometheus.Labels{"queue": name}
	fq := func(n string) string { return prometheus.BuildFQName(Namespace, "redeliver", n) }
	return m.register(&redeliverCollector{src: r,
		deliveries: prometheus.NewDesc(fq("deliveries_total"), "Deliveries a redelivery policy decided: succeeded, redelivered or dead-lettered.", nil, labels),
		delay:      prometheus.NewDesc(fq("delay_seconds"), "Delays of the redeliveries a redelivery policy decided.", nil, labels),
		dead:       prometheus.NewDesc(fq("dead_lettered_total"), "Messages a redelivery policy dead-lettered, by reason (permanent, exhausted).", []string{"reason"}, labels),
	})
}

// redeliverCollector reads a policy's counts once per scrape, so its series agree.
type redeliverCollector struct {
	src                     RedeliverCounts
	deliveries, delay, dead *prometheus.Desc
}

func (c *redeliverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.deliveries
	ch <- c.delay
	ch <- c.dead
}

func (c *redeliverCollector) Collect(ch chan<- prometheus.Metric) {
	deliveries, permanent, exhausted := c.src.Decisions()
	ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.CounterValue, float64(deliveries))
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.CounterValue, float64(permanent), "permanent")
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.CounterValue, float64(exhausted), "exhausted")
	bounds, cumulative, sum := c.src.Delays()
	if len(cumulative) != len(bounds)+1 {
		return // a malformed histogram: leave it out rather than invent it
	}
	buckets := make(map[float64]uint64, len(bounds))
	for i, b := range bounds {
		buckets[b.Seconds()] = cumulative[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.delay, cumulative[len(bounds)], sum.Seconds(), buckets)
}
