package event

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// An Observer receives the events of a pipeline's stages. They are call start and end,
// attempt start and end, retries scheduled and suppressed, breaker state changes,
// deadlines exceeded and requests shed. Set it with policy.Observe.
//
// Implementers:
//   - Observe is called synchronously on the call's goroutine (a breaker's state change
//     on the goroutine whose call caused it), never under a policy's lock. It must be
//     safe for concurrent use, fast, and must not call back into the pipeline.
//   - The Event is passed by value; keep no reference to its Err beyond the call unless
//     the error is meant to be kept.
//
// An Observer may have optional methods too. Pipelines and stages find them by type
// assertion, as net/http finds a ResponseWriter's Flusher:
//   - Needs(Kind) Needs says which events it reads. Stages then skip the work of the
//     others: building the event, and above all reading the clock (two reads per
//     attempt, 50 ns each on some machines). Without it, an Observer is handed every
//     event, timed. Stages ask [NeedsOf] once, when they are bound.
//   - ForPipeline(name string) Observer prepares it for one pipeline. A pipeline
//     calls it once when it is bound (policy.Wrap, policy.Pipeline.With), through
//     [ForPipeline], and hands its stages the Observer returned. Work that depends
//     on the pipeline alone (resolving labelled series, say) is then done once, not
//     per event.
//   - Register(stage any) keeps series of the policies it observes, such as a
//     breaker's state read at every scrape. A pipeline being bound hands it each of
//     its stages, through [Register], so a policy in an observed pipeline needs no
//     registration of its own. It must accept a stage it already knows (pipelines
//     share stages, and With binds them again). It must ignore a stage it has no
//     series for.
//
// A nil Observer costs nothing: stages check for it once per event site and do no event
// work at all.
type Observer interface {
	Observe(Event)
}

// The optional methods of an Observer, found by type assertion.
type (
	needer    interface{ Needs(Kind) Needs }
	preparer  interface{ ForPipeline(name string) Observer }
	registrar interface{ Register(stage any) }
)

// Needs is what an observer reads of one kind of event.
type Needs uint8

// What an observer may need of a kind of event.
const (
	NeedsNothing Needs = 0 // it ignores the kind: stages do not report it
	NeedsEvent   Needs = 1 // the event, but not its Time and Elapsed: stages do not read the clock for it
	// NeedsElapsed is the event with its Elapsed; its Time may be zero. On the system
	// clock, stages then time the interval on the monotonic clock alone (see
	// clock.Stopwatch). That costs half of what time.Now does.
	NeedsElapsed Needs = NeedsEvent | needsElapsed
	NeedsTiming  Needs = NeedsEvent | needsTime | needsElapsed // the event with its Time and Elapsed
)

const (
	needsTime    Needs = 2
	needsElapsed Needs = 4
)

// NeedsOf returns what o reads of events of kind k. That is NeedsNothing for a nil o,
// what its Needs method says if it has one, and NeedsTiming otherwise. Stages ask once,
// when they are bound.
func NeedsOf(o Observer, k Kind) Needs {
	switch o := o.(type) {
	case nil:
		return NeedsNothing
	case needer:
		return o.Needs(k)
	}
	return NeedsTiming
}

// ForPipeline returns o prepared for the pipeline named name. That is what its
// ForPipeline method returns if it has one, and o itself otherwise. For an o made by
// [Observers], each observer in it is prepared. Pipelines call it once, when they are
// bound.
func ForPipeline(o Observer, name string) Observer {
	if p, ok := o.(preparer); ok {
		return p.ForPipeline(name)
	}
	return o
}

// Register hands stage to o if o has a Register method. For an o made by
// [Observers], it hands stage to each observer in it that has one.
func Register(o Observer, stage any) {
	for _, m := range Members(o) {
		if r, ok := m.(registrar); ok {
			r.Register(stage)
		}
	}
}

// ObserverFunc adapts a function to an [Observer].
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// On returns an Observer that hands fn the events of the kinds given, and no others.
// It is Backstop's per-policy hook, on the one observer a pipeline has:
//
//	policy.Observe(event.On(func(e event.Event) { log.Print(e) }, event.RetryScheduled))
//
// It says what it reads (Needs), so stages do no work for the other kinds.
func On(fn func(Event), kinds ...Kind) Observer {
	o := &hook{fn: fn}
	for _, k := range kinds {
		if int(k) < len(o.kinds) {
			o.kinds[k] = true
		}
	}
	return o
}

type hook struct {
	fn    func(Event)
	kinds [len(eventNames)]bool
}

func (h *hook) Observe(e Event) {
	if int(e.Kind) < len(h.kinds) && h.kinds[e.Kind] {
		h.fn(e)
	}
}

// Needs is NeedsTiming for the kinds asked for, NeedsNothing for the others.
func (h *hook) Needs(k Kind) Needs {
	if int(k) < len(h.kinds) && h.kinds[k] {
		return NeedsTiming
	}
	return NeedsNothing
}

