package sim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-go/backstop/internal/textdist"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
)

// Stack is how a service calls its dependencies, and what guards the service itself.
type Stack string

// The stacks, those of the storm example (examples/storm).
const (
	// Naive is a hand-written loop of Tuning.Attempts attempts with un-jittered
	// exponential backoff from Tuning.Base and a per-request timeout of
	// Tuning.HopTimeout; the service has no guard of its own.
	Naive Stack = "naive"
	// OwnerOnly is Backstop's retry (full jitter), an overall deadline and a
	// per-attempt timeout through policyhttp's transport, with policyhttp.Middleware on
	// the service: one retry owner per call path, and nothing else.
	OwnerOnly Stack = "owner_only"
	// Backstop is the whole stack: deadline, breaker, token-bucket budget, retry and
	// per-attempt timeout through policyhttp's transport, and shed.Middleware (guarding
	// with the breaker) on the service.
	Backstop Stack = "backstop"
)

func (s Stack) builtin() bool { return s == Naive || s == OwnerOnly || s == Backstop }

// Client is a custom stack's client for one hop: the pipeline each request to the
// dependency runs under, through policyhttp's transport, and the classifier that
// judges its answers.
type Client struct {
	// Pipeline runs every request of the hop; it must not be nil.
	Pipeline *policy.Pipeline
	// Classifier judges each answer; nil means policyhttp.DefaultClassifier.
	Classifier policyhttp.Classifier
	// Mesh makes the hop retry as a service mesh does, knowing nothing of the call
	// path's owner: the service's calls are not marked as owned upstream by the
	// attempt headers it receives, so every layer on the stack retries.
	Mesh bool
}

// Hop is what a [ClientFunc] is told about the hop it builds a client for.
type Hop struct {
	From, To string
	// Clock and Rand are the run's: a pipeline that times or draws anything with
	// others keeps the run off the engine's clock, or makes it differ between runs.
	Clock clock.Clock
	Rand  jitter.Rand
}

// ClientFunc builds a custom stack's client for each hop of a service on that stack,
// when a run starts. A service on a custom stack is guarded by policyhttp.Middleware
// (it reads the attempt headers and marks its calls as owned upstream), unless a
// client of its is a Mesh.
type ClientFunc func(Hop) (Client, error)

// Tuning is the stacks' parameters. Zero fields take the storm's values.
type Tuning struct {
	// Attempts is every stack's attempts per call; 0 means 4.
	Attempts int
	// Base is the backoff before the second attempt; 0 means 50 ms (the retry's Cap is 1 s).
	Base time.Duration
	// HopTimeout bounds each attempt; 0 means 1 s.
	HopTimeout time.Duration
	// CallBudget is OwnerOnly's and Backstop's overall deadline per call of a hop; 0
	// means 2.5 s.
	CallBudget time.Duration
	// BreakerOpen is Backstop's breaker open time (fixed); 0 means 50 ms.
	BreakerOpen time.Duration
	// NoHopTimeout leaves out the naive loop's per-request timeout.
	NoHopTimeout bool
	// Hedge, if > 0, puts a hedge (retry.Hedge, 2 attempts in flight, the second
	// after Hedge with no answer) in the Backstop stack in place of its retry.
	Hedge time.Duration
}

// The defaults of Tuning.
const (
	DefaultAttempts    = 4
	DefaultBase        = 50 * time.Millisecond
	DefaultHopTimeout  = time.Second
	DefaultCallBudget  = 2500 * time.Millisecond
	DefaultBreakerOpen = 50 * time.Millisecond
	DefaultBucket      = 100 * time.Millisecond
	DefaultUserTimeout = 3 * time.Second
)

func (t Tuning) withDefaults() Tuning {
	if t.Attempts == 0 {
		t.Attempts = DefaultAttempts
	}
	if t.Base == 0 {
		t.Base = DefaultBase
	}
	if t.HopTimeout == 0 {
		t.HopTimeout = DefaultHopTimeout
	}
	if t.CallBudget == 0 {
		t.CallBudget = DefaultCallBudget
	}
	if t.BreakerOpen == 0 {
		t.BreakerOpen = DefaultBreakerOpen
	}
	return t
}

// Dist is a service-time distribution: Mean, fixed unless Exponential.
type Dist struct {
	Mean        time.Duration
	Exponential bool
}

