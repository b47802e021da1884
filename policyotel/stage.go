package policyotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/backstop-go/backstop/policy"
)

// defaultStageHelp describes a published gauge that brings no Help.
const defaultStageHelp = "A gauge a stage publishes (policy.Gauge)."

// stageGauge is one backstop.stage.<gauge> instrument and the published gauges it
// reads, one per stage.
type stageGauge struct {
	o     *Observer
	reads []stageRead // guarded by o.mu
}

type stageRead struct {
	attrs metric.ObserveOption // policy, name
	value func() float64
}

// observe reads every stage's gauge, outside the Observer's lock.
func (g *stageGauge) observe(_ context.Context, obs metric.Float64Observer) error {
	g.o.mu.Lock()
	reads := append([]stageRead(nil), g.reads...)
	g.o.mu.Unlock()
	for _, r := range reads {
		obs.Observe(r.value(), r.attrs)
	}
	return nil
}

// AddStage exports the gauges p publishes as backstop.stage.<gauge>, read at every
// collection. The attribute policy is p's Placement().Kind, and name is p.Name().
//
// A stage in a pipeline this Observer observes is added when the pipeline is bound
// ([Observer.Register]). Adding p again does nothing. Another stage of p's kind under
// p's name is an error. So is a gauge without a snake_case name or a Value. An
// instrument's description is the Help of the first gauge published under its name.
func (o *Observer) AddStage(p policy.Publisher) error {
	if err := policy.CheckPublisher(p); err != nil {
		return fmt.Errorf("policyotel: %v", err)
	}
	kind, name, gauges := p.Placement().Kind, p.Name(), p.Gauges()
	o.mu.Lock()
	defer o.mu.Unlock()
	key := [2]string{kind, name}
	if prev, dup := o.stages[key]; dup {
		if prev == p {
			return nil
		}
		return fmt.Errorf("policyotel: another %s named %q is already added", kind, name)
	}
	// Make every instrument first, so that a failure adds none of p's gauges.
	for _, g := range gauges {
		if _, ok := o.stageGauges[g.Name]; ok {
			continue
		}
		help := g.Help
		if help == "" {
			help = defaultStageHelp
		}
		sg := &stageGauge{o: o}
		if _, err := o.meter.Float64ObservableGauge("backstop.stage."+g.Name, metric.WithDescription(help),
			metric.WithFloat64Callback(sg.observe)); err != nil {
			return fmt.Errorf("policyotel: the gauge %q of %s %q: %w", g.Name, kind, name, err)
		}
		o.stageGauges[g.Name] = sg
	}
	attrs := metric.WithAttributes(attribute.String("policy", kind), attribute.String("name", name))
	for _, g := range gauges {
		sg := o.stageGauges[g.Name]
		sg.reads = append(sg.reads, stageRead{attrs: attrs, value: g.Value})
	}
	o.stages[key] = p
	return nil
}