// A Source is a policy whose events reach observers beyond one call's pipeline. A
// breaker's state changes are such events: they happen at once for every pipeline
// sharing it. A shedder's refusals are too, made by its middleware as much as by its
// pipelines. policy.Wrap (and Pipeline.With) subscribe a pipeline's Observer to each
// Source among its stages once the pipeline is bound. Binding itself subscribes
// nothing. Others may subscribe too: package metrics does, to count a shedder's
// refusals.
//
// Implementers:
//   - Subscribe keeps one subscription per o, however many pipelines subscribe it: o
//     is comparable (a pointer, or the pipeline's box around an observer that is not),
//     and a second Subscribe of the same o replaces the first, its pipeline name
//     included. Each event then reaches each observer once. Pipelines subscribe each
//     of [Members] of their Observer on its own, so an observer combined with others
//     in one pipeline and alone in another is still one subscription.
//   - Events are delivered outside the Source's locks. An event that is no one
//     call's (a breaker's state change) has Pipeline set to the subscription's name.
//     A call's event (a shedder's refusal) names the call's own pipeline.
//   - An event sent to the subscribers is not sent to the Observer a pipeline hands
//     its stages (policy.Env.Observer) as well: the pipeline subscribed that one.
type Source interface {
	Subscribe(o Observer, pipeline string)
}

// Members returns the observers o combines, in order, if it was made by [Observers].
// Otherwise it returns o alone, or nothing for a nil o. A [Source] keeps one
// subscription per member. So an observer reached through several combinations still
// hears each event once.
func Members(o Observer) []Observer {
	switch o := o.(type) {
	case nil:
		return nil
	case multiObserver:
		return append([]Observer(nil), o...)
	}
	return []Observer{o}
}

