package event

import (
	"context"
	"time"
)

// An Observer receives the events of a pipeline's stages: call start and end, attempt
// start and end, retries scheduled and suppressed, breaker state changes, deadlines
// exceeded and requests shed. Set it with policy.Observe.
//
// Implementers:
//   - Observe is called synchronously on the call's goroutine (a breaker's state change
//     on the goroutine whose call caused it), never under a policy's lock. It must be
//     safe for concurrent use, fast, and must not call back into the pipeline.
//   - The Event is passed by value; keep no reference to its Err beyond the call unless
//     the error is meant to be kept.
//
// A nil Observer costs nothing: stages check for it once per event site and do no
// event work at all.
type Observer interface {
	Observe(Event)
}

// PipelineObserver is an Observer that prepares itself for each pipeline. When a
// pipeline is bound (policy.Wrap, policy.Pipeline.With), it calls ForPipeline once with the
// pipeline's name and hands the stages the Observer returned, so work that depends
// only on the pipeline (resolving labelled metric series, say) is done once rather
// than per event.
type PipelineObserver interface {
	Observer
	ForPipeline(name string) Observer
}

// Needs is what an observer reads of one kind of event.
type Needs uint8

// What an observer may need of a kind of event.
const (
	NeedsNothing Needs = 0 // it ignores the kind: stages do not report it
	NeedsEvent   Needs = 1 // the event, but not its Time and Elapsed: stages do not read the clock for it
	// NeedsElapsed is the event with its Elapsed; its Time may be zero. On the system
	// clock, stages then time the interval on the monotonic clock alone (see
	// clock.Stopwatch), which costs half of what time.Now does.
	NeedsElapsed Needs = NeedsEvent | needsElapsed
	NeedsTiming  Needs = NeedsEvent | needsTime | needsElapsed // the event with its Time and Elapsed
)

const (
	needsTime    Needs = 2
	needsElapsed Needs = 4
)

// A SelectiveObserver says which events it reads, so that stages skip the work of the
// others: building and handing over an event, and above all reading the clock (two
// reads per attempt, on machines where a read costs 50 ns). An Observer that is not a
// SelectiveObserver is handed every event, timed.
type SelectiveObserver interface {
	Observer
	Needs(Kind) Needs
}

// NeedsOf returns what o reads of events of kind k: NeedsNothing for a nil o, what it
// says if it is a [SelectiveObserver], NeedsTiming otherwise. Stages ask once, when
// they are bound.
func NeedsOf(o Observer, k Kind) Needs {
	switch o := o.(type) {
	case nil:
		return NeedsNothing
	case SelectiveObserver:
		return o.Needs(k)
	}
	return NeedsTiming
}

// ObserverFunc adapts a function to an [Observer].
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// A Source is a policy with events of its own that are no one call's: a breaker's
// state changes, which happen at once for every pipeline that shares the breaker.
// policy.Wrap (and Pipeline.With) subscribe a pipeline's Observer to each Source among
// its stages once the pipeline is bound; binding itself subscribes nothing.
//
// Implementers:
//   - Subscribe keeps one subscription per o, however many pipelines subscribe it: o
//     is comparable (a pointer, or the pipeline's box around an observer that is not),
//     and a second Subscribe of the same o replaces the first, its pipeline name
//     included. Each event then reaches each observer once. Pipelines subscribe each
//     of [Members] of their Observer on its own, so an observer combined with others
//     in one pipeline and alone in another is still one subscription.
//   - Events are delivered outside the Source's locks, with Pipeline set to the
//     subscription's name.
type Source interface {
	Subscribe(o Observer, pipeline string)
}

// A Registrar is an Observer that keeps series of the policies it observes, such as a
// breaker's state read at every scrape. When a pipeline with a Registrar for its
// Observer is bound (policy.Wrap, policy.Pipeline.With), Register is handed each of its
// stages, so that a policy inside an observed pipeline needs no registration of its
// own. Register must accept a stage it already knows (pipelines share stages, and
// With binds them again) and ignore a stage it has no series for.
type Registrar interface {
	Observer
	Register(stage any)
}

