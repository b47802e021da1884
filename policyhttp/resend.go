package policyhttp

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
)

// ErrResendRefused is the error of an attempt whose connection, reused from the pool,
// failed before any response. net/http would have sent the request again on another
// connection, unseen by the pipeline, and the transport refused. The request may have
// reached the server. The transport marks it retryable. The pipeline's retry, which
// owns the call, decides whether it goes out again, and counts it when it does.
var ErrResendRefused = errors.New("policyhttp: connection lost before any response; net/http's resend refused")

// netReplayable reports whether net/http's Transport may send a request by itself again
// after a reused connection fails with the request written. It decides as
// Request.isReplayable does. The method must be GET, HEAD, OPTIONS or TRACE, or the
// request must carry an Idempotency-Key (or X-Idempotency-Key) header. Its body must be
// absent or rewindable with GetBody. The result keyed says the request goes out with an
// Idempotency-Key.
func netReplayable(req *http.Request, hasBody, keyed bool) bool {
	if hasBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, xkey := req.Header["X-Idempotency-Key"]
	return keyed || xkey
}

// traceKey is the key under which package httptrace keeps a ClientTrace in a context.
// It is unexported. It is learnt once, by asking httptrace to look one up in a context
// that records the key it is asked for. The transport's contexts then carry their trace
// without an allocation of context.WithValue. A nil traceKey (a httptrace that looked
// up no key) makes them fall back to httptrace.WithClientTrace.
var traceKey = func() any {
	k := &keyRecorder{Context: context.Background()}
	httptrace.ContextClientTrace(k)
	return k.key
}()

type keyRecorder struct {
	context.Context
	key any
}

func (k *keyRecorder) Value(key any) any {
	k.key = key
	return nil
}

// guardKey finds the resendGuard of the nearest policyhttp transport above. So a
// transport stacked beneath another composes with the caller's trace, not with the
// other transport's guard.
type guardKey struct{}

// afterFuncer is the method package context looks for on a parent it cannot see into.
type afterFuncer interface {
	AfterFunc(func()) (stop func() bool)
}

// afterFunc arranges for f to run once parent is done. It uses parent's own AfterFunc
// if it has one, as the contexts of package callpath do.
func afterFunc(parent context.Context, f func()) (stop func() bool) {
	if a, ok := parent.(afterFuncer); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(parent, f)
}

// resendGuard watches the attempts of one call through httptrace and refuses the
// resends net/http's Transport would make beneath the pipeline:
//   - A request with a body is resent only after net/http rewinds it with GetBody. The
//     guard's rewind refuses once a connection speaking HTTP/1 was taken for the attempt.
//   - A request without a body is resent as it is. The guard sees a second connection
//     taken for one attempt and spoils the request before net/http writes it: a body one
//     byte short of its ContentLength. net/http buffers the headers until the body is
//     written, fails the write with nothing sent, and does not try again.
//
// HTTP/2 resends only streams the server refused or never processed; they stay. Say a
// RoundTripper beneath takes another connection for the same request after a reused
// one. That is taken for net/http resending it.
type resendGuard struct {
	trace    httptrace.ClientTrace // GotConn is gotConn; the other hooks are the caller's
	userConn func(httptrace.GotConnInfo)
	user     *httptrace.ClientTrace        // the caller's own trace, nil if none
	getBody  func() (io.ReadCloser, error) // the caller's
	rewindFn func() (io.ReadCloser, error) // rewind, bound once

	mu      sync.Mutex    // guards the fields below
	out     *http.Request // the attempt's request while it is sent; nil between attempts
	conn    net.Conn      // the connection net/http took last for it
	reused  bool          // conn came from the pool
	refused bool          // a resend of out was refused
}

// init makes g watch the requests it is given. user is the caller's trace (nil if
// none), and getBody the caller's rewind (nil for a request without a body).
func (g *resendGuard) init(user *httptrace.ClientTrace, getBody func() (io.ReadCloser, error)) {
	if user != nil {
		g.trace = *user
		g.userConn = user.GotConn
		g.user = user
	}
	g.trace.GotConn = g.gotConn
	if getBody != nil {
		g.getBody, g.rewindFn = getBody, g.rewind
	}
}

