package policyotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

// Scope is the instrumentation scope name of the meter.
const Scope = "github.com/backstop-go/backstop/policyotel"

// Observer records events as OTel metrics and span events. It is safe for concurrent
// use. Build it with [New].
type Observer struct {
	calls, attempts, retries, suppressed, deadlines, transitions, shed, fleet metric.Int64Counter
	duration, retryAfter                                                      metric.Float64Histogram
	state                                                                     metric.Int64Gauge
	adm                                                                       *admission // fallbacks, and every stage's rejections and waits
	grpc                                                                      *grpcInstruments
	grpcCalls                                                                 atomic.Bool // StartGRPCCall was called
	grpcSets                                                                  sync.Map    // [2]string{method, target} → its attribute set

	// Read at every collection: the budgets and shedders added with AddBudget and AddShedder.
	budgetLevel            metric.Float64ObservableGauge
	inFlight, limit, queue metric.Int64ObservableGauge
	admitted               metric.Int64ObservableCounter
	mu                     sync.Mutex // guards budgets, shedders, stages and stageGauges
	budgets                map[string]Leveler
	shedders               map[string]ShedGauges

	// The stages added with AddStage, by kind and name, and the backstop.stage.*
	// instruments that read their gauges, by gauge name.
	meter       metric.Meter
	stages      map[[2]string]policy.Publisher
	stageGauges map[string]*stageGauge

	// listened holds the names of shedders whose refusals reach the Observer through
	// listener, subscribed to them (event.Source). The same refusals reaching it
	// another way are not recorded again.
	listened sync.Map
	listener *shedListener
}

// Leveler is what the budget gauge reads: every budget in package budget has it.
type Leveler interface{ Level() float64 }

// ShedGauges is what the shedder instruments read: shed.Shedder has it.
type ShedGauges interface {
	InFlight() int
	Limit() int
	QueueLen() int
	Admitted() uint64
}