// Register hands stage to o if o is a [Registrar], and to each observer in o that is
// one if o combines several ([Observers]).
func Register(o Observer, stage any) {
	for _, m := range Members(o) {
		if r, ok := m.(Registrar); ok {
			r.Register(stage)
		}
	}
}

// Members returns the observers o combines, in order, if it was made by [Observers];
// o alone otherwise; nothing for a nil o. A [Source] keeps one subscription per member,
// so that an observer reached through several combinations still hears each event once.
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

// ForPipeline prepares each observer that is a PipelineObserver.
func (m multiObserver) ForPipeline(name string) Observer {
	out := make(multiObserver, len(m))
	for i, o := range m {
		out[i] = forPipeline(o, name)
	}
	return out
}

// forPipeline returns o prepared for the pipeline named name, if o wants that.
func forPipeline(o Observer, name string) Observer {
	if po, ok := o.(PipelineObserver); ok {
		return po.ForPipeline(name)
	}
	return o
}

// Kind says what happened. The zero value is not a valid kind.
type Kind uint8

// The events stages report. Each names the [Event] fields it sets beyond Kind,
// Pipeline and Time.
const (
	_                Kind = iota
	CallStart             // a call entered the pipeline
	CallEnd               // a call left it: Elapsed, Err
	AttemptStart          // the retry starts an attempt: Attempt (1-based)
	AttemptEnd            // an attempt ended: Attempt, Elapsed, Err
	RetryScheduled        // the retry will sleep Delay then make attempt Attempt: Reason (retry.Reason…: why the error was retryable), Err
	RetrySuppressed       // a retry that would have happened did not: Reason ("owner", "budget", "deadline", "hint"), Attempt (attempts made), Err
	BreakerState          // a breaker changed state: Source (breaker name), From, To
	DeadlineExceeded      // an overall deadline or a per-attempt timeout ran out: Source ("deadline" or "attempt_timeout"), Elapsed
	Shed                  // a shedder refused work: Source (shedder name), Reason, Priority, Delay (the Retry-After sent)
	Fleet                 // a policy sharing state across processes lost or regained its store: Source (its name), Reason (its kind: "breaker", "budget", "quota"), From, To ("shared" or "local": what decides), Err (why it fell back)
	Panic                 // user code panicked on a goroutine Backstop started and the panic became an error: Source (what started it: "coalesce", "hedge"), Attempt (a hedge's), Err (the *PanicError)
	Fallback              // a fallback answered a failed call: Source (the fallback's name), Reason (the failure's policy.Outcome: "failure", "rejected", "deadline"), To (what answered: "value", "func", "last-good"), Err (the failure answered)
	// Rejected: a stage refused a call or attempt with a policy.RejectError. Stage,
	// Source (its name), Reason, Delay (the Retry-After), Elapsed (time spent waiting).
	Rejected
	// Waited: a stage held a call, then let it through. Stage, Source, Delay (the wait).
	Waited
	ConfigReload // a configuration reload was applied or refused: Source ("config"), Reason (ConfigApplied or ConfigRefused), Err (why it was refused)
	StageReset   // a reload replaced a stage whose settings changed (it starts fresh), added one or removed one: Pipeline (the stack), Source (the stage: "breaker", "budget", …), Reason ("changed", "added" or "removed"), To (state carried over to the new stage: "open" for a breaker that was open, else "")
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

// Event is one thing a stage reports. Fields a kind does not use are zero; every field
// that may become a metrics label holds a value from a small closed set (never error
// text or a URL).
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
	// Context is the context of the call (of the attempt, for attempt events) where the
	// reporting stage has one — call, attempt, retry, suppression, deadline and
	// policy-form shed events — so an observer can reach the call's trace span; nil for
	// breaker transitions, which are not any one call's. Observers must not keep it.
	Context context.Context
}
