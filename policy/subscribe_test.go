package policy_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// source is an event.Source that keeps one subscription per observer, as the contract
// says, and announces one event to them all when told.
type source struct {
	mu   sync.Mutex
	subs map[event.Observer]string
}

func (s *source) Placement() policy.Placement                         { return policy.Placement{Kind: "breaker"} }
func (s *source) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
func (s *source) Subscribe(o event.Observer, pipeline string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[event.Observer]string{}
	}
	s.subs[o] = pipeline
}

func (s *source) announce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for o, name := range s.subs {
		o.Observe(event.Event{Kind: event.BreakerState, Pipeline: name, Source: "src", From: "closed", To: "open"})
	}
}

// registrar counts the stages it is handed and the events it hears.
type registrar struct {
	recorder
	stages []any
}

func (r *registrar) Register(stage any) { r.stages = append(r.stages, stage) }

// TestPipeline_EachSourceEventReachesEachObserverOnce: however a pipeline is built —
// options in Wrap's list or one With at a time, in any order, renamed, re-observed
// with the same observer, combined with others by event.Observers, shared with a
// second pipeline — one event of a Source reaches each observer once.
func TestPipeline_EachSourceEventReachesEachObserverOnce(t *testing.T) {
	var a, b recorder
	var fn struct{ n int }
	f := event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.BreakerState {
			fn.n++
		}
	})
	both := event.Observers(&a, &b)
	withF := event.Observers(&a, f)
	for _, c := range []struct {
		name  string
		build func(src policy.Policy) []*policy.Pipeline
		a, b  int // events a and b hear
		f     int // events f hears
	}{
		{"Wrap with options", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s, policy.Name("db"), policy.Observe(&a)))}
		}, 1, 0, 0},
		{"options before the stage", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(policy.Observe(&a), policy.Name("db"), s))}
		}, 1, 0, 0},
		{"Observe then Name", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s)).With(policy.Observe(&a)).With(policy.Name("db"))}
		}, 1, 0, 0},
		{"Name then Observe", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s)).With(policy.Name("db")).With(policy.Observe(&a))}
		}, 1, 0, 0},
		{"renamed three times", func(s policy.Policy) []*policy.Pipeline {
			p := policy.Must(policy.Wrap(s, policy.Observe(&a)))
			return []*policy.Pipeline{p.With(policy.Name("x")).With(policy.Name("y")).With(policy.Name("db"))}
		}, 1, 0, 0},
		{"observed again by the same", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s, policy.Observe(&a))).With(policy.Observe(&a), policy.Name("db"))}
		}, 1, 0, 0},
		{"a func, renamed", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s, policy.Observe(f))).With(policy.Name("x")).With(policy.Name("db"))}
		}, 0, 0, 1},
		{"combined, renamed", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s, policy.Observe(both))).With(policy.Name("db"))}
		}, 1, 1, 0},
		{"combined again, with the same observers", func(s policy.Policy) []*policy.Pipeline {
			p := policy.Must(policy.Wrap(s, policy.Observe(both)))
			return []*policy.Pipeline{p.With(policy.Observe(event.Observers(&a, &b)), policy.Name("db"))}
		}, 1, 1, 0},
		{"combined in one pipeline, alone in another", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s, policy.Observe(both), policy.Name("a"))),
				policy.Must(policy.Wrap(s, policy.Observe(&a), policy.Name("db")))}
		}, 1, 1, 0},
		{"a func combined, the pipeline renamed and shared", func(s policy.Policy) []*policy.Pipeline {
			p := policy.Must(policy.Wrap(s, policy.Observe(withF)))
			return []*policy.Pipeline{p.With(policy.Name("x")), p.With(policy.Name("db"))}
		}, 1, 0, 1},
		{"two pipelines, one observer", func(s policy.Policy) []*policy.Pipeline {
			return []*policy.Pipeline{policy.Must(policy.Wrap(s, policy.Observe(&a), policy.Name("a"))),
				policy.Must(policy.Wrap(s, policy.Observe(&a), policy.Name("db")))}
		}, 1, 0, 0},
		{"observer removed from a derived pipeline", func(s policy.Policy) []*policy.Pipeline {
			p := policy.Must(policy.Wrap(s, policy.Observe(&a), policy.Name("db")))
			return []*policy.Pipeline{p, p.With(policy.Observe(nil))}
		}, 1, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a.events, b.events, fn.n = nil, nil, 0
			src := &source{}
			c.build(src)
			src.announce()
			require.Len(t, a.events, c.a, "a")
			require.Len(t, b.events, c.b, "b")
			require.Equal(t, c.f, fn.n, "the func")
			for _, e := range a.events {
				require.Equal(t, "db", e.Pipeline, "under the last name a was subscribed with")
			}
		})
	}
}

// TestPipeline_RegisterHandedEachStage: an observer with a Register method, alone or
// among others, is handed each stage when the pipeline is bound, and again when With
// binds it anew.
func TestPipeline_RegisterHandedEachStage(t *testing.T) {
	var r registrar
	var other recorder
	src := &source{}
	p := policy.Must(policy.Wrap(src, br(), policy.Observe(event.Observers(&other, &r))))
	require.Len(t, r.stages, 2)
	require.Same(t, src, r.stages[0].(*source), "outermost first")
	p.With(policy.Name("db"))
	require.Len(t, r.stages, 4, "With binds anew: Register must take a stage it knows")
	policy.Must(policy.Wrap(src))
	require.Len(t, r.stages, 4, "an unobserved pipeline registers nothing")
	require.Equal(t, fmt.Sprint(r.stages[0]), fmt.Sprint(r.stages[2]))
}