// New returns an Observer recording on mp's meter. The mp is required. The global
// MeterProvider is used only if the caller passes it (otel.GetMeterProvider()).
func New(mp metric.MeterProvider) (*Observer, error) {
	if mp == nil {
		return nil, errors.New("policyotel: the MeterProvider is nil; pass one (otel.GetMeterProvider() for the global)")
	}
	m := mp.Meter(Scope)
	o := &Observer{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.calls = counter("backstop.calls", "{call}", "Calls that left a pipeline, by outcome.")
	o.attempts = counter("backstop.attempts", "{attempt}", "Attempts a pipeline's retry made, by outcome.")
	o.retries = counter("backstop.retries", "{retry}", "Retries scheduled, by why the error was retryable.")
	o.suppressed = counter("backstop.retries.suppressed", "{retry}", "Retries that would have happened and did not, by why.")
	o.deadlines = counter("backstop.deadlines.exceeded", "{deadline}", "Deadlines and per-attempt timeouts that ran out.")
	o.transitions = counter("backstop.breaker.transitions", "{transition}", "Breaker state changes.")
	o.shed = counter("backstop.shed.requests", "{request}", "Requests a shedder refused, by reason and priority.")
	var err error
	o.duration, err = m.Float64Histogram("backstop.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Time calls spent in a pipeline, retries and backoff included."))
	errs = append(errs, err)
	o.retryAfter, err = m.Float64Histogram("backstop.shed.retry_after", metric.WithUnit("s"),
		metric.WithDescription("Retry-After sent with refusals."))
	errs = append(errs, err)
	o.fleet, err = m.Int64Counter("backstop.fleet.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Fleet policies falling back to local state when their store is out of reach (to=local), and back (to=shared)."))
	errs = append(errs, err)
	o.state, err = m.Int64Gauge("backstop.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("A breaker's state after its last transition: 0 closed, 1 half-open, 2 open."))
	errs = append(errs, err)
	o.budgetLevel, err = m.Float64ObservableGauge("backstop.budget.level", metric.WithUnit("{retry}"),
		metric.WithDescription("What a retry budget holds now: tokens, or retries that may start now."))
	errs = append(errs, err)
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit("{request}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	o.inFlight = gauge("backstop.shed.inflight", "Requests a shedder has admitted and not yet released.")
	o.limit = gauge("backstop.shed.limit", "A shedder's current concurrency limit.")
	o.queue = gauge("backstop.shed.queue_length", "Requests waiting in a shedder's queue.")
	o.admitted, err = m.Int64ObservableCounter("backstop.shed.admitted", metric.WithUnit("{request}"),
		metric.WithDescription("Requests a shedder admitted."))
	errs = append(errs, err)
	var admErrs []error
	o.adm, admErrs = newAdmission(m)
	errs = append(errs, admErrs...)
	var grpcErrs []error
	o.grpc, grpcErrs = newGRPCInstruments(m)
	errs = append(errs, grpcErrs...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policyotel: creating instruments: %w", err)
	}
	o.budgets, o.shedders = map[string]Leveler{}, map[string]ShedGauges{}
	o.meter, o.stages, o.stageGauges = m, map[[2]string]policy.Publisher{}, map[string]*stageGauge{}
	o.listener = &shedListener{o}
	// The registration lives as long as mp: shut mp down to stop the reads.
	if _, err := m.RegisterCallback(o.observe, o.budgetLevel, o.inFlight, o.limit, o.queue, o.admitted); err != nil {
		return nil, fmt.Errorf("policyotel: registering the gauges' callback: %w", err)
	}
	return o, nil
}

// AddBudget exports b's level as backstop.budget.level{budget=name}, read at every
// collection. Adding b again does nothing. A nil b, or another budget under name, is an
// error.
func (o *Observer) AddBudget(name string, b Leveler) error {
	_, err := add(o, o.budgets, "budget", name, b)
	return err
}

// AddShedder exports s as backstop.shed.inflight, backstop.shed.limit,
// backstop.shed.queue_length and backstop.shed.admitted, each {shedder=name}. They are
// read at every collection. For a shed.Shedder it also records every refusal it makes:
// backstop.shed.requests, backstop.shed.retry_after and the span event. That covers
// refusals by its middleware, by Admit or in a pipeline. Each refusal is recorded once,
// whether or not its Options.Observer or the pipeline's observer is this Observer too.
// The order of the Observer, the shedder and AddShedder does not matter. A shedder in a
// pipeline this Observer observes is added when the pipeline is bound
// ([Observer.Register]).
//
// Adding s again does nothing. A nil s is an error, and so is another shedder under
// name. So is a name other than the shedder's own, which labels its refusals.
func (o *Observer) AddShedder(name string, s ShedGauges) error {
	if n, ok := s.(interface{ Name() string }); ok && s != nil && n.Name() != name {
		return fmt.Errorf("policyotel: the shedder added as %q is named %q; add a shedder under its own name, which labels its refusals", name, n.Name())
	}
	added, err := add(o, o.shedders, "shedder", name, s)
	if added {
		if src, ok := s.(event.Source); ok {
			o.listened.Store(name, true)
			src.Subscribe(o.listener, "")
		}
	}
	return err
}

// Register is the Observer's optional Register method (see event.Observer). policy.Wrap
// and Pipeline.With hand it each stage of a pipeline this Observer observes. It finds a
// stage's series by the interfaces the stage implements, never by its kind:
//   - a named [ShedGauges] is added as AddShedder adds it, unless another shedder
//     has its name;
//   - a breaker (Name and StateValue) has its state recorded as it is now, so
//     backstop.breaker.state has a point from the moment the pipeline is bound;
//   - a policy.Publisher's gauges are added as AddStage adds them.
func (o *Observer) Register(stage any) {
	if _, ok := stage.(policy.Policy); !ok {
		return
	}
	if n, ok := stage.(interface{ Name() string }); ok {
		if s, ok := stage.(ShedGauges); ok {
			_ = o.AddShedder(n.Name(), s)
		}
		if b, ok := stage.(interface{ StateValue() float64 }); ok {
			o.state.Record(context.Background(), int64(b.StateValue()), metric.WithAttributes(attribute.String("breaker", n.Name())))
		}
	}
	if p, ok := stage.(policy.Publisher); ok {
		_ = o.AddStage(p)
	}
}

// add puts v in sources under name, once, and says whether it did.
func add[T comparable](o *Observer, sources map[string]T, what, name string, v T) (bool, error) {
	var zero T
	if v == zero {
		return false, fmt.Errorf("policyotel: the %s %q is nil", what, name)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, dup := sources[name]; dup {
		if prev == v {
			return false, nil
		}
		return false, fmt.Errorf("policyotel: another %s named %q is already added", what, name)
	}
	sources[name] = v
	return true, nil
}

// shedListener is how the Observer hears the refusals of the shedders it exports.
type shedListener struct{ o *Observer }

func (l *shedListener) Observe(e event.Event) {
	if e.Kind == event.Shed {
		l.o.recordShed(e)
	}
}

func (o *Observer) observe(_ context.Context, obs metric.Observer) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, b := range o.budgets {
		obs.ObserveFloat64(o.budgetLevel, b.Level(), metric.WithAttributes(attribute.String("budget", name)))
	}
	for name, s := range o.shedders {
		attrs := metric.WithAttributes(attribute.String("shedder", name))
		obs.ObserveInt64(o.inFlight, int64(s.InFlight()), attrs)
		obs.ObserveInt64(o.limit, int64(s.Limit()), attrs)
		obs.ObserveInt64(o.queue, int64(s.QueueLen()), attrs)
		obs.ObserveInt64(o.admitted, int64(s.Admitted()), attrs)
	}
	return nil
}

var states = map[string]int64{"closed": 0, "half_open": 1, "open": 2}

// Observe records e.
func (o *Observer) Observe(e event.Event) {
	ctx := contextOf(e)
	pipeline := attribute.String("pipeline", e.Pipeline)
	span := trace.SpanFromContext(ctx)
	recording := span.IsRecording()
	switch e.Kind {
	case event.CallEnd:
		outcome := policy.Outcome(e.Err)
		o.calls.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("outcome", outcome)))
		o.duration.Record(ctx, e.Elapsed.Seconds(), metric.WithAttributes(pipeline))
		if recording && outcome == policy.OutcomeRejected {
			span.AddEvent("backstop.call.rejected", stamp(e, trace.WithAttributes(pipeline, refusalType(e.Err)))...)
		}
	case event.AttemptStart:
		o.observeGRPC(e)
		if recording {
			attrs := []attribute.KeyValue{pipeline, attribute.Int("backstop.attempt", e.Attempt)}
			if e.Attempt > 1 {
				attrs = append(attrs, attribute.Int("http.request.resend_count", e.Attempt-1))
			}
			span.AddEvent("backstop.attempt", stamp(e, trace.WithAttributes(attrs...))...)
		}
	case event.AttemptEnd:
		o.observeGRPC(e)
		o.attempts.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("outcome", policy.Outcome(e.Err))))
	case event.RetryScheduled:
		o.observeGRPC(e)
		o.retries.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("reason", e.Reason)))
		if recording {
			span.AddEvent("backstop.retry", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline,
				attribute.Int("backstop.attempt", e.Attempt), attribute.Float64("backstop.delay_seconds", e.Delay.Seconds()),
				attribute.String("backstop.reason", e.Reason)))
		}
	case event.RetrySuppressed:
		o.suppressed.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("reason", e.Reason)))
		if recording {
			span.AddEvent("backstop.retry.suppressed", trace.WithTimestamp(e.Time), trace.WithAttributes(pipeline,
				attribute.String("backstop.reason", e.Reason), attribute.Int("backstop.attempts", e.Attempt)))
		}
	case event.DeadlineExceeded:
		o.deadlines.Add(ctx, 1, metric.WithAttributes(pipeline, attribute.String("kind", e.Source)))
		if recording {
			span.AddEvent("backstop.deadline.exceeded", trace.WithTimestamp(e.Time),
				trace.WithAttributes(pipeline, attribute.String("backstop.kind", e.Source)))
		}
	case event.BreakerState:
		b := attribute.String("breaker", e.Source)
		o.transitions.Add(ctx, 1, metric.WithAttributes(b, attribute.String("from", e.From), attribute.String("to", e.To)))
		o.state.Record(ctx, states[e.To], metric.WithAttributes(b))
	case event.Shed:
		if _, ok := o.listened.Load(e.Source); !ok { // else recorded by the listener
			o.recordShed(e)
		}
	case event.Fleet:
		o.fleet.Add(ctx, 1, metric.WithAttributes(attribute.String("policy", e.Source), attribute.String("to", e.To)))
	case event.Fallback, event.Rejected, event.Waited:
		o.adm.observe(ctx, e, span, recording)
	}
}

// recordShed records a refusal and adds its span event.
func (o *Observer) recordShed(e event.Event) {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	s := attribute.String("shedder", e.Source)
	o.shed.Add(ctx, 1, metric.WithAttributes(s, attribute.String("reason", e.Reason), attribute.String("priority", e.Priority)))
	if e.Delay > 0 {
		o.retryAfter.Record(ctx, e.Delay.Seconds(), metric.WithAttributes(s))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("backstop.shed", trace.WithTimestamp(e.Time), trace.WithAttributes(s,
			attribute.String("backstop.reason", e.Reason), attribute.String("backstop.priority", e.Priority)))
	}
}

// refusalType is the error.type of a call a stage refused: the refusing stage's kind
// ("breaker", "shed"). It is found through whatever wraps the *policy.RejectError (a
// retry that gave up on it, say). Another refusal is typed by its Go type. Both are
// bounded, unlike the error's text.
func refusalType(err error) attribute.KeyValue {
	var rej *policy.RejectError
	if errors.As(err, &rej) {
		return attribute.String("error.type", rej.Policy)
	}
	return attribute.String("error.type", fmt.Sprintf("%T", err))
}
