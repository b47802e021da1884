package policyhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/httpattempt"
	"github.com/backstop-go/backstop/policy"
)

// HeaderIdempotencyKey is the header that makes a non-idempotent request safe to retry.
// The server must treat every request with the same key as one.
const HeaderIdempotencyKey = "Idempotency-Key"

// DefaultMaxDrain is how much of a discarded attempt's response body the transport
// reads before closing it, so that its connection can be reused. It is 2 KiB, what
// net/http's client reads of a redirect's body. A longer body is not read to its end:
// the body is closed, and its connection with it.
const DefaultMaxDrain = 2 << 10

// DefaultDrainTimeout bounds the time the transport spends draining a discarded
// attempt's response body. A body that has not ended within it is closed, and its
// connection with it, and the call moves on. Such a body may be a 503's that trickles
// in. A retry never waits on a failed attempt's body for longer than this.
const DefaultDrainTimeout = 50 * time.Millisecond

// Options configure [NewTransport]. The zero value is valid: DefaultClassifier, no
// idempotency keys, DefaultMaxDrain and DefaultDrainTimeout, the system clock, and
// callpath.MeshBackstopOwns: nothing beneath the transport retries.
type Options struct {
	// Classifier judges each attempt's response; nil means [DefaultClassifier].
	Classifier Classifier
	// IdempotencyKeys makes the transport give POST and PATCH requests without an
	// Idempotency-Key header a fresh key, the same on every attempt. They may then be
	// retried. Use it only with servers that honour the header.
	IdempotencyKeys bool
	// NewKey makes those keys; nil means 128 random bits in hex.
	NewKey func() string
	// MaxDrain is how many bytes of a discarded response body are read before it is
	// closed; 0 means DefaultMaxDrain, negative means none.
	MaxDrain int64
	// DrainTimeout is how long the transport may spend draining a discarded response
	// body before it closes it. 0 means DefaultDrainTimeout. Negative means no draining
	// at all: every discarded body is closed at once.
	DrainTimeout time.Duration
	// Clock stamps responses for Retry-After dates and times the draining of
	// discarded bodies; nil means clock.System().
	Clock clock.Clock

	// Mesh says who owns the retries beneath the transport, when a service mesh
	// stands there. The zero value is callpath.MeshBackstopOwns: attempts made under
	// a retry owner tell an Envoy beneath not to retry (x-envoy-max-retries: 0).
	// callpath.MeshEnvoyOwns lets the mesh retry: the pipeline makes one attempt.
	// callpath.MeshNone sends and reads no Envoy header. See "A mesh beneath" in
	// the package documentation.
	Mesh callpath.Mesh
	// MeshBudget is charged for the retries a mesh beneath made, read from each
	// response's x-envoy-attempt-count, so that one budget bounds every retry on
	// the path. When it refuses one, calls the mesh owns tell
	// the mesh not to retry until it allows one again. Nil means the pipeline's own
	// (policy.Pipeline.Budget) for NewTransport, and nothing for NewRouterTransport,
	// whose routes' budgets are given here or not at all.
	MeshBudget policy.RetryBudget
	// MeshObserver hears the attempts and retries a mesh beneath made: an
	// event.AttemptEnd failed with callpath.ErrMeshRetried and an
	// event.RetryScheduled of reason callpath.ReasonMesh per retry, of Stage "mesh",
	// named for the pipeline (a metrics.Observer counts them in
	// backstop_attempts_total and backstop_retries_total). Nil means the
	// pipeline's own (policy.Pipeline.Observer) for NewTransport, and none for
	// NewRouterTransport.
	MeshObserver event.Observer
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

type transport struct {
	next     http.RoundTripper
	p        *policy.Pipeline
	classify Classifier
	genKey   func() string
	maxDrain int64
	clock    clock.Clock
	router   Router            // chooses p and classify per request; nil means the fields above
	mesh     *httpattempt.Mesh // nil: MeshNone

	drainTimeout time.Duration
}

// NewTransport returns an http.RoundTripper that runs every request through p. Each
// attempt is one request sent with next (nil means http.DefaultTransport). It obeys the
// RoundTripper contract:
//   - It is safe for concurrent use.
//   - It never modifies the caller's request: each attempt sends a clone.
//   - When the pipeline gives up after a response, that response is returned with a
//     nil error, whatever its status; an error is returned only when no response is
//     to be had (a network failure, the caller's cancellation, a breaker open: check
//     with errors.Is(err, breaker.ErrOpen)).
//   - The request body is closed, even on errors. It is sent again on a retry only if
//     req.GetBody can rewind it; a request with a body and no GetBody gets one attempt.
//   - Every discarded attempt's response body is drained and closed. The drain is
//     bounded in bytes ([DefaultMaxDrain], see Options.MaxDrain), in time
//     ([DefaultDrainTimeout], see Options.DrainTimeout) and by the call's context: a body
//     that does not end within them is closed with its connection, and the call goes on.
//   - A 101 Switching Protocols response (a WebSocket or other upgrade) is final: it is
//     never retried, whatever the classifier says, and its Body is the connection, an
//     io.ReadWriteCloser when next returns one (net/http's transport does). The
//     pipeline's deadlines bound the handshake; the connection lives until the Body is
//     closed. A request asking for an upgrade is never hedged; a handshake refused
//     before any switch (a 503) is retried as any GET.
//   - A call reaches the server at most as many times as the pipeline makes
//     attempts: net/http's own resends on a new connection are refused (see the
//     package doc), and the attempt fails with [ErrResendRefused].
//
// Only idempotent requests are retried: GET, HEAD, OPTIONS, TRACE, PUT, DELETE, and any
// request carrying an Idempotency-Key header (see Options.IdempotencyKeys). Others get
// exactly one attempt. Responses are judged by [DefaultClassifier] unless
// Options.Classifier replaces it.
//
// Every request made under a retry owner carries [callpath.HeaderAttempt]. So servers
// downstream (see [Middleware]) fail fast rather than retry again. Its value is the
// attempt number of the retry in this process that owns the call path. It is 1 when the
// owner is in another process. This process then makes the request once, and the number
// it received is not forwarded, so the next server does not shed a first attempt as a
// retry. A request made under no owner carries no attempt header, even if the caller
// set one.
//
// The deadlines of p bound the reading of the returned body too. They are released when
// the body is closed, so close it.
func NewTransport(next http.RoundTripper, p *policy.Pipeline, o Options) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	t := &transport{next: next, p: p, classify: DefaultClassifier, maxDrain: DefaultMaxDrain,
		drainTimeout: DefaultDrainTimeout, clock: clock.Or(o.Clock)}
	if o.MeshBudget == nil {
		o.MeshBudget = p.Budget()
	}
	if o.MeshObserver == nil {
		o.MeshObserver = p.Observer()
	}
	t.mesh = httpattempt.NewMesh(o.Mesh, o.MeshBudget, o.MeshObserver, t.clock)
	if o.Classifier != nil {
		t.classify = o.Classifier
	}
	if o.IdempotencyKeys {
		t.genKey = o.NewKey
		if t.genKey == nil {
			t.genKey = randomKey
		}
	}
	if o.MaxDrain != 0 {
		t.maxDrain = max(o.MaxDrain, 0)
	}
	if o.DrainTimeout != 0 {
		t.drainTimeout = max(o.DrainTimeout, 0)
	}
	return t
}

