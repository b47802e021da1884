package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/backstop-go/backstop/policy"
)

// defaultStageHelp is the help of a published gauge that brings none.
const defaultStageHelp = "A gauge a stage publishes (policy.Gauge)."

// AddStage exports the gauges p publishes as backstop_stage_<gauge>{policy, name}, read
// at every scrape. The label policy is p's Placement().Kind, and name is p.Name().
//
// A stage inside a pipeline the Observer observes needs no AddStage: see
// [Observer.Register]. Adding p again does nothing. Another stage of p's kind under
// p's name is an error. So is a gauge without a snake_case name or a Value.
// A family's help is the Help of the first gauge exported under its name.
func (m *Observer) AddStage(p policy.Publisher) error {
	if err := policy.CheckPublisher(p); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	kind, name, gauges := p.Placement().Kind, p.Name(), p.Gauges()
	return m.once(kind+" stage", name, p, func() error {
		labels := prometheus.Labels{"policy": kind, "name": name}
		helps := map[string]string{} // the families this stage is the first to export
		cs := make([]prometheus.Collector, 0, len(gauges))
		for _, g := range gauges {
			help, ok := m.stageHelp[g.Name]
			if !ok {
				help = g.Help
				if help == "" {
					help = defaultStageHelp
				}
				helps[g.Name] = help
			}
			cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "stage_" + g.Name,
				Help: help, ConstLabels: labels}, g.Value))
		}
		if err := m.register(cs...); err != nil {
			return err
		}
		for n, h := range helps {
			m.stageHelp[n] = h
		}
		return nil
	})
}
