package shed

import (
	"bufio"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/backstop-go/backstop/callpath"
)

var (
	problemJSON = []string{"application/problem+json"}
	noStore     = []string{"no-store"}
	// retryAfterValues[n] is the header value for n seconds, shared by every response
	// so that a rejection allocates no header value.
	retryAfterValues = func() [][]string {
		v := make([][]string, 2*int(DefaultMaxRetryAfter/time.Second)+2)
		for i := range v {
			v[i] = []string{strconv.Itoa(i)}
		}
		return v
	}()
)

// millisStep and maxBriefMillis bound what a refusal for want of a slot tells Backstop
// callers in callpath.HeaderRetryAfterMillis. The value is the baseline latency doubled
// times the Retry-After base, in steps of millisStep within [millisStep,
// maxBriefMillis]. The package doc says why, under "Retry-After for Backstop callers".
const (
	millisStep     = 10
	maxBriefMillis = 1000
)

// millisValues[i] is the header value for i × millisStep milliseconds.
var millisValues = func() (v [maxBriefMillis/millisStep + 1][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i * millisStep)}
	}
	return v
}()

// briefMillis returns the milliseconds to send in callpath.HeaderRetryAfterMillis with
// a refusal for reason r. The Retry-After was drawn from the pressure's base, base. It
// returns 0 for none: only a refusal for want of a slot gets a value.
func (s *Shedder) briefMillis(r Reason, base int64) int {
	switch r {
	case ReasonLimit, ReasonPriority, ReasonQueueFull, ReasonQueue:
	default:
		return 0
	}
	est := s.opts.Queue.Interval
	if s.adaptive != nil {
		if b := s.adaptive.baseline(); b > 0 {
			est = 2 * b
		}
	}
	ms := min(max(int(est*time.Duration(base)/time.Millisecond), millisStep), maxBriefMillis)
	return ms - ms%millisStep
}

// reasonValues[r] is the HeaderRefused value for reason r.
var reasonValues = func() (v [numReasons][]string) {
	for r := range numReasons {
		v[r] = []string{Reason(r).String()}
	}
	return v
}()

func retryAfterValue(secs int) []string {
	if secs < len(retryAfterValues) {
		return retryAfterValues[secs]
	}
	return []string{strconv.Itoa(secs)}
}