// idempotent reports whether a request with method m may be repeated (RFC 9110 §9.2.2).
func idempotent(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	key := req.Header.Get(HeaderIdempotencyKey)
	if key == "" && t.genKey != nil && (req.Method == http.MethodPost || req.Method == http.MethodPatch) {
		key = t.genKey()
	}
	repeatable := (idempotent(req.Method) || key != "") && (!hasBody || req.GetBody != nil)

	// A server's shedder does not count a request while it waits on its dependency. The
	// dependency sheds for itself, and the pipeline's deadline and breaker bound the
	// wait.
	ctx, paused := callpath.PauseFor(req.Context())
	defer paused.Resume()
	ctx, rel := callpath.WithReleaser(ctx)
	if !repeatable || upgrading(req.Header) {
		ctx = callpath.WithoutRepeats(ctx) // never hedged
	}
	p, classify := t.p, t.classify
	if t.router != nil {
		p = nil
		if r := t.router.Match(req); r != nil {
			p = r.Pipeline
			if r.Classifier != nil {
				classify = r.Classifier
			}
		}
	}
	if p == nil {
		return nil, fmt.Errorf("policyhttp: %s %s: no route's pipeline runs it: %w", req.Method, req.URL.Redacted(), policy.ErrNoPipeline)
	}
	ctx, mc := t.mesh.Begin(ctx)
	a := &attempts{Context: ctx, t: t, req: req, key: key, repeatable: repeatable, classify: classify,
		pipeline: p.Name(), mesh: mc}
	defer t.mesh.End(a.mesh)
	var pctx context.Context = a
	if netReplayable(req, hasBody, key != "") {
		// net/http's Transport would send the request again by itself after a reused
		// connection fails. The guard refuses, so that the call reaches the server at
		// most as many times as the pipeline makes attempts.
		a.guarded = true
		var getBody func() (io.ReadCloser, error)
		if hasBody {
			getBody = req.GetBody
		}
		if traceKey != nil {
			a.guard.init(callerTrace(ctx), getBody)
		} else {
			a.guard.init(nil, getBody)
			pctx = httptrace.WithClientTrace(a, &a.guard.trace)
		}
	}
	err := p.Do(pctx, runAttempt)
	a.mu.Lock() // the pipeline has returned: every attempt has
	sent, res := a.sent, a.res
	a.mu.Unlock()
	if !sent && hasBody {
		req.Body.Close() // refused before any attempt: RoundTrip must close it anyway
	}
	if err == nil && res == nil {
		err = errors.New("policyhttp: the pipeline returned without running the request")
	}
	if err != nil && (res == nil || req.Context().Err() != nil) {
		if res != nil {
			t.discard(req.Context(), res)
		}
		rel.Release()
		return nil, err
	}
	if rw, ok := res.Body.(io.ReadWriteCloser); ok && res.StatusCode == http.StatusSwitchingProtocols {
		res.Body = &upgradedBody{releasingBody: releasingBody{ReadCloser: rw, rel: rel}, w: rw}
		return res, nil
	}
	// The body lives in the call's state, allocated once. A finished call's state is no
	// longer touched but for this.
	a.body = releasingBody{ReadCloser: res.Body, rel: rel}
	res.Body = &a.body
	return res, nil
}

