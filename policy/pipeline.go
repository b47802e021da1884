package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
)

// Pipeline is a stack of policies bound once into a chain of Runners. Build it with
// [Wrap]; run calls through it with [Pipeline.Do] or [Get].
//
// A Pipeline is immutable and safe for concurrent use. A nil *Pipeline runs no call:
// its Do returns [ErrNoPipeline], so a pipeline lost to a typo never runs a call
// bare. Use [NoProtection] where a call should run unprotected on purpose.
type Pipeline struct {
	// What Do reads of an unobserved call comes first, in one cache line. With
	// many pipelines in a process, a call finds few of them in the cache.
	runner     Runner
	startNeeds event.Needs // what bound reads of call starts
	endNeeds   event.Needs // and of call ends
	// elapsedOnly: bound reads only the Elapsed of call ends, on the system clock.
	// Do then times calls on the monotonic clock, with no Stopwatch. This is the
	// observed path of package metrics.
	elapsedOnly bool
	// ends is bound, when elapsedOnly and bound counts call ends from their error
	// and duration alone (package metrics' observer does). Do then hands those over
	// without building an event.Event.
	ends callEnds

	policies      []Policy
	places        []Placement // each policy's
	budget, retry int         // indexes in policies, −1 if absent
	name          string
	obs           event.Observer   // as given to Observe
	subs          []event.Observer // obs's members as they subscribe to event.Sources: comparable
	bound         event.Observer   // obs prepared for this pipeline (event.ForPipeline)
	clock         clock.Clock
}

// Wrap checks a stack of policies against the ordering rules and binds it into a
// Pipeline. The first policy is outermost: Wrap(d, b, r) runs d(b(r(fn))). Options
// ([Name], [Observe], [UseClock]) may be given in the same list, conventionally after
// the stages:
//
//	p, err := policy.Wrap(d, b, r, policy.Name("db"), policy.Observe(m))
//
// An Option is not a stage: Wrap takes the options out before it checks the stack, and
// positions in its errors count stages only.
//
// A stack that breaks a rule is refused with an [*OrderError] that matches [ErrOrder]
// and names the rule, the positions involved and the fix. A nil policy, or a typed nil
// such as the *retry.Retry of a failed retry.New, is refused under O6. Wrap with no
// policies is valid: the pipeline is a pass-through that runs fn directly.
//
// Wrap binds each stage once, innermost first. It then hands each stage to the
// pipeline's Observer if it keeps series of policies (event.Register: metrics
// exports a breaker's state from then on). And it subscribes the Observer to each
// stage that reports events of its own (an event.Source: a breaker's transitions,
// a shedder's refusals).
//
// Wrap never panics: a policy whose Placement or Bind panics is refused with an
// error naming its position.
func Wrap(policies ...Policy) (p *Pipeline, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("policy: a policy panicked while the pipeline was built: %v", r)
		}
	}()
	stages := make([]Policy, 0, len(policies))
	var opts []Option
	for _, pol := range policies {
		if o, ok := pol.(Option); ok {
			opts = append(opts, o)
			continue
		}
		stages = append(stages, pol)
	}
	places, budget, retry, err := checkOrder(stages)
	if err != nil {
		return nil, err
	}
	p = &Pipeline{policies: stages, places: places, budget: budget, retry: retry, clock: clock.System()}
	for _, o := range opts {
		o.apply(p)
	}
	if err := p.bind(); err != nil {
		return nil, err
	}
	return p, nil
}

// errNilRunner is returned by Wrap when a policy's Bind returns nil.
var errNilRunner = errors.New("returned a nil Runner from Bind")