// FaultKind is what a fault does to a service.
type FaultKind string

// The faults.
const (
	// Down: the service answers every request at once with a 503, and runs no work:
	// a request that waited for a worker fails when it reaches one.
	Down FaultKind = "down"
	// Slow: each request takes Factor times its service time.
	Slow FaultKind = "slow"
	// Erroring: a share Rate of requests is answered with a 503 carrying Retry-After
	// (RetryAfter, whole seconds, if > 0).
	Erroring FaultKind = "erroring"
)

// Fault is one entry of a service's fault schedule, from From to To (virtual time
// since the start of the run). Over Recover after To the fault fades out linearly (a
// recovering service): Slow's factor falls to 1, Erroring's and Down's share of
// refused requests falls to 0.
type Fault struct {
	Kind       FaultKind
	From, To   time.Duration
	Recover    time.Duration
	Factor     float64       // Slow
	Rate       float64       // Erroring: share of requests in (0, 1]
	RetryAfter time.Duration // Erroring
}

// Service is one node of the call graph.
type Service struct {
	Name string
	// Workers is how many requests the service works on at a time (capacity-bound:
	// the rest queue); 0 means no limit (latency-bound: every request takes its Work
	// time at once, however many there are; with no Work, a thin middle service).
	Workers int
	// Work is each request's service time before the service calls its
	// dependencies. A worker is held for it even if the caller has gone away
	// (abandoned work still takes its turn).
	Work Dist
	// Queue bounds the requests waiting for a worker; 0 means no bound. A request
	// beyond it is answered with a 503.
	Queue int
	// Calls are the services this one calls, one after another, for each request.
	Calls []string
	// Stack is how it calls them; "" means the scenario's Stack.
	Stack  Stack
	Faults []Fault
}

// Load is the client population, one of three: open-loop Poisson arrivals at Rate
// per second for Duration; or Users closed-loop users, each calling, thinking for a
// Think time and calling again until Duration; or a Burst of calls at once at At (a
// probe). Each call is given up after UserTimeout.
type Load struct {
	Rate float64
	// Share, if > 0, sets Rate to this share of the scenario's Capacity (0.62: 62 %
	// of what its services with workers serve); give Rate or Share, not both.
	Share       float64
	Duration    time.Duration
	UserTimeout time.Duration // 0 means DefaultUserTimeout; negative means none
	Users       int
	Think       Dist
	Burst       int
	At          time.Duration // Burst's time
}

// Scenario is one simulated run.
type Scenario struct {
	Name string
	Seed uint64
	// Stack is every service's stack unless the service names its own.
	Stack    Stack
	Tuning   Tuning
	Services []Service
	// Entries are the services users call, each call to one drawn uniformly; empty
	// means Services[0] alone.
	Entries []string
	Load    Load
	// Bucket is the width of the time series; 0 means DefaultBucket (100 ms).
	Bucket time.Duration
	// Network is each request's and each answer's delay on the wire, one way; the
	// zero value means none.
	Network Dist
	// Custom are stacks beyond the built-in ones, each building its own clients (an
	// Envoy route's, a gRPC service config's). A scenario file cannot set them.
	Custom map[Stack]ClientFunc
}

// knows reports whether st is a built-in stack or one of s.Custom.
func (s *Scenario) knows(st Stack) bool {
	if st.builtin() {
		return true
	}
	_, ok := s.Custom[st]
	return ok
}

// stackNames lists the stacks s knows, for errors.
func (s *Scenario) stackNames() string {
	names := []string{string(Naive), string(OwnerOnly), string(Backstop)}
	var custom []string
	for st := range s.Custom {
		custom = append(custom, string(st))
	}
	slices.Sort(custom)
	names = append(names, custom...)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ErrInvalidScenario is wrapped by every error of [Scenario.Validate].
var ErrInvalidScenario = errors.New("sim: invalid scenario")

// FieldError is one bad field of a scenario, named by its Go path
// ("Services[3].Faults[0].To"). It matches ErrInvalidScenario.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	return ErrInvalidScenario.Error() + ": " + e.Field + ": " + e.Msg
}
func (e *FieldError) Unwrap() error { return ErrInvalidScenario }

// Validate reports every bad field of s, each as a [*FieldError], joined with
// errors.Join; nil if there is none.
func (s *Scenario) Validate() error { return s.validate(nil) }