// Middleware admits requests to next through s and answers the rest at once. It never
// reads a refused request's body. A refusal carries:
//
//   - status 429, or Options.Refusal.Status 503 (503 for an open Options.Breaker);
//   - a Retry-After in whole seconds;
//   - callpath.HeaderRefused with the reason;
//   - for an open breaker, callpath.HeaderRetryAfterMillis with its remaining open
//     time;
//   - a small application/problem+json body.
//
// Every request is either served or answered.
//
// Like policyhttp.Middleware, it reads the attempt headers of Backstop, Envoy and gRPC.
// A retry (attempt above 1) is sheddable. The handler's context is marked as owned
// upstream, so its own retrying pipelines fail fast.
//
// Once half the limit is in use, the handler's context also carries the request's
// callpath.Pauser (Permit.Pauser). So does every request from a retry owner upstream.
// While a retry in the handler waits out its backoff, the request holds no slot. Nor
// does it while a call through policyhttp's transport waits on a dependency. Nor does
// it while the handler waits on a read of the request's body, so clients that trickle
// their uploads cannot fill the limit. Bound how long a body may take with the server's
// ReadTimeout, or a per-request http.ResponseController.SetReadDeadline. The shedder
// bounds this server's work; the server bounds its connections.
func Middleware(next http.Handler, s *Shedder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, attempt, hasAttempt := s.requestPriority(r)
		if b := s.opts.Breaker; b != nil {
			// Lock-free: the breaker keeps its open time in an atomic. It reads
			// gobreaker's clock, time.Now, so it is asked in its own time.
			if ra, open := b.OpenNow(); open {
				// The breaker's own open time is the Retry-After. It is not the
				// shedder's pressure, and does not raise the Retry-After of its
				// refusals.
				secs := max(1, int(math.Ceil(ra.Seconds())))
				s.reject(ReasonBreaker)
				s.report(r.Context(), "", ReasonBreaker, p, secs)
				// The breaker probes sooner than whole seconds say. A Backstop caller
				// waits the real time and one request's more (the baseline latency). So
				// it comes back when the probe has answered, not while it is in flight.
				if s.adaptive != nil {
					ra += s.adaptive.baseline()
				}
				w.Header()[callpath.HeaderRetryAfterMillis] = []string{strconv.FormatInt(max(ra.Milliseconds(), 1), 10)}
				s.write(w, ReasonBreaker, secs)
				return
			}
		}
		if s.quota != nil {
			if key, exempt, refuse := s.quota.key(r); !exempt {
				d, ok := time.Duration(0), !refuse
				if ok {
					d, ok = s.quota.allow(r.Context(), key, s.clock.Now())
				}
				if !ok {
					secs := max(1, int(math.Ceil(d.Seconds())))
					s.reject(ReasonQuota)
					s.report(r.Context(), "", ReasonQuota, p, secs)
					s.write(w, ReasonQuota, secs)
					return
				}
			}
		}
		permit, why, ra := s.tryAdmit(r.Context(), p)
		if why != ReasonNone {
			s.report(r.Context(), "", why, p, ra.secs)
			if ms := s.briefMillis(why, ra.base); ms > 0 {
				w.Header()[callpath.HeaderRetryAfterMillis] = millisValues[ms/millisStep]
			}
			s.write(w, why, ra.secs)
			return
		}
		// The request's Pauser rides in the handler's context, so that a retry's
		// backoff or a call to a dependency gives the slot back. A new context costs a
		// copy of the request. So it is made only for a request from a retry owner
		// upstream (whose context is made anyway), and when half the limit is in use.
		// On a server with room a held slot costs nothing.
		switch {
		case hasAttempt: // both values in one context
			r = r.WithContext(callpath.WithUpstreamPauser(r.Context(), attempt, permit.Pauser()))
		case 2*permit.inflight >= s.limit.Load():
			r = r.WithContext(callpath.WithPauser(r.Context(), permit.Pauser()))
		}
		if r.Body != nil && r.Body != http.NoBody {
			// While the handler waits for the client's body, the request holds no slot.
			// So a client trickling its upload (a slowloris) cannot fill the limit.
			// Replacing the body is how http.MaxBytesReader is used, too.
			r.Body = &pausingBody{ReadCloser: r.Body, p: permit.Pauser()}
		}
		if !permit.timed {
			defer permit.Release() // its latency is not taken: its status does not matter
			next.ServeHTTP(w, r)
			return
		}
		// A timed request's latency counts only if it succeeded (see Permit.ReleaseFailed).
		sw := &statusWriter{ResponseWriter: w}
		ok := false
		defer func() { permit.release(ok) }()
		next.ServeHTTP(sw, r)
		ok = sw.status < 500
	})
}

// pausingBody is a request body whose reads pause the request's slot (Permit.Pauser):
// a read waits on the client, not on this server.
type pausingBody struct {
	io.ReadCloser
	p callpath.Pauser
}

func (b *pausingBody) Read(p []byte) (int, error) {
	b.p.Pause()
	defer b.p.Resume()
	return b.ReadCloser.Read(p)
}

// statusWriter keeps the status a handler answered with. It passes on Flush, Hijack
// and Unwrap (for http.ResponseController), so a handler sees the writer it would
// without the shedder.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until written; a hijacked connection counts as 200
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.status = http.StatusOK
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// write answers a rejected request.
func (s *Shedder) write(w http.ResponseWriter, r Reason, retryAfter int) {
	h := w.Header()
	h["Retry-After"] = retryAfterValue(retryAfter)
	h["Content-Type"] = problemJSON
	h["Cache-Control"] = noStore
	h[callpath.HeaderRefused] = reasonValues[r]
	w.WriteHeader(s.statusFor(r))
	_, _ = w.Write(s.bodies[r])
}
