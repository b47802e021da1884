package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/backstop-go/backstop/redeliver"
)

// RedeliverCounts is what the redelivery series read: redeliver.Schedule has it.
type RedeliverCounts interface{ Counts() redeliver.Counts }

// AddRedeliver exports a redelivery policy's decisions under queue=name, read at every
// scrape: backstop_redeliver_deliveries_total (every delivery decided),
// backstop_redeliver_delay_seconds (a histogram of the delays of redeliveries, bucketed
// by redeliver.DelayBounds; its _count is the redeliveries) and
// backstop_redeliver_dead_lettered_total{reason} (permanent, exhausted). Deliveries
// minus redeliveries minus dead-letters are the successes. A name already exported is
// an error.
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
	n := c.src.Counts()
	ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.CounterValue, float64(n.Deliveries))
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.CounterValue, float64(n.Permanent), "permanent")
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.CounterValue, float64(n.Exhausted), "exhausted")
	bounds := redeliver.DelayBounds()
	if len(n.Retries) != len(bounds)+1 {
		return // not a redeliver.Counts: leave the histogram out rather than invent it
	}
	buckets := make(map[float64]uint64, len(bounds))
	for i, b := range bounds {
		buckets[b.Seconds()] = n.Retries[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.delay, n.Retries[len(bounds)], n.DelaySum.Seconds(), buckets)
}
