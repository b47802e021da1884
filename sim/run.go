package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Run plays sc in a testing/synctest bubble of t and returns its figures. Nothing in
// the run waits on the wall clock: a 20 s scenario takes the time its events take to
// compute. Run must not be called from inside another bubble.
func Run(t *testing.T, sc Scenario) (Summary, error) {
	t.Helper()
	return RunWith(t, sc, Options{})
}

// Options are what a run may report while it goes. The zero value reports nothing.
type Options struct {
	// Progress, if not nil, is called from the run's engine each time virtual time
	// passes a whole multiple of ProgressEvery, with the virtual time since the start
	// and the user calls started so far. It must not block for long, nor call into
	// the run.
	Progress func(virtual time.Duration, calls int)
	// ProgressEvery is the virtual time between calls of Progress; 0 means 1 s.
	ProgressEvery time.Duration
}

// RunWith is [Run] with options.
func RunWith(t *testing.T, sc Scenario, o Options) (Summary, error) {
	t.Helper()
	if err := sc.Validate(); err != nil {
		return Summary{}, err
	}
	var s Summary
	var err error
	synctest.Test(t, func(*testing.T) { s, err = play(sc, o) })
	return s, err
}

// Until is the virtual time by which a scenario's last call has started, plus its
// users' timeout: about how long a run lasts in virtual time, for progress reports.
func (s *Scenario) Until() time.Duration {
	l := s.Load
	d := l.Duration
	if l.Burst > 0 {
		d = l.At
	}
	if l.UserTimeout == 0 {
		d += DefaultUserTimeout
	} else if l.UserTimeout > 0 {
		d += l.UserTimeout
	}
	return d
}

// RunSeeds plays sc once for every seed and returns each run and the spread of its
// figures.
func RunSeeds(t *testing.T, sc Scenario, seeds []uint64) ([]Summary, Spread, error) {
	t.Helper()
	runs := make([]Summary, 0, len(seeds))
	for _, seed := range seeds {
		sc.Seed = seed
		s, err := Run(t, sc)
		if err != nil {
			return nil, Spread{}, err
		}
		runs = append(runs, s)
	}
	return runs, SpreadOf(runs), nil
}

// play runs sc inside the current bubble.
func play(sc Scenario, o Options) (Summary, error) {
	w, err := newWorld(sc)
	if err != nil {
		return Summary{}, err
	}
	if o.Progress != nil {
		every := o.ProgressEvery
		if every <= 0 {
			every = time.Second
		}
		next := every
		w.e.tick = func() {
			if at := time.Since(w.start); at >= next {
				next = (at/every + 1) * every
				w.mu.Lock()
				calls := 0
				for _, b := range w.rec.buckets {
					calls += b.Started
				}
				w.mu.Unlock()
				o.Progress(at, calls)
			}
		}
	}
	l := sc.Load
	userTimeout := l.UserTimeout
	if userTimeout == 0 {
		userTimeout = DefaultUserTimeout
	}
	entries := []*service{w.svcs[0]}
	if len(sc.Entries) > 0 {
		entries = entries[:0]
		for _, e := range sc.Entries {
			entries = append(entries, w.byName[e])
		}
	}
	arrivals := rand.New(rand.NewPCG(sc.Seed, 2))
	pick := func() *service {
		if len(entries) == 1 {
			return entries[0]
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		return entries[arrivals.IntN(len(entries))]
	}
	finish := func() {
		w.mu.Lock()
		w.pending--
		w.mu.Unlock()
	}
	call := func() {
		to := pick()
		w.mu.Lock()
		w.pending++
		w.mu.Unlock()
		w.users.start(func() { w.userCall(to, userTimeout); finish() })
	}
	switch {
	case l.Burst > 0:
		w.e.After(l.At, func() {
			for range l.Burst {
				call()
			}
		})
	case l.Users > 0:
		// Closed loop: each user calls, thinks, and calls again until Duration; the
		// users start spread over one think time.
		think := func() time.Duration {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.draw(l.Think)
		}
		w.pending = l.Users
		for range l.Users {
			w.e.After(time.Duration(arrivals.Float64()*float64(l.Think.Mean)), func() {
				w.users.start(func() {
					for time.Since(w.start) < l.Duration {
						w.userCall(pick(), userTimeout)
						<-w.clock.NewTimer(think()).C()
					}
					finish()
				})
			})
		}
	default:
		w.arriving = true
		var next func()
		rate := sc.rate()
		gap := func() time.Duration { return time.Duration(arrivals.ExpFloat64() / rate * float64(time.Second)) }
		next = func() {
			call()
			if d := gap(); time.Since(w.start)+d < l.Duration {
				w.e.After(d, next)
			} else {
				w.mu.Lock()
				w.arriving = false
				w.mu.Unlock()
			}
		}
		w.e.After(gap(), next)
	}
	defer w.users.close()
	w.e.loop(func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.arriving && w.pending == 0 && (l.Burst == 0 || w.e.fired > 0)
	})
	return w.summary(), nil
}