// begin starts watching out, the request of one attempt.
func (g *resendGuard) begin(out *http.Request) {
	if g.rewindFn != nil {
		out.GetBody = g.rewindFn
	}
	g.mu.Lock()
	g.out, g.conn, g.reused, g.refused = out, nil, false, false
	g.mu.Unlock()
}

// end stops watching and reports whether a resend was refused.
func (g *resendGuard) end() (refused bool) {
	g.mu.Lock()
	refused = g.refused
	g.out, g.conn = nil, nil
	g.mu.Unlock()
	return refused
}

func (g *resendGuard) gotConn(info httptrace.GotConnInfo) {
	g.mu.Lock()
	if g.out != nil {
		// Another connection for one request after a reused one: net/http is sending it
		// again. It never does after a new connection fails. A request with a body is
		// refused by rewind before this.
		if g.conn != nil && g.reused && g.getBody == nil && !speaksHTTP2(g.conn) && !speaksHTTP2(info.Conn) {
			spoil(g.out)
			g.refused = true
		}
		g.conn, g.reused = info.Conn, info.Reused
	}
	g.mu.Unlock()
	if g.userConn != nil {
		g.userConn(info)
	}
}

// rewind is the GetBody of an attempt's request. net/http calls it to send the request
// again after a failure. Over HTTP/1 that is refused.
func (g *resendGuard) rewind() (io.ReadCloser, error) {
	g.mu.Lock()
	resend := g.out != nil && g.conn != nil && !speaksHTTP2(g.conn)
	if resend {
		g.refused = true
	}
	g.mu.Unlock()
	if resend {
		return nil, ErrResendRefused
	}
	return g.getBody()
}

// spoil makes out fail before a byte of it is sent. Here out is a request without a
// body that net/http is about to write again. net/http's previous write of it has
// ended, since it waits for its write loop before deciding to resend. The next write
// begins after the GotConn hook returns.
func spoil(out *http.Request) {
	// A strings.Reader is one net/http keeps in memory. It holds the headers in its
	// buffer until the body is written, rather than flushing them first.
	out.Body = io.NopCloser(strings.NewReader(""))
	out.GetBody = nil
	out.ContentLength = 1
	out.TransferEncoding = nil
	out.Header.Del("Expect") // waiting for 100-continue would flush the headers
}

// speaksHTTP2 reports whether c negotiated HTTP/2 with TLS ALPN.
func speaksHTTP2(c net.Conn) bool {
	tc, ok := c.(interface{ ConnectionState() tls.ConnectionState })
	return ok && tc.ConnectionState().NegotiatedProtocol == "h2"
}

// callerTrace returns the trace of ctx that is the caller's own. A trace of a
// policyhttp transport above is passed over for the caller's trace it composed.
func callerTrace(ctx context.Context) *httptrace.ClientTrace {
	t := httptrace.ContextClientTrace(ctx)
	if g, ok := ctx.Value(guardKey{}).(*resendGuard); ok && t == &g.trace {
		return g.user
	}
	return t
}

// racedAttempt is the context of an attempt that runs beside others of its call (a
// hedge's). It carries a guard of its own.
type racedAttempt struct {
	context.Context
	resendGuard
}

func (r *racedAttempt) Value(key any) any {
	switch {
	case key == any(guardKey{}):
		return &r.resendGuard
	case key == traceKey && traceKey != nil:
		return &r.trace
	}
	return r.Context.Value(key)
}

// AfterFunc runs f once r is done: once its parent is.
func (r *racedAttempt) AfterFunc(f func()) (stop func() bool) { return afterFunc(r.Context, f) }

func (r *racedAttempt) String() string { return contextName(r.Context) + ".WithResendGuard" }

func contextName(c context.Context) string {
	if s, ok := c.(interface{ String() string }); ok {
		return s.String()
	}
	return "context"
}
