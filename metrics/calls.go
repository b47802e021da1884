package metrics

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/backstop-go/backstop/internal/stripe"
)

// callSeries is the collector of the series every observed call feeds:
// backstop_calls_total, backstop_attempts_total and backstop_call_duration_seconds.
// They are Backstop's own counters, read at scrape time, rather than client_golang's
// counters and histogram. So a call costs a few uncontended atomic additions. Durations
// are summed as integer nanoseconds and placed in buckets by integer comparison. Each
// pipeline's counters are spread over stripes (see [pipelineSeries]), so that calls on
// several cores do not fight over cache lines.
//
// With Options.NativeHistograms the duration histogram stays client_golang's, since
// native buckets are its business. Only the counters are then Backstop's.
//
// A callSeries is safe for concurrent use.
type callSeries struct {
	calls, attempts, duration *prometheus.Desc
	bounds                    []float64 // the duration buckets' upper bounds, in seconds
	limits                    []int64   // the same as the longest time.Duration each admits
	stripes                   int       // a power of two
	native                    *prometheus.HistogramVec

	mu     sync.Mutex // guards byName and pipelines
	byName map[string]*pipelineSeries
	// pipelines are byName's values in the order they came, for Collect.
	pipelines []*pipelineSeries
}

// maxStripes bounds a pipeline's stripes, and so its memory: 32 stripes of the default
// 11 buckets take 8 KiB.
const maxStripes = 32

// stripesFor is how many stripes a pipeline's counters get on procs processors. That is
// one on one processor. Otherwise it is four per processor, rounded up to a power of
// two and at most maxStripes. A goroutine keeps to one stripe (internal/stripe). So
// two goroutines running at once meet on one with a chance of about one in four per
// processor.
func stripesFor(procs int) int {
	if procs <= 1 {
		return 1
	}
	return min(1<<bits.Len(uint(4*procs-1)), maxStripes)
}

func newCallSeries(buckets []float64, native float64) (*callSeries, error) {
	if len(buckets) > 0 && math.IsInf(buckets[len(buckets)-1], +1) {
		buckets = buckets[:len(buckets)-1] // +Inf is implicit, as client_golang has it
	}
	for i, b := range buckets {
		if math.IsNaN(b) || (i > 0 && b <= buckets[i-1]) {
			return nil, fmt.Errorf("%w: Buckets %v; want increasing bounds", ErrInvalidOptions, buckets)
		}
	}
	c := &callSeries{
		calls: prometheus.NewDesc(Namespace+"_calls_total",
			"Calls that left a pipeline, by outcome (success, failure, rejected, canceled, deadline).", []string{"pipeline", "outcome"}, nil),
		attempts: prometheus.NewDesc(Namespace+"_attempts_total", "Attempts a pipeline's retry made, by outcome.", []string{"pipeline", "outcome"}, nil),
		duration: prometheus.NewDesc(Namespace+"_call_duration_seconds",
			"Time calls spent in a pipeline, retries and backoff included.", []string{"pipeline"}, nil),
		bounds:  append([]float64(nil), buckets...),
		stripes: stripesFor(runtime.GOMAXPROCS(0)),
		byName:  map[string]*pipelineSeries{},
	}
	for _, b := range buckets {
		c.limits = append(c.limits, durationLimit(b))
	}
	if native != 0 {
		c.native = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "call_duration_seconds",
			Help: "Time calls spent in a pipeline, retries and backoff included.", Buckets: buckets,
			NativeHistogramBucketFactor: native}, []string{"pipeline"})
	}
	return c, nil
}

// durationLimit returns the longest time.Duration whose Seconds() is at most bound.
// Then d ≤ durationLimit(b) exactly when d.Seconds() ≤ b, as client_golang places an
// observation in a bucket.
func durationLimit(bound float64) int64 {
	switch {
	case bound >= float64(math.MaxInt64)/1e9:
		return math.MaxInt64
	case bound < float64(math.MinInt64)/1e9:
		return math.MinInt64
	}
	n := int64(bound * 1e9)
	for n < math.MaxInt64 && time.Duration(n+1).Seconds() <= bound {
		n++
	}
	for n > math.MinInt64 && time.Duration(n).Seconds() > bound {
		n--
	}
	return n
}

// collectors returns what to register: the counters, and the duration histogram
// (client_golang's with native buckets). They are two collectors whatever the options.
// So a second Observer on a registry is refused alike
// (prometheus.AlreadyRegisteredError, for the counters).
func (c *callSeries) collectors() []prometheus.Collector {
	if c.native != nil {
		return []prometheus.Collector{callCounters{c}, c.native}
	}
	return []prometheus.Collector{callCounters{c}, callDurations{c}}
}

// snapshot returns the pipelines' series as they are now.
func (c *callSeries) snapshot() []*pipelineSeries {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*pipelineSeries(nil), c.pipelines...)
}

// callCounters collects backstop_calls_total and backstop_attempts_total.
type callCounters struct{ c *callSeries }

func (cc callCounters) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.c.calls
	ch <- cc.c.attempts
}