// validate is Validate without the rules that read a field unread reports: one
// that a file gave a value of the wrong kind. A nil unread checks every rule.
func (s *Scenario) validate(unread func(field string) bool) error {
	var errs []error
	// badReading reports a broken rule that reads the fields reads.
	badReading := func(reads []string, field, format string, args ...any) {
		for _, r := range reads {
			if unread != nil && unread(r) {
				return
			}
		}
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	// bad reports a broken rule that reads field alone.
	bad := func(field, format string, args ...any) { badReading([]string{field}, field, format, args...) }
	if !s.knows(s.Stack) {
		bad("Stack", "%q; want %s", s.Stack, s.stackNames())
	}
	for st, fn := range s.Custom {
		if st.builtin() || st == "" || fn == nil {
			bad("Custom", "%q: want a new name and a ClientFunc", st)
		}
	}
	if len(s.Services) == 0 {
		bad("Services", "empty; want at least the service users call")
	}
	t := s.Tuning
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Base", t.Base}, {"HopTimeout", t.HopTimeout}, {"CallBudget", t.CallBudget}, {"BreakerOpen", t.BreakerOpen}, {"Hedge", t.Hedge}} {
		if f.d < 0 {
			bad("Tuning."+f.name, "%v; want ≥ 0", f.d)
		}
	}
	if t.Attempts < 0 {
		bad("Tuning.Attempts", "%d; want ≥ 0", t.Attempts)
	}
	if s.Bucket < 0 {
		bad("Bucket", "%v; want ≥ 0", s.Bucket)
	}
	if s.Network.Mean < 0 {
		bad("Network.Mean", "%v; want ≥ 0", s.Network.Mean)
	}
	// The rules on names, calls and capacity read every service's name or workers.
	var allNames, capacity []string
	for i := range s.Services {
		f := fmt.Sprintf("Services[%d]", i)
		allNames = append(allNames, f+".Name")
		capacity = append(capacity, f+".Workers", f+".Work.Mean")
	}
	names := map[string]int{}
	for i, sv := range s.Services {
		f := fmt.Sprintf("Services[%d]", i)
		switch {
		case sv.Name == "":
			bad(f+".Name", "empty; want a name")
		case names[sv.Name] > 0:
			badReading(allNames[:i+1], f+".Name", "%q named twice; want each service named once", sv.Name)
		default:
			names[sv.Name] = i + 1
		}
		switch {
		case sv.Workers < 0:
			bad(f+".Workers", "%d; want ≥ 0", sv.Workers)
		case sv.Workers > 0 && sv.Work.Mean <= 0:
			badReading([]string{f + ".Workers", f + ".Work.Mean"}, f+".Work.Mean", "%v; want > 0 with Workers", sv.Work.Mean)
		case sv.Work.Mean < 0:
			bad(f+".Work.Mean", "%v; want ≥ 0", sv.Work.Mean)
		}
		if sv.Queue < 0 {
			bad(f+".Queue", "%d; want ≥ 0", sv.Queue)
		}
		if sv.Stack != "" && !s.knows(sv.Stack) {
			bad(f+".Stack", "%q; want %s", sv.Stack, s.stackNames())
		}
		for j, ft := range sv.Faults {
			g := fmt.Sprintf("%s.Faults[%d]", f, j)
			if ft.Kind != Down && ft.Kind != Slow && ft.Kind != Erroring {
				bad(g+".Kind", "%q; want down, slow or erroring", ft.Kind)
			}
			switch {
			case ft.From < 0:
				bad(g+".From", "%v; want ≥ 0", ft.From)
			case ft.To <= ft.From:
				badReading([]string{g + ".From", g + ".To"}, g+".To", "%v–%v; want 0 ≤ From < To", ft.From, ft.To)
			}
			if ft.Recover < 0 {
				bad(g+".Recover", "%v; want ≥ 0", ft.Recover)
			}
			switch {
			case ft.Kind == Slow && ft.Factor < 1:
				badReading([]string{g + ".Kind", g + ".Factor"}, g+".Factor", "%v; want ≥ 1", ft.Factor)
			case ft.Kind == Erroring && !(ft.Rate > 0 && ft.Rate <= 1):
				badReading([]string{g + ".Kind", g + ".Rate"}, g+".Rate", "%v; want in (0, 1]", ft.Rate)
			}
			if ft.RetryAfter < 0 {
				bad(g+".RetryAfter", "%v; want ≥ 0", ft.RetryAfter)
			}
		}
	}
	// Every call names a service and the graph has no cycle.
	dangling := false
	for i, sv := range s.Services {
		for j, c := range sv.Calls {
			if names[c] == 0 {
				f := fmt.Sprintf("Services[%d].Calls[%d]", i, j)
				badReading(append([]string{f}, allNames...), f, "%q names no service; %s", c, s.wantService(c))
				dangling = true
			}
		}
	}
	if !dangling && len(names) == len(s.Services) {
		state := make([]int, len(s.Services))
		var visit func(i int) bool
		visit = func(i int) bool {
			switch state[i] {
			case 1:
				f := fmt.Sprintf("Services[%d].Calls", i)
				badReading(append([]string{"Services"}, allNames...), f,
					"a cycle through %q; want calls that never lead back to a service", s.Services[i].Name)
				return false
			case 2:
				return true
			}
			state[i] = 1
			for _, c := range s.Services[i].Calls {
				if !visit(names[c] - 1) {
					return false
				}
			}
			state[i] = 2
			return true
		}
		for i := range s.Services {
			if !visit(i) {
				break
			}
		}
	}
	for i, e := range s.Entries {
		if names[e] == 0 {
			f := fmt.Sprintf("Entries[%d]", i)
			badReading(append([]string{f}, allNames...), f, "%q names no service; %s", e, s.wantService(e))
		}
	}
	l := s.Load
	rate := l.Rate != 0 || l.Share != 0
	const (
		rateF, shareF, burstF, usersF = "Load.Rate", "Load.Share", "Load.Burst", "Load.Users"
	)
	switch {
	case l.Burst < 0:
		bad(burstF, "%d; want ≥ 0", l.Burst)
	case l.At < 0:
		bad("Load.At", "%v; want ≥ 0", l.At)
	case l.Users < 0:
		bad(usersF, "%d; want ≥ 0", l.Users)
	case l.Users > 0 && (l.Burst > 0 || rate):
		badReading([]string{usersF, burstF, rateF, shareF}, usersF, "%d with a Rate or a Burst; want one population", l.Users)
	case l.Users > 0 && (l.Think.Mean <= 0 || l.Duration <= 0):
		badReading([]string{usersF, "Load.Think.Mean", "Load.Duration"}, "Load.Think.Mean",
			"%v for %v; want a think time > 0 for a duration > 0", l.Think.Mean, l.Duration)
	case l.Burst > 0 && rate:
		badReading([]string{burstF, rateF, shareF}, burstF, "%d with a Rate; want one population", l.Burst)
	case l.Rate != 0 && l.Share != 0:
		badReading([]string{rateF, shareF}, shareF, "%v with a Rate; want one of them", l.Share)
	case l.Share < 0 || (l.Share > 0 && s.Capacity() == 0):
		badReading(append([]string{shareF}, capacity...), shareF,
			"%v of a capacity of %v/s; want > 0 of the capacity of services with workers", l.Share, s.Capacity())
	case l.Burst == 0 && l.Users == 0 && (!(l.Rate > 0 || l.Share > 0) || l.Duration <= 0):
		badReading([]string{burstF, usersF, rateF, shareF, "Load.Duration"}, rateF,
			"%v for %v; want a rate > 0 for a duration > 0, Users or a Burst", l.Rate, l.Duration)
	}
	if l.Rate > 1e9 || l.Share > 1e3 {
		badReading([]string{rateF, shareF}, rateF, "%v calls/s (share %v); want at most 10⁹", l.Rate, l.Share)
	}
	return errors.Join(errs...)
}

