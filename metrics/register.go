package metrics

import (
	"fmt"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// named is a stage with a name of its own: breakers, shedders and throttles have one.
type named interface{ Name() string }

// once runs add the first time name is exported as what, and remembers v as that
// name's. Exporting the same v again does nothing. Another v under the name is an
// error.
func (m *Observer) once(what, name string, v any, add func() error) error {
	m.knownMu.Lock()
	defer m.knownMu.Unlock()
	key := what + "\x00" + name
	if prev, ok := m.known[key]; ok {
		if prev == v {
			return nil
		}
		return fmt.Errorf("%w: another %s is already exported as %q", ErrInvalidOptions, what, name)
	}
	if err := add(); err != nil {
		return err
	}
	m.known[key] = v
	return nil
}

// Register exports the series of stage, found by the interfaces it implements:
//   - a [BreakerGauge], as [Observer.AddBreaker] does;
//   - a named [ShedGauges], as [Observer.AddShedder] does;
//   - a named [ThrottleGauges], as [Observer.AddThrottle] does;
//   - a [policy.Publisher]'s gauges, as [Observer.AddStage] does.
//
// It is the Observer's optional Register method (see event.Observer). policy.Wrap and
// Pipeline.With hand it every stage of a pipeline the Observer observes. So a breaker
// in an observed pipeline has its backstop_breaker_state series from the moment the
// pipeline is bound. A stage already exported is left as it is. So is one whose name
// another stage exports already: register that one with an Add method to get the error.
// Budgets have no name of their own. Export them with Options.Budgets or AddBudget.
func (m *Observer) Register(stage any) {
	if _, ok := stage.(policy.Policy); !ok {
		return
	}
	if b, ok := stage.(BreakerGauge); ok {
		_ = m.AddBreaker(b)
	}
	if n, ok := stage.(named); ok {
		if s, ok := stage.(ShedGauges); ok {
			_ = m.AddShedder(n.Name(), s)
		}
		if t, ok := stage.(ThrottleGauges); ok {
			_ = m.AddThrottle(n.Name(), t)
		}
	}
	if p, ok := stage.(policy.Publisher); ok {
		_ = m.AddStage(p)
	}
}

// shedListener is how the Observer hears the refusals of the shedders it exports.
// There is one per Observer, subscribed to each shedder (an event.Source). So a
// shedder's refusals are counted once, whether or not they reach the Observer
// another way too.
type shedListener struct{ m *Observer }

func (l *shedListener) Observe(e event.Event) {
	if e.Kind == event.Shed {
		l.m.countShed(e)
	}
}

// Needs: the listener counts refusals and their Retry-After, and reads no time.
func (l *shedListener) Needs(k event.Kind) event.Needs {
	if k == event.Shed {
		return event.NeedsEvent
	}
	return event.NeedsNothing
}