func (cc callCounters) Collect(ch chan<- prometheus.Metric) {
	for _, s := range cc.c.snapshot() {
		calls, attempts := s.counts()
		for i, o := range outcomes {
			ch <- prometheus.MustNewConstMetric(cc.c.calls, prometheus.CounterValue, float64(calls[i]), s.name, o)
			ch <- prometheus.MustNewConstMetric(cc.c.attempts, prometheus.CounterValue, float64(attempts[i]), s.name, o)
		}
	}
}

// callDurations collects backstop_call_duration_seconds.
type callDurations struct{ c *callSeries }

func (cd callDurations) Describe(ch chan<- *prometheus.Desc) { ch <- cd.c.duration }

func (cd callDurations) Collect(ch chan<- prometheus.Metric) {
	for _, s := range cd.c.snapshot() {
		perBucket, seconds := s.durations()
		buckets := make(map[float64]uint64, len(cd.c.bounds))
		var count uint64
		for i, b := range cd.c.bounds {
			count += perBucket[i]
			buckets[b] = count
		}
		count += perBucket[len(cd.c.bounds)]
		ch <- prometheus.MustNewConstHistogram(cd.c.duration, count, seconds, buckets, s.name)
	}
}

// pipeline returns the series of the pipeline named name, made the first time and
// exported from then on, at 0.
func (c *callSeries) pipeline(name string) *pipelineSeries {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.byName[name]; ok {
		return s
	}
	// A stripe holds the calls and attempts by outcome, the sum of durations and the
	// bucket counts, +Inf's included. The sum takes two words: it carries into the
	// second. A line of padding keeps one stripe's words off the next one's cache
	// lines.
	used := sumHi + 1 + len(c.limits) + 1
	stride := (used+7)/8*8 + 8
	s := &pipelineSeries{name: name, limits: c.limits, mask: uint32(c.stripes - 1), stride: stride,
		cells: make([]atomic.Uint64, c.stripes*stride)}
	if c.native != nil {
		s.native = c.native.WithLabelValues(name)
	}
	c.byName[name] = s
	c.pipelines = append(c.pipelines, s)
	return s
}

// Word offsets within a stripe.
const (
	callWords    = 0                            // calls by outcome index
	attemptWords = callWords + len(outcomes)    // attempts by outcome index
	sumLo        = attemptWords + len(outcomes) // nanoseconds, modulo 2⁶⁴
	sumHi        = sumLo + 1                    // carries out of sumLo
	bucketWords  = sumHi + 1                    // bucket counts, not cumulative; +Inf last
)

// pipelineSeries are one pipeline's counters, striped. Each event adds to the stripe
// of its goroutine (internal/stripe), so the cache lines a core writes mostly stay
// in its cache. A scrape sums the stripes.
type pipelineSeries struct {
	name   string
	limits []int64 // bucket upper bounds as durations
	mask   uint32  // stripes − 1
	stride int     // words per stripe
	cells  []atomic.Uint64
	native prometheus.Observer // client_golang's histogram child with NativeHistograms
}

// stripe returns the words of the calling goroutine's stripe.
func (s *pipelineSeries) stripe() []atomic.Uint64 {
	i := 0
	if s.mask != 0 {
		i = int(stripe.Index(s.mask)) * s.stride
	}
	return s.cells[i : i+s.stride : i+s.stride]
}

// call counts a call that ended with the outcome of index outcome after d.
func (s *pipelineSeries) call(outcome int, d time.Duration) {
	w := s.stripe()
	w[callWords+outcome].Add(1)
	if s.native != nil {
		s.native.Observe(d.Seconds())
		return
	}
	b := len(s.limits)
	for i, l := range s.limits {
		if int64(d) <= l {
			b = i
			break
		}
	}
	w[bucketWords+b].Add(1)
	ns := uint64(max(d, 0)) // a clock that steps back gives no negative time
	if w[sumLo].Add(ns) < ns {
		w[sumHi].Add(1)
	}
}

// attempt counts an attempt that ended with the outcome of index outcome.
func (s *pipelineSeries) attempt(outcome int) { s.stripe()[attemptWords+outcome].Add(1) }

// counts are a pipeline's calls and attempts by outcome, summed over its stripes.
func (s *pipelineSeries) counts() (calls, attempts [len(outcomes)]uint64) {
	for i := 0; i < len(s.cells); i += s.stride {
		w := s.cells[i : i+s.stride]
		for o := range outcomes {
			calls[o] += w[callWords+o].Load()
			attempts[o] += w[attemptWords+o].Load()
		}
	}
	return calls, attempts
}

// durations are a pipeline's bucket counts and the sum of its calls' durations in
// seconds, summed over its stripes. The counts are not cumulative, and +Inf's is last.
func (s *pipelineSeries) durations() (buckets []uint64, seconds float64) {
	buckets = make([]uint64, len(s.limits)+1)
	var lo, hi uint64
	for i := 0; i < len(s.cells); i += s.stride {
		w := s.cells[i : i+s.stride]
		for b := range buckets {
			buckets[b] += w[bucketWords+b].Load()
		}
		h := w[sumHi].Load()
		l := w[sumLo].Load()
		if w[sumHi].Load() != h { // a carry between the reads: read the pair again
			h, l = w[sumHi].Load(), w[sumLo].Load()
		}
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	return buckets, (float64(hi)*(1<<64) + float64(lo)) / 1e9
}