// wantService says which name a call or an entry that names no service may mean:
// the nearest, or the names of a few services.
func (s *Scenario) wantService(name string) string {
	best, bestD := "", 3
	var names []string
	for _, sv := range s.Services {
		if sv.Name == "" || slices.Contains(names, strconv.Quote(sv.Name)) {
			continue
		}
		names = append(names, strconv.Quote(sv.Name))
		if d := textdist.Distance(name, sv.Name); d < bestD && d < len(name) {
			best, bestD = sv.Name, d
		}
	}
	switch {
	case best != "":
		return fmt.Sprintf("did you mean %q?", best)
	case len(names) == 0:
		return "want a service's name"
	case len(names) > 6:
		return "want one of the services' names, such as " + strings.Join(names[:6], ", ")
	}
	return "want one of " + strings.Join(names, ", ")
}

// rate is the load's arrival rate per second.
func (s *Scenario) rate() float64 {
	if s.Load.Share > 0 {
		return s.Load.Share * s.Capacity()
	}
	return s.Load.Rate
}

// Storm returns the storm example's scenario (examples/storm) for stack: users at
// rate calls/s for duration on edge → api → data → db, the database (4 workers,
// 25 ms a query: 160 requests/s) down from duration/4 to duration·3/5, and
// StormNetwork each way on the wire.
func Storm(stack Stack, seed uint64, rate float64, duration time.Duration) Scenario {
	return Scenario{
		Name: "storm", Seed: seed, Stack: stack, Network: Dist{Mean: StormNetwork},
		Services: []Service{
			{Name: "edge", Calls: []string{"api"}},
			{Name: "api", Calls: []string{"data"}},
			{Name: "data", Calls: []string{"db"}},
			{Name: "db", Workers: 4, Work: Dist{Mean: 25 * time.Millisecond},
				Faults: []Fault{{Kind: Down, From: duration / 4, To: duration * 3 / 5}}},
		},
		Load: Load{Rate: rate, Duration: duration},
	}
}