// upgrading reports whether h asks the server to switch protocols (RFC 9110 §7.8). It
// looks for an Upgrade header, and "upgrade" among the Connection header's options.
func upgrading(h http.Header) bool {
	if h.Get("Upgrade") == "" {
		return false
	}
	for _, v := range h["Connection"] {
		for opt := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(opt), "upgrade") {
				return true
			}
		}
	}
	return false
}

// attempts is the state of one RoundTrip across its attempts. Under a hedge the
// attempts run concurrently: the first success is kept, and every other response is
// drained and closed.
//
// It is also the context the pipeline runs under. So an attempt finds it without a
// closure, and net/http finds the call's resend guard without another context.
type attempts struct {
	context.Context // the call's

	t          *transport
	req        *http.Request
	key        string
	repeatable bool
	classify   Classifier
	pipeline   string           // p's name, for the mesh's events
	mesh       httpattempt.Call // the call's dealings with a mesh beneath

	mu   sync.Mutex     // guards the fields below
	sent bool           // the first attempt went out (it owns req.Body)
	res  *http.Response // the response to return: the winner's, or the last one's
	won  bool           // res succeeded: later responses are losers'

	body releasingBody // the returned response's Body, set after the pipeline returned

	guarded bool        // net/http could resend the request: guard watches it
	guard   resendGuard // the guard of attempts that run one after another
}

// attemptsKey finds the call's attempts in the context of an attempt.
type attemptsKey struct{}