const (
	outcomeOK = iota
	outcomeFailed
	outcomeLost
)

// userCall makes one user call to a service. A user gives up after timeout: an
// event of the engine cancels the call's context, so that its give-up costs no
// runtime timer (which the bubble's timer heap would keep until its time, see
// sweepEvery) and no timer context.
func (w *world) userCall(to *service, timeout time.Duration) {
	at := time.Now()
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		giveUp := w.e.schedule(timeout, cancel)
		defer func() {
			w.e.cancel(giveUp)
			cancel()
		}()
	}
	res, err := wire{to}.RoundTrip(to.request(ctx))
	outcome := outcomeOK
	switch {
	case err != nil && ctx.Err() != nil:
		outcome = outcomeLost
	case err != nil:
		outcome = outcomeFailed
	default:
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			outcome = outcomeFailed
		}
	}
	w.mu.Lock()
	w.rec.call(at.Sub(w.start), time.Since(at), outcome)
	w.mu.Unlock()
}

// recorder counts a run in time buckets (by the start of each call).
type recorder struct {
	w       *world
	buckets []Bucket
	// slots are the services whose requests the series counts (those with workers or
	// faults), by service.slot. A bucket counts them in a slice, not in its Requests
	// map, until the summary: no hashing of a name, nor a map the size of the
	// services, per request.
	slots    []*service
	okLat    []time.Duration
	calls    []CallAt // every call's start and whether it was answered, for RecoveryStrict
	requests map[string]int
	// outage: some service has a fault, so the summary has an Outage and needs calls.
	// Without one, calls are not kept: 16 bytes a call, 160 MB at 10⁷ calls.
	outage bool
}

func (r *recorder) init(w *world) {
	r.w = w
	r.requests = map[string]int{}
	for _, s := range w.svcs {
		r.outage = r.outage || len(s.Faults) > 0
		s.slot = -1
		if s.Workers > 0 || len(s.Faults) > 0 {
			s.slot = len(r.slots)
			r.slots = append(r.slots, s)
		}
	}
}

func (r *recorder) bucket(t time.Duration) *Bucket {
	i := int(t / r.w.sc.Bucket)
	for len(r.buckets) <= i {
		r.buckets = append(r.buckets, Bucket{At: seconds(time.Duration(len(r.buckets)) * r.w.sc.Bucket), Requests: map[string]int{}})
	}
	return &r.buckets[i]
}

func (r *recorder) request(s *service, t time.Duration) {
	s.requests++
	if s.slot >= 0 {
		b := r.bucket(t)
		if b.requests == nil {
			b.requests = make([]int, len(r.slots))
		}
		b.requests[s.slot]++
	}
}

// series fills each bucket's Requests from its counts.
func (r *recorder) series() []Bucket {
	for i := range r.buckets {
		b := &r.buckets[i]
		for slot, n := range b.requests {
			if n > 0 {
				b.Requests[r.slots[slot].Name] = n
			}
		}
		b.requests = nil
	}
	return r.buckets
}

func (r *recorder) call(at, latency time.Duration, outcome int) {
	if r.outage {
		r.calls = append(r.calls, CallAt{at, outcome == outcomeOK})
	}
	b := r.bucket(at)
	b.Started++
	switch outcome {
	case outcomeOK:
		b.OK++
		r.okLat = append(r.okLat, latency)
	case outcomeFailed:
		b.Failed++
	default:
		b.Lost++
	}
}

// CallAt is one call of a run: when it started, and whether it was answered.
type CallAt struct {
	At time.Duration
	OK bool
}

// StrictWindow is how long every call must go on being answered for
// Outage.RecoveryStrict.
const StrictWindow = time.Second

// RecoveryStrict returns the time from `from` to the start of the first call answered
// after it from which every call started within window was answered, or -1 if none
// was before the last window of arrivals. calls must be sorted by start. It is
// Outage.RecoveryStrict (with StrictWindow), and the loopback storm's "recovery to
// the call", so the two are measured by one definition.
func RecoveryStrict(calls []CallAt, from, window time.Duration) time.Duration {
	if len(calls) == 0 {
		return -1
	}
	last := calls[len(calls)-1].At
	nextFail := len(calls) // the first failed call after i
	best := time.Duration(-1)
	for i := len(calls) - 1; i >= 0 && calls[i].At >= from; i-- {
		if !calls[i].OK {
			nextFail = i
			continue
		}
		c := calls[i].At
		if c+window > last {
			continue
		}
		if nextFail == len(calls) || calls[nextFail].At > c+window {
			best = c - from
		}
	}
	return best
}