// bind binds the policies innermost first, handing the budget to the retry below it.
func (p *Pipeline) bind() error {
	var budget RetryBudget
	if p.budget >= 0 {
		budget = p.policies[p.budget].(RetryBudget) // checked by checkOrder
	}
	var attemptTimeout time.Duration
	if p.retry >= 0 {
		for i := p.retry + 1; i < len(p.policies); i++ {
			if l, ok := p.attemptLimit(i); ok {
				attemptTimeout = l
			}
		}
	}
	p.bound = nil
	if p.obs != nil {
		p.bound = event.ForPipeline(p.obs, p.name)
	}
	p.startNeeds, p.endNeeds = event.NeedsOf(p.bound, event.CallStart), event.NeedsOf(p.bound, event.CallEnd)
	p.elapsedOnly = p.startNeeds == event.NeedsNothing && p.endNeeds == event.NeedsElapsed && clock.IsSystem(p.clock)
	p.ends = nil
	if p.elapsedOnly {
		p.ends, _ = p.bound.(callEnds)
	}
	var r Runner = terminal{}
	for i := len(p.policies) - 1; i >= 0; i-- {
		env := Env{Pipeline: p.name, Observer: p.bound, Position: i + 1}
		if i == p.retry {
			env.Budget = budget
			env.AttemptTimeout = attemptTimeout
		}
		if p.places[i].Deadline {
			env.AttemptTimeout = p.boundingTimeout(i)
		}
		if r = p.policies[i].Bind(r, env); r == nil {
			return fmt.Errorf("policy: %s at position %d (%T) %w", p.places[i].Kind, i+1, p.policies[i], errNilRunner)
		}
	}
	p.runner = r
	if p.obs != nil {
		for _, pol := range p.policies {
			event.Register(p.obs, pol)
			if src, ok := pol.(event.Source); ok {
				for _, sub := range p.subs {
					src.Subscribe(sub, p.name)
				}
			}
		}
	}
	return nil
}

// boundingTimeout returns, for the overall deadline at index i, the limit of the
// per-attempt timeout inside it when only prompt stages stand between the two, or 0.
// See Env.AttemptTimeout.
func (p *Pipeline) boundingTimeout(i int) time.Duration {
	for j := i + 1; j < len(p.policies); j++ {
		if l, ok := p.attemptLimit(j); ok {
			return l
		}
		if !p.places[j].Prompt {
			return 0
		}
	}
	return 0
}

// attemptLimit returns the limit of the per-attempt timeout at index i: an
// InsideRetry stage with a Limit() time.Duration method, as deadline.NewPerAttempt has.
func (p *Pipeline) attemptLimit(i int) (time.Duration, bool) {
	if l, ok := p.policies[i].(interface{ Limit() time.Duration }); ok && p.places[i].Retry == InsideRetry {
		return l.Limit(), true
	}
	return 0, false
}

// callEnds is an observer that reads nothing of a call end but its error and
// elapsed time. Its CallEnded is what its Observe does with a CallEnd event.
type callEnds interface {
	CallEnded(err error, elapsed time.Duration)
}

// terminal is the innermost Runner: it calls fn.
type terminal struct{}

func (terminal) Run(ctx context.Context, fn Func) error { return fn(ctx) }

// ErrNoPipeline is what Do returns on a nil *Pipeline: a stack looked up by a name
// that names none, or a field never set. The call does not run.
var ErrNoPipeline = errors.New("policy: Do on a nil *Pipeline: the call did not run; build one with Wrap, or use policy.NoProtection() to run calls bare on purpose")

// NoProtection returns a pipeline that runs each call once, bare: no deadline, no
// retry, no breaker. It names the choice in the source, where a nil pipeline would
// hide it. Its name is "no protection".
func NoProtection() *Pipeline { return noProtection }

var noProtection = Must(Wrap(Name("no protection")))

// errNilFunc is returned by Do for a nil fn.
var errNilFunc = errors.New("policy: Do called with a nil Func")

// Do runs fn under the pipeline's policies and returns fn's error or the refusal of a
// policy. On the success path it allocates nothing the policies themselves don't need.
func (p *Pipeline) Do(ctx context.Context, fn Func) error {
	if fn == nil {
		return errNilFunc
	}
	if p == nil {
		return ErrNoPipeline
	}
	if p.startNeeds|p.endNeeds == event.NeedsNothing {
		return p.runner.Run(ctx, fn)
	}
	if p.elapsedOnly {
		start := time.Since(epoch)
		err := p.runner.Run(ctx, fn)
		elapsed := time.Since(epoch) - start
		if p.ends != nil {
			p.ends.CallEnded(err, elapsed)
			return err
		}
		p.bound.Observe(event.Event{Kind: event.CallEnd, Pipeline: p.name, Err: err, Context: ctx, Elapsed: elapsed})
		return err
	}
	w := clock.StartStopwatch(p.clock, p.startNeeds|p.endNeeds)
	if p.startNeeds != event.NeedsNothing {
		p.bound.Observe(event.Event{Kind: event.CallStart, Pipeline: p.name, Time: w.Started(), Context: ctx})
	}
	err := p.runner.Run(ctx, fn)
	if p.endNeeds != event.NeedsNothing {
		e := event.Event{Kind: event.CallEnd, Pipeline: p.name, Err: err, Context: ctx}
		e.Time, e.Elapsed = w.Stop()
		p.bound.Observe(e)
	}
	return err
}