// StormNetwork is Storm's one-way delay on the wire: 0.5 ms, about what a request
// between two of the storm's services on 127.0.0.1 takes each way on a loaded
// machine. It is what the loopback storm has and a zero-delay wire has not: the time a
// breaker's probe takes to answer, and a shedder's baseline latency.
const StormNetwork = 500 * time.Microsecond

// Chain returns users calling a chain of hops services (1–5) above a database like
// the storm's (4 workers, 25 ms a query), every service on stack: "s1" → … → "db".
func Chain(stack Stack, hops int, seed uint64, load Load, faults ...Fault) Scenario {
	sc := Scenario{Name: fmt.Sprintf("chain-%d", hops), Seed: seed, Stack: stack, Load: load}
	for i := 1; i <= hops; i++ {
		next := fmt.Sprintf("s%d", i+1)
		if i == hops {
			next = "db"
		}
		sc.Services = append(sc.Services, Service{Name: fmt.Sprintf("s%d", i), Calls: []string{next}})
	}
	sc.Services = append(sc.Services, Service{Name: "db", Workers: 4, Work: Dist{Mean: 25 * time.Millisecond}, Faults: faults})
	return sc
}

// Layered returns n services (n ≥ 6) in six layers, the last of databases like the
// storm's (4 workers, 25 ms a query); each service calls one of the next layer (the
// i-th of a layer calls the (i mod size)-th of the next). Users call the first three
// layers, so a call crosses 5, 4 or 3 services that retry before a database. rate is
// the users' calls per second; Capacity gives the databases' requests per second.
func Layered(stack Stack, n int, seed uint64, load Load) Scenario {
	sc := Scenario{Name: fmt.Sprintf("layered-%d", n), Seed: seed, Stack: stack, Load: load}
	const layers = 6
	size := func(k int) int { // the first layer takes the remainder
		if k == 0 {
			return n - (layers-1)*(n/layers)
		}
		return n / layers
	}
	name := func(k, i int) string { return fmt.Sprintf("L%d-%d", k, i) }
	for k := range layers {
		for i := range size(k) {
			sv := Service{Name: name(k, i)}
			if k == layers-1 {
				sv.Workers, sv.Work = 4, Dist{Mean: 25 * time.Millisecond}
			} else {
				sv.Calls = []string{name(k+1, i%size(k+1))}
			}
			if k < 3 {
				sc.Entries = append(sc.Entries, sv.Name)
			}
			sc.Services = append(sc.Services, sv)
		}
	}
	return sc
}

// Capacity returns the requests per second the scenario's services with workers
// serve together at their mean service times.
func (s *Scenario) Capacity() float64 {
	c := 0.0
	for _, sv := range s.Services {
		if sv.Workers > 0 {
			c += float64(sv.Workers) / sv.Work.Mean.Seconds()
		}
	}
	return c
}