// Bucket is one time bucket of a run: the calls started in it and what became of
// them, and the requests each service with workers or faults received in it.
type Bucket struct {
	At       float64        `json:"at_s"`
	Started  int            `json:"started"`
	OK       int            `json:"ok"`
	Failed   int            `json:"failed"`
	Lost     int            `json:"lost"`
	Requests map[string]int `json:"requests"`
	requests []int          // by service.slot, until the summary fills Requests
}

// Summary is a run's figures; its JSON (summary.json) is the same, byte for byte, for
// the same scenario and seed.
type Summary struct {
	Scenario string  `json:"scenario"`
	Stack    Stack   `json:"stack"`
	Seed     uint64  `json:"seed"`
	Virtual  float64 `json:"virtual_s"` // virtual time the run took
	Events   uint64  `json:"events"`    // engine events fired
	Calls    int     `json:"calls"`
	OK       int     `json:"ok"`
	Failed   int     `json:"failed"`
	Lost     int     `json:"lost"`
	OKShare  float64 `json:"ok_share"`
	// Requests is each service's requests received over the run.
	Requests map[string]int `json:"requests"`
	// P50 and P99 are the latencies of the calls answered 200, in ms.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// Outage is the first fault of the scenario (none: nil) and what it did.
	Outage *Outage  `json:"outage,omitempty"`
	Series []Bucket `json:"series"`
}

// Outage is what the scenario's first fault did.
type Outage struct {
	Service string  `json:"service"`
	From    float64 `json:"from_s"`
	To      float64 `json:"to_s"`
	// PerCall is the faulty service's requests per user call started during the
	// fault.
	PerCall float64 `json:"requests_per_call"`
	// Recovery is the time from the fault's end to the start of the first bucket whose
	// calls were at least 95 % answered (RecoveryShare), in seconds; -1 if none was.
	Recovery float64 `json:"recovery_s"`
	// RecoveryStrict is the time from the fault's end to the start of the first call
	// from which every call started within StrictWindow (1 s) was answered, in
	// seconds, to the microsecond; -1 if there was none. It does not depend on the
	// buckets.
	RecoveryStrict float64 `json:"recovery_strict_s"`
}

// RecoveryShare is the share of calls answered that marks a recovered bucket.
const RecoveryShare = 0.95

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e6 }

func (w *world) summary() Summary {
	r := &w.rec
	for _, sv := range w.svcs {
		if sv.requests > 0 {
			r.requests[sv.Name] = sv.requests
		}
	}
	s := Summary{Scenario: w.sc.Name, Stack: w.sc.Stack, Seed: w.sc.Seed, Virtual: seconds(time.Since(w.start)),
		Events: w.e.fired, Requests: r.requests, Series: r.series()}
	for _, b := range r.buckets {
		s.Calls += b.Started
		s.OK += b.OK
		s.Failed += b.Failed
		s.Lost += b.Lost
	}
	if s.Calls > 0 {
		s.OKShare = float64(s.OK) / float64(s.Calls)
	}
	slices.Sort(r.okLat)
	s.P50, s.P99 = quantile(r.okLat, 0.5), quantile(r.okLat, 0.99)
	for _, sv := range w.svcs {
		if len(sv.Faults) == 0 {
			continue
		}
		f := sv.Faults[0]
		o := &Outage{Service: sv.Name, From: seconds(f.From), To: seconds(f.To), Recovery: -1}
		calls, reqs := 0, 0
		for _, b := range r.buckets {
			at := time.Duration(b.At * float64(time.Second))
			if at >= f.From && at < f.To {
				calls += b.Started
				reqs += b.Requests[sv.Name]
			}
			if o.Recovery < 0 && at >= f.To && b.Started > 0 && float64(b.OK) >= RecoveryShare*float64(b.Started) {
				o.Recovery = seconds(at - f.To)
			}
		}
		if calls > 0 {
			o.PerCall = math.Round(float64(reqs)/float64(calls)*1e4) / 1e4
		}
		slices.SortStableFunc(r.calls, func(a, b CallAt) int { return cmp.Compare(a.At, b.At) })
		o.RecoveryStrict = -1
		if d := RecoveryStrict(r.calls, f.To, StrictWindow); d >= 0 {
			o.RecoveryStrict = seconds(d)
		}
		s.Outage = o
		break
	}
	return s
}