func (a *attempts) Value(key any) any {
	switch {
	case key == any(attemptsKey{}):
		return a
	case !a.guarded:
	case key == any(guardKey{}):
		return &a.guard
	case key == traceKey && traceKey != nil:
		return &a.guard.trace
	}
	return a.Context.Value(key)
}

// AfterFunc runs f once a is done: once its parent is.
func (a *attempts) AfterFunc(f func()) (stop func() bool) { return afterFunc(a.Context, f) }

func (a *attempts) String() string { return contextName(a.Context) + ".WithPolicyHTTPCall" }

// runAttempt is the function the pipeline runs for each attempt: a's run, found in ctx.
// A method value would be an allocation per call.
func runAttempt(ctx context.Context) error {
	a, ok := ctx.Value(attemptsKey{}).(*attempts)
	if !ok {
		return fault.Permanent(errors.New("policyhttp: the pipeline ran an attempt outside the call's context"))
	}
	return a.run(ctx)
}

func (a *attempts) run(ctx context.Context) error {
	a.mu.Lock()
	prev, first := a.res, !a.sent
	if !a.won {
		a.res = nil // a retry or a hedge: the previous failure's response is discarded
	} else {
		prev = nil
	}
	a.sent = true
	a.mu.Unlock()
	if prev != nil {
		a.t.discard(ctx, prev)
	}
	g, octx := a.guardFor(ctx)
	out := a.req.Clone(octx)
	if !first && out.Body != nil && out.Body != http.NoBody {
		if a.req.GetBody == nil {
			return fault.Permanent(errors.New("policyhttp: request body cannot be rewound (no GetBody)"))
		}
		body, err := a.req.GetBody()
		if err != nil {
			return fault.Permanent(err)
		}
		out.Body = body
	}
	// The attempt header speaks for this process. It holds the number of a retry here
	// that owns the call path, or 1 under an owner in another process. In that case
	// this request is the one attempt this process makes, and the header carries the
	// ownership on. A header the caller copied from elsewhere is not forwarded.
	if n, ok := callpath.Outgoing(ctx); ok {
		if out.Header == nil {
			out.Header = make(http.Header, 1)
		}
		out.Header[callpath.HeaderAttempt] = attemptValue(n)
	} else {
		out.Header.Del(callpath.HeaderAttempt)
	}
	// Beneath a Backstop owner, an Envoy sidecar is told not to retry. Any other
	// server ignores the header.
	if a.t.mesh.NoRetries(ctx, a.mesh) {
		out.Header[callpath.HeaderEnvoyMaxRetries] = noRetries
	}
	if a.key != "" {
		out.Header.Set(HeaderIdempotencyKey, a.key)
	}
	if g != nil {
		g.begin(out)
	}
	res, err := a.t.next.RoundTrip(out)
	if g != nil && g.end() && err != nil {
		err = fault.Retryable(ErrResendRefused)
	}
	if err != nil {
		if !a.repeatable {
			return fault.Permanent(err)
		}
		return err
	}
	err = a.classify(res, a.t.clock.Now())
	if a.t.mesh != nil {
		if v := res.Header[callpath.HeaderEnvoyAttempt]; len(v) > 0 {
			if n, ok := httpattempt.MeshAttempts(v[0]); ok {
				a.t.mesh.Count(ctx, a.mesh, a.pipeline, n, err)
			}
		}
	}
	// Under a hedge, a success is kept only by the attempt that wins the race. The
	// winner's context is the one left alive for reading the body.
	win := err == nil && callpath.Win(ctx)
	a.mu.Lock()
	lost := a.won || (err == nil && !win)
	if !lost {
		prev, a.res = a.res, res
		a.won = win
	}
	a.mu.Unlock()
	if lost {
		prev = res // another attempt succeeded first: this response is a loser's
	}
	if prev != nil {
		a.t.discard(ctx, prev)
	}
	// A switched connection speaks another protocol now. The call cannot be made again
	// on it, and a new handshake would open a second connection.
	if err != nil && (!a.repeatable || res.StatusCode == http.StatusSwitchingProtocols) {
		return fault.Permanent(err)
	}
	return err
}