// Observers returns an Observer that hands each event to every non-nil observer in
// order. It returns nil if none is non-nil, and the observer itself if only one is.
func Observers(os ...Observer) Observer {
	var list multiObserver
	for _, o := range os {
		if o == nil {
			continue
		}
		if m, ok := o.(multiObserver); ok {
			list = append(list, m...)
			continue
		}
		list = append(list, o)
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) Observe(e Event) {
	for _, o := range m {
		o.Observe(e)
	}
}

// Needs is the most any of the observers needs.
func (m multiObserver) Needs(k Kind) Needs {
	var n Needs
	for _, o := range m {
		n |= NeedsOf(o, k)
	}
	return n
}

// ForPipeline prepares each observer that has a ForPipeline method.
func (m multiObserver) ForPipeline(name string) Observer {
	out := make(multiObserver, len(m))
	for i, o := range m {
		out[i] = ForPipeline(o, name)
	}
	return out
}

// Kind says what happened. The zero value is not a valid kind.
type Kind uint8

// The events stages report. Each says the [Event] fields it sets beyond Kind,
// Pipeline and Time.
const (
	_ Kind = iota
	// CallStart: a call entered the pipeline.
	CallStart
	// CallEnd: a call left the pipeline. Sets Elapsed and Err.
	CallEnd
	// AttemptStart: the retry starts an attempt. Sets Attempt, counted from 1.
	AttemptStart
	// AttemptEnd: an attempt ended. Sets Attempt, Elapsed and Err.
	AttemptEnd
	// RetryScheduled: the retry will sleep Delay, then make attempt Attempt. Sets Err,
	// and Reason (retry.Reason…), which says why the error was retryable.
	RetryScheduled
	// RetrySuppressed: a retry that would have happened did not. Sets Attempt (the
	// attempts made), Err, and Reason: "owner", "budget", "deadline" or "hint".
	RetrySuppressed
	// BreakerState: a breaker changed state. Source is its name; From and To are
	// the states.
	BreakerState
	// DeadlineExceeded: an overall deadline or a per-attempt timeout ran out. Sets
	// Elapsed, and Source: "deadline" or "attempt_timeout".
	DeadlineExceeded
	// Shed: a shedder refused work. Source is its name. Sets Reason, Priority, and
	// Delay, the Retry-After sent.
	Shed
	// Fleet: a policy sharing state across processes lost or regained its store.
	// Source is its name, Reason its kind: "breaker", "budget" or "quota". From and
	// To say what decides, "shared" or "local". Err says why it fell back.
	Fleet
	// Panic: user code panicked on a goroutine Backstop started; the panic became an
	// error. Source says what started it: "coalesce" or "hedge". Attempt is a hedge's
	// attempt. Err is the *policy.PanicError.
	Panic
	// Fallback: a fallback answered a failed call. Source is the fallback's name.
	// Reason is the failure's policy.Outcome: "failure", "rejected" or "deadline". To
	// says what answered: "value", "func" or "last_good". Err is the failure answered.
	Fallback
	// Rejected: a stage refused a call or attempt with a policy.RejectError. Sets
	// Stage, Source (its name), Reason, Delay (the Retry-After) and Elapsed (time
	// spent waiting).
	Rejected
	// Waited: a stage held a call, then let it through. Sets Stage, Source, and
	// Delay, the wait.
	Waited
	// ConfigReload: a configuration reload was applied or refused. Source is
	// "config". Reason is ConfigApplied or ConfigRefused; Err says why it was refused.
	ConfigReload
	// StageReset: a reload replaced a stage whose settings changed, added one or
	// removed one. Pipeline is the stack; Source the stage ("breaker", "budget", …).
	// Reason is "changed", "added" or "removed". To is the state carried over to the
	// new stage: "open" for a breaker that was open, else "".
	StageReset
)

// The reasons a [ConfigReload] gives.
const (
	ConfigApplied = "applied" // the new configuration runs every call that starts from now on
	ConfigRefused = "refused" // the file was refused whole; the running configuration stays
)

// The states an [Fleet] moves between.
const (
	FleetShared = "shared" // the policy decides on the state it shares with the fleet
	FleetLocal  = "local"  // its store is out of reach: it decides on its own, in this process
)

var eventNames = [...]string{
	CallStart:        "call_start",
	CallEnd:          "call_end",
	AttemptStart:     "attempt_start",
	AttemptEnd:       "attempt_end",
	RetryScheduled:   "retry_scheduled",
	RetrySuppressed:  "retry_suppressed",
	BreakerState:     "breaker_state",
	DeadlineExceeded: "deadline_exceeded",
	Shed:             "shed",
	Fleet:            "fleet_state",
	Panic:            "panic",
	Fallback:         "fallback",
	Rejected:         "rejected",
	Waited:           "waited",
	ConfigReload:     "config_reload",
	StageReset:       "stage_reset",
}

// String returns the event's snake_case name, e.g. "retry_suppressed".
func (k Kind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "unknown"
}

// The reasons an [RetrySuppressed] gives.
const (
	SuppressedOwner    = "owner"    // another layer owns retries on this call path
	SuppressedBudget   = "budget"   // the budget refused the retry
	SuppressedDeadline = "deadline" // the delay (and the least time an attempt needs) would end past the deadline
	SuppressedHint     = "hint"     // the server asked to wait longer than the retry's MaxHintDelay
)

// Event is one thing a stage reports. Fields a kind does not use are zero. Every field
// that may become a metrics label holds a value from a small closed set, never error
// text or a URL.
type Event struct {
	Kind     Kind
	Pipeline string // the pipeline's name, "" if unnamed
	// Stage is the reporting stage's Placement.Kind ("breaker", "retry"); "" for
	// call events, which the pipeline reports.
	Stage    string
	Source   string    // the reporting stage's own name, or its kind if it has none
	Time     time.Time // when it happened, by the reporting stage's clock
	Attempt  int
	Delay    time.Duration
	Elapsed  time.Duration
	Err      error
	Reason   string
	From, To string  // breaker states: "closed", "half_open", "open"
	Priority string  // shed: "critical", "default", "sheddable"
	Level    float64 // shed: the concurrency limit when the request was refused
	// Context is the context of the call where the reporting stage has one. For attempt
	// events it is the attempt's. Call, attempt, retry, suppression, deadline and
	// policy-form shed events carry it. So an observer can reach the call's trace span.
	// It is nil for breaker transitions, which are not any one call's. Observers must
	// not keep it.
	Context context.Context
}

// String returns the event on one line, for logs and test failures:
//
//	retry_scheduled pipeline=db stage=retry attempt=2 delay=120ms reason=timeout err="dial tcp: connection refused"
//
// It gives the kind, then each field the kind uses as key=value. A kind leaves the
// fields it does not use zero, and String omits zero fields. It omits Source when it
// equals Stage, as for a stage with no name of its own. Err is always quoted; other
// values only if they hold spaces, quotes or '='. Context is never printed. Time
// comes last, in RFC 3339 with nanoseconds.
func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Kind.String())
	text := func(key, v string) {
		if v != "" {
			b.WriteString(" " + key + "=")
			if strings.ContainsFunc(v, needsQuote) {
				v = strconv.Quote(v)
			}
			b.WriteString(v)
		}
	}
	duration := func(key string, d time.Duration) {
		if d != 0 {
			b.WriteString(" " + key + "=" + d.String())
		}
	}
	text("pipeline", e.Pipeline)
	text("stage", e.Stage)
	if e.Source != e.Stage {
		text("source", e.Source)
	}
	if e.Attempt != 0 {
		b.WriteString(" attempt=" + strconv.Itoa(e.Attempt))
	}
	duration("delay", e.Delay)
	duration("elapsed", e.Elapsed)
	text("reason", e.Reason)
	text("from", e.From)
	text("to", e.To)
	text("priority", e.Priority)
	if e.Level != 0 {
		b.WriteString(" level=" + strconv.FormatFloat(e.Level, 'g', -1, 64))
	}
	if e.Err != nil {
		b.WriteString(" err=" + strconv.Quote(e.Err.Error()))
	}
	if !e.Time.IsZero() {
		b.WriteString(" time=" + e.Time.Format(time.RFC3339Nano))
	}
	return b.String()
}

// needsQuote reports whether a value holding r must be quoted to read as one value.
func needsQuote(r rune) bool {
	return r == '"' || r == '=' || unicode.IsSpace(r) || !unicode.IsPrint(r)
}