func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return float64(sorted[i].Microseconds()) / 1000
}

// JSON returns the summary as summary.json writes it.
func (s Summary) JSON() []byte {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("sim: summary: %v", err)) // only plain values: cannot happen
	}
	return append(b, '\n')
}

// Figure is one figure over seeds.
type Figure struct {
	Median float64 `json:"median"`
	Worst  float64 `json:"worst"`
}

// Spread is the median and worst of a set of runs' figures: worst is the lowest
// share answered, the highest latency, requests per call and recovery time (a run
// that never recovered counts as the worst).
type Spread struct {
	Runs     int     `json:"runs"`
	OKShare  Figure  `json:"ok_share"`
	P99      Figure  `json:"p99_ms"`
	PerCall  *Figure `json:"requests_per_call,omitempty"`
	Recovery *Figure `json:"recovery_s,omitempty"`
	// RecoveryStrict is Outage.RecoveryStrict's, -1 for never.
	RecoveryStrict *Figure `json:"recovery_strict_s,omitempty"`
}

// SpreadOf returns the spread of runs' figures.
func SpreadOf(runs []Summary) Spread {
	sp := Spread{Runs: len(runs)}
	pick := func(get func(Summary) float64, lowWorst bool) Figure {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		sort.Float64s(v)
		f := Figure{Median: median(v)}
		if lowWorst {
			f.Worst = v[0]
		} else {
			f.Worst = v[len(v)-1]
		}
		return f
	}
	if len(runs) == 0 {
		return sp
	}
	sp.OKShare = pick(func(s Summary) float64 { return s.OKShare }, true)
	sp.P99 = pick(func(s Summary) float64 { return s.P99 }, false)
	if runs[0].Outage != nil {
		pc := pick(func(s Summary) float64 { return s.Outage.PerCall }, false)
		sp.PerCall = &pc
		never := func(get func(*Outage) float64) *Figure {
			f := pick(func(s Summary) float64 {
				if v := get(s.Outage); v >= 0 {
					return v
				}
				return math.Inf(1)
			}, false)
			if math.IsInf(f.Worst, 1) {
				f.Worst = -1 // never recovered
			}
			if math.IsInf(f.Median, 1) {
				f.Median = -1
			}
			return &f
		}
		sp.Recovery = never(func(o *Outage) float64 { return o.Recovery })
		sp.RecoveryStrict = never(func(o *Outage) float64 { return o.RecoveryStrict })
	}
	return sp
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// WriteFile writes the summary's JSON (summary.json) to path.
func (s Summary) WriteFile(path string) error { return os.WriteFile(path, s.JSON(), 0o644) }

// WriteRun writes s into the report folder out, as both commands lay it out:
// out/<stack>/seed-<seed>/summary.json.
func WriteRun(out string, s Summary) error {
	dir := filepath.Join(out, string(s.Stack), fmt.Sprintf("seed-%d", s.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return s.WriteFile(filepath.Join(dir, "summary.json"))
}

// WriteSpread writes a stack's spread over its seeds into the report folder out, as
// out/<stack>/spread.json, beside its runs' folders ([WriteRun]).
func WriteSpread(out string, stack Stack, sp Spread) error {
	dir := filepath.Join(out, string(stack))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "spread.json"), append(b, '\n'), 0o644)
}

// users runs user calls on goroutines kept between calls: a call's deep stack
// (every hop runs in its caller's goroutine) is grown once, not once per call. The
// goroutine that went idle last takes the next call: its stack is the likeliest to
// be in the processor's caches still (a channel that idle goroutines all wait on
// would wake the one idle the longest, and with thousands of calls in flight its
// stack has long left them). Which goroutine takes a call makes no other difference.
type users struct {
	mu     sync.Mutex // guards idle and closed
	idle   []chan func()
	closed bool
}

func (u *users) start(fn func()) {
	u.mu.Lock()
	if n := len(u.idle); n > 0 {
		work := u.idle[n-1]
		u.idle[n-1] = nil
		u.idle = u.idle[:n-1]
		u.mu.Unlock()
		work <- fn // the goroutine is blocked receiving, or about to: it has room for one
		return
	}
	u.mu.Unlock()
	work := make(chan func(), 1)
	go func() {
		for {
			fn()
			u.mu.Lock()
			if u.closed {
				u.mu.Unlock()
				return
			}
			u.idle = append(u.idle, work)
			u.mu.Unlock()
			var ok bool
			if fn, ok = <-work; !ok {
				return
			}
		}
	}()
}

// close ends the idle goroutines; one still on a call ends after it.
func (u *users) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for _, work := range u.idle {
		close(work)
	}
	u.idle = nil
}
