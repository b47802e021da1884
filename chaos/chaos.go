package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/policy"
)

// ErrInvalidOptions is matched by New's errors for bad Options.
var ErrInvalidOptions = errors.New("chaos: invalid options")

// Options say which faults to inject and how often. At least one fault must be
// set.
type Options struct {
	// Probability is the share of calls affected, in (0, 1]. Required.
	Probability float64

	// Latency delays an affected call by Latency, plus a uniform random share of
	// LatencyJitter. It waits on Clock, and gives up when the call's context ends.
	Latency, LatencyJitter time.Duration

	// Err ends an affected call with this error instead of running it (policy
	// form). The middleware answers 500 for it unless Status is set. Mark it with
	// fault.Retryable to have a retry retry it.
	Err error

	// Status answers an affected request with this HTTP status, without calling
	// the handler (middleware form). If RetryAfter > 0, it sends a Retry-After of
	// RetryAfter in whole seconds.
	Status     int
	RetryAfter time.Duration

	// Reset closes an affected request's connection without an answer (middleware
	// form). The client sees a reset or an unexpected EOF.
	Reset bool

	// SlowBody delays every write of the handler's response body by this much
	// (middleware form).
	SlowBody time.Duration
	// TruncateBody cuts the handler's response body after this many bytes, and
	// aborts the response (middleware form). The client reads an unexpected EOF. 0
	// means no cut. Negative cuts before the first byte.
	TruncateBody int

	// Clock times latencies and slow bodies; nil means clock.System().
	Clock clock.Clock
	// Rand draws which calls are affected, and the latency jitter. Nil means
	// jitter.System().
	Rand jitter.Rand
}

// Injector injects the faults of its Options into calls and requests.
//
// An Injector is safe for concurrent use. It starts enabled. Build it with [New].
type Injector struct {
	o        Options
	clock    clock.Clock
	rand     jitter.Rand
	on       atomic.Bool
	injected atomic.Uint64
}

// New returns an enabled Injector. Or it returns an error matching
// ErrInvalidOptions that names the bad field.
func New(o Options) (*Injector, error) {
	bad := check.Invalid[*Injector](ErrInvalidOptions)
	switch {
	case !(o.Probability > 0 && o.Probability <= 1):
		return bad("Probability is %v; want a share in (0, 1]", o.Probability)
	case o.Latency < 0:
		return bad("Latency is %v; want ≥ 0", o.Latency)
	case o.LatencyJitter < 0:
		return bad("LatencyJitter is %v; want ≥ 0", o.LatencyJitter)
	case o.Status != 0 && (o.Status < 100 || o.Status > 599):
		return bad("Status is %d; want an HTTP status in [100, 599]", o.Status)
	case o.RetryAfter < 0:
		return bad("RetryAfter is %v; want ≥ 0", o.RetryAfter)
	case o.RetryAfter > 0 && o.Status == 0:
		return bad("RetryAfter is %v without a Status; want a Status to send it with", o.RetryAfter)
	case o.SlowBody < 0:
		return bad("SlowBody is %v; want ≥ 0", o.SlowBody)
	case o.Latency == 0 && o.LatencyJitter == 0 && o.Err == nil && o.Status == 0 && !o.Reset && o.SlowBody == 0 && o.TruncateBody == 0:
		return bad("no fault is set; want Latency, Err, Status, Reset, SlowBody or TruncateBody")
	}
	i := &Injector{o: o, clock: clock.Or(o.Clock), rand: jitter.Or(o.Rand)}
	i.on.Store(true)
	return i, nil
}

// Enable turns the injector on or off. It may be called at any time, from any
// goroutine.
func (i *Injector) Enable(on bool) { i.on.Store(on) }

// Enabled reports whether the injector is on.
func (i *Injector) Enabled() bool { return i.on.Load() }

// Injected returns how many calls and requests it has affected.
func (i *Injector) Injected() uint64 { return i.injected.Load() }