// Get runs fn under p like [Pipeline.Do] and returns the value of the attempt that
// succeeded (under a hedge, the one callpath.Win chose), or T's zero value with the
// error. It allocates one closure per call more
// than Do.
func Get[T any](ctx context.Context, p *Pipeline, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := p.Do(ctx, func(ctx context.Context) error {
		r, err := fn(ctx)
		if err == nil && callpath.Win(ctx) { // under a hedge, attempts run at once: keep the winner's
			v = r
		}
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// With returns a copy of p with the options applied, bound anew: a second name for
// the same stack, another observer. Policy objects are shared with p, so a breaker
// keeps one state for both pipelines. With on a nil p returns nil.
//
// Subscriptions are not doubled: an event.Source keeps one per observer. So
// p.With(Observe(o)).With(Name("db")) hears each breaker transition once, under the
// last name. So does an o combined with others in one pipeline and alone in another.
func (p *Pipeline) With(opts ...Option) *Pipeline {
	if p == nil {
		return nil // still no pipeline: its Do reports ErrNoPipeline
	}
	q := *p // policies is never modified after Wrap: the copy may share it
	for _, o := range opts {
		if o != nil {
			o.apply(&q)
		}
	}
	if err := q.bind(); err != nil {
		// Bind succeeded for these policies once already; a policy whose Bind now
		// fails breaks its own contract.
		panic(err)
	}
	return &q
}

// Name returns the pipeline's name, "" if unnamed or nil.
func (p *Pipeline) Name() string {
	if p == nil {
		return ""
	}
	return p.name
}

// String describes the stack outermost first, e.g. "orders: deadline → breaker → retry".
func (p *Pipeline) String() string {
	if p == nil {
		return "(nil pipeline)"
	}
	var b strings.Builder
	if p.name != "" {
		b.WriteString(p.name)
		b.WriteString(": ")
	}
	if len(p.policies) == 0 {
		b.WriteString("(empty)")
	}
	for i, pl := range p.places {
		if i > 0 {
			b.WriteString(" → ")
		}
		b.WriteString(pl.Kind)
	}
	return b.String()
}

// An Option names, observes or clocks a pipeline. Give options to [Wrap], among the
// stages (conventionally last), or to [Pipeline.With]. The set is closed: [Name],
// [Observe], [UseClock]. An Option is a [Policy] only so that it may stand in Wrap's
// list: Wrap takes it out, and it is never bound.
type Option interface {
	Policy
	apply(*Pipeline)
}

type optionFunc func(*Pipeline)

func (f optionFunc) apply(p *Pipeline) { f(p) }

// Placement is a free one; Wrap never checks an Option against the rules.
func (optionFunc) Placement() Placement { return Placement{Kind: "option", Free: true} }

// Bind returns next: an Option does nothing per call (Wrap never binds one).
func (optionFunc) Bind(next Runner, _ Env) Runner { return next }

// Name names the pipeline. The name labels its events and metrics, so it should come
// from a small fixed set (the dependency's name), never from request data.
func Name(name string) Option { return optionFunc(func(p *Pipeline) { p.name = name }) }

// Observe sets the pipeline's event.Observer, replacing any earlier one; nil removes it.
// Use event.Observers to send events to several.
func Observe(o event.Observer) Option {
	subs := subscribers(o)
	return optionFunc(func(p *Pipeline) { p.obs, p.subs = o, subs })
}

// subscribers are o's members (event.Members) as they subscribe to event.Sources.
// A Source keeps one subscription per subscriber. A member is its own subscriber
// when it is a pointer; otherwise it is boxed once per Observe. An ObserverFunc, which
// is not comparable, is then one subscriber however many pipelines With derives.
func subscribers(o event.Observer) []event.Observer {
	ms := event.Members(o)
	for i, m := range ms {
		if reflect.TypeOf(m).Kind() != reflect.Pointer {
			ms[i] = &boxed{m}
		}
	}
	return ms
}

type boxed struct{ event.Observer }

// UseClock sets the clock the pipeline stamps call events with; nil means
// [clock.System]. Stages take their own clocks in their Options.
func UseClock(c clock.Clock) Option { return optionFunc(func(p *Pipeline) { p.clock = clock.Or(c) }) }

// epoch is the reading the monotonic call timings of Do are measured from.
var epoch = time.Now()