// guardFor returns the resend guard of an attempt run under ctx, nil if the request
// needs none, and the context its request goes out under. Attempts that run one after
// another share the call's guard. An attempt in a race (a hedge's) has one of its own.
func (a *attempts) guardFor(ctx context.Context) (*resendGuard, context.Context) {
	if !a.guarded {
		return nil, ctx
	}
	if !callpath.InRace(ctx) {
		return &a.guard, ctx
	}
	r := &racedAttempt{Context: ctx}
	if traceKey == nil {
		r.init(nil, a.guard.getBody)
		return &r.resendGuard, httptrace.WithClientTrace(r, &r.trace)
	}
	r.init(a.guard.user, a.guard.getBody)
	return &r.resendGuard, r
}

// attemptValues[n] is the callpath.HeaderAttempt value for attempt n. It is shared by
// every request, so that an attempt allocates no header value. Each has room for its
// one element only: a header Add to it copies, and never writes into the shared array.
var attemptValues = func() (v [callpath.MaxAttempt + 1][]string) {
	for n := range v {
		v[n] = []string{strconv.Itoa(n)} // length and capacity 1
	}
	return v
}()

// noRetries is the callpath.HeaderEnvoyMaxRetries value of every attempt that tells
// the mesh not to retry, shared as attemptValues are.
var noRetries = []string{"0"}

func attemptValue(n int) []string {
	if n >= 0 && n < len(attemptValues) {
		return attemptValues[n]
	}
	return []string{strconv.Itoa(n)}
}

// discard drains and closes a response body nobody will read. The drain lets the
// connection be reused. It stops at t.maxDrain bytes, at t.drainTimeout, or when ctx is
// done, whichever comes first. The body is then closed with its connection. A switched
// connection is never drained: it would wait for the other side to speak.
func (t *transport) discard(ctx context.Context, res *http.Response) {
	if t.maxDrain <= 0 || t.drainTimeout <= 0 || ctx.Err() != nil || res.StatusCode == http.StatusSwitchingProtocols {
		res.Body.Close()
		return
	}
	var once sync.Once
	closeBody := func() { once.Do(func() { res.Body.Close() }) }
	timer := t.clock.NewTimer(t.drainTimeout)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-timer.C():
		case <-ctx.Done():
		case <-stop:
			return
		}
		closeBody() // unblocks the drain's Read: a closed body ends its connection
	}()
	_, _ = io.CopyN(io.Discard, res.Body, t.maxDrain)
	close(stop)
	timer.Stop()
	<-stopped
	closeBody()
}

// releasingBody releases the pipeline's deadlines when the body is closed. It does so
// the first time only: a Releaser releases once.
type releasingBody struct {
	io.ReadCloser
	rel *callpath.Releaser
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.rel.Release()
	return err
}

// upgradedBody is the Body of a 101 Switching Protocols response: the connection,
// readable and writable, whose Close releases the pipeline's deadlines.
type upgradedBody struct {
	releasingBody
	w io.Writer
}

func (b *upgradedBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// CloseWrite shuts down the writing side of the connection, as the Body of net/http's
// own 101 responses does, when the connection supports it.
func (b *upgradedBody) CloseWrite() error {
	if cw, ok := b.w.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("policyhttp: CloseWrite: %w", http.ErrNotSupported)
}

// Middleware marks the context of a request that carries an attempt header as owned
// upstream. The headers are [callpath.HeaderAttempt], Envoy's x-envoy-attempt-count and
// gRPC's grpc-previous-rpc-attempts. A retry in the caller's process owns this call
// path. So the retrying pipelines the handler runs for its own outbound calls make one
// attempt each, instead of multiplying the caller's retries. Values that do not parse
// are ignored.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := AttemptOf(r); ok {
			r = r.WithContext(callpath.WithUpstreamAttempt(r.Context(), n))
		}
		next.ServeHTTP(w, r)
	})
}

// AttemptOf reads a request's attempt headers with [callpath.ParseAttempt].
func AttemptOf(r *http.Request) (int, bool) { return httpattempt.FromHeader(r.Header) }