// hit reports whether this call is affected, counting it if so.
func (i *Injector) hit() bool {
	if !i.on.Load() || i.rand.Float64() >= i.o.Probability {
		return false
	}
	i.injected.Add(1)
	return true
}

// delay waits the latency of an affected call. It returns false if ctx ended
// first.
func (i *Injector) delay(ctx context.Context) bool {
	d := i.o.Latency
	if i.o.LatencyJitter > 0 {
		d += time.Duration(i.rand.Float64() * float64(i.o.LatencyJitter))
	}
	return i.sleep(ctx, d)
}

func (i *Injector) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := i.clock.NewTimer(d)
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// Placement is a free one: an injector may stand anywhere in a pipeline.
func (i *Injector) Placement() policy.Placement { return policy.Placement{Kind: "chaos", Free: true} }

// Bind returns the Runner that injects latency and Err into calls.
func (i *Injector) Bind(next policy.Runner, _ policy.Env) policy.Runner {
	return &runner{i: i, next: next}
}

type runner struct {
	i    *Injector
	next policy.Runner
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	if !r.i.hit() {
		return r.next.Run(ctx, fn)
	}
	if !r.i.delay(ctx) {
		return ctx.Err()
	}
	if r.i.o.Err != nil {
		return r.i.o.Err
	}
	return r.next.Run(ctx, fn)
}

// ExplainStage implements policy.StageExplainer.
func (i *Injector) ExplainStage() policy.Stage {
	return policy.Stage{Summary: fmt.Sprintf("chaos: injects faults into %v%% of calls (enabled: %v)", i.o.Probability*100, i.Enabled())}
}

// Middleware returns next with faults injected into the requests it serves. It
// injects latency first. Then it injects a reset connection, a status (with
// Retry-After) or Err as 500. Or it injects a slow or truncated body from next.
func (i *Injector) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !i.hit() {
			next.ServeHTTP(w, r)
			return
		}
		if !i.delay(r.Context()) {
			return
		}
		switch {
		case i.o.Reset:
			reset(w)
			return
		case i.o.Status != 0:
			if i.o.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((i.o.RetryAfter+time.Second-1)/time.Second)))
			}
			w.WriteHeader(i.o.Status)
			return
		case i.o.Err != nil:
			http.Error(w, "chaos: "+i.o.Err.Error(), http.StatusInternalServerError)
			return
		}
		if i.o.SlowBody > 0 || i.o.TruncateBody != 0 {
			sw := &slowWriter{ResponseWriter: w, i: i, ctx: r.Context(), left: i.o.TruncateBody}
			next.ServeHTTP(sw, r)
			if sw.cut {
				panic(http.ErrAbortHandler) // the client sees the body end early
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// reset closes the request's connection without an answer.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: the stream is reset instead
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST, not FIN
	}
	_ = conn.Close()
}

// slowWriter delays and cuts a response body.
type slowWriter struct {
	http.ResponseWriter
	i    *Injector
	ctx  context.Context
	left int // bytes before the cut; ≤ 0 with cut on means cut now
	cut  bool
}

func (w *slowWriter) Write(b []byte) (int, error) {
	if w.cut {
		return 0, http.ErrAbortHandler
	}
	if w.i.o.SlowBody > 0 && !w.i.sleep(w.ctx, w.i.o.SlowBody) {
		return 0, w.ctx.Err()
	}
	if w.i.o.TruncateBody != 0 {
		if w.left <= 0 {
			w.cut = true
			return 0, http.ErrAbortHandler
		}
		if len(b) >= w.left {
			n, err := w.ResponseWriter.Write(b[:w.left])
			_ = http.NewResponseController(w.ResponseWriter).Flush()
			w.left, w.cut = 0, true
			if err == nil {
				err = http.ErrAbortHandler
			}
			return n, err
		}
		w.left -= len(b)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *slowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
