package connectpolicy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/backstop-go/backstop/clock"

	"connectrpc.com/connect"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// DefaultRetryableCode is the code retried when Options.RetryableCodes is nil:
// unavailable, the one code a server that sheds, restarts or drains answers, and the
// one policygrpc retries by default.
const DefaultRetryableCode = connect.CodeUnavailable

// Headers the interceptors send and read, as connect-go carries them: HTTP headers
// for the Connect protocol, metadata for gRPC and gRPC-Web.
const (
	// HeaderPushback is gRPC's pushback (gRFC A6), in milliseconds: a delay to wait
	// exactly before a retry, or — negative or malformed — do not retry.
	HeaderPushback = "Grpc-Retry-Pushback-Ms"
	// HeaderRetryAfter is HTTP's Retry-After, in whole seconds or as an HTTP date.
	HeaderRetryAfter = "Retry-After"
)

// ErrHedged is the error of an attempt a hedge makes: one connect request cannot be
// sent twice at once. Use a pipeline whose retry is retry.New.
var ErrHedged = errors.New("connectpolicy: a connect call cannot be hedged; use retry.New, not retry.NewHedge")

// Options configure [NewInterceptor]. The zero value is valid: retry unavailable only.
type Options struct {
	// RetryableCodes are the codes an attempt may be retried on; nil means
	// {DefaultRetryableCode}. Whatever it holds, a call is never retried once the
	// caller's context is done, nor after a refusal by a policy (an open breaker, an
	// exhausted budget, the owner rule), nor after a pushback that says stop.
	RetryableCodes []connect.Code
	// Clock reads the time a Retry-After HTTP date is measured from; nil means
	// clock.System().
	Clock clock.Clock
}

// interceptor is the connect.Interceptor of [NewInterceptor].
type interceptor struct {
	p     *policy.Pipeline // nil: carry and read the ownership only
	c     *classifier
	clock clock.Clock
}

// NewInterceptor returns a connect.Interceptor for clients and handlers alike.
//
// On a client (connect.WithInterceptors on the client) it runs every unary call
// through p: each attempt is one call, its error judged by [Classify] with o's codes,
// and every attempt made under a retry owner carries the owner's attempt number
// (callpath.HeaderAttempt, and Grpc-Previous-Rpc-Attempts for a retry, which grpc-go
// servers read); a call made under no owner carries neither, even if the caller copied
// them from an incoming request. Streams carry the same headers and are not retried:
// their messages are the caller's. The error of a failed call is a *connect.Error —
// the last attempt's, or unavailable for a refusal by a policy (errors.Is finds
// breaker.ErrOpen, retry's causes through it), canceled or deadline_exceeded when the
// caller's context ended the call.
//
// On a handler (connect.WithInterceptors on the handler) it reads the attempt headers
// of Backstop, gRPC and Envoy with callpath.ParseAttempt and marks the context of a
// call that carries one as owned upstream: the handler's own retrying pipelines, and
// connect clients it calls with this interceptor, make one attempt each.
//
// p may be nil: the interceptor then only carries and reads the ownership. An
// error names a bad Options field. The interceptor is safe for concurrent use; one
// may serve every client and handler of a process, its pipeline's state (a breaker,
// a budget) then shared by their calls.
func NewInterceptor(p *policy.Pipeline, o Options) (connect.Interceptor, error) {
	c, err := newClassifier(o)
	if err != nil {
		return nil, err
	}
	return &interceptor{p: p, c: c, clock: clock.Or(o.Clock)}, nil
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !req.Spec().IsClient {
			ctx, _ = owned(ctx, req.Header())
			return next(ctx, req)
		}
		// The caller's request keeps the attempt headers it came with.
		h := req.Header()
		prevAttempt, prevPrevious := h.Values(callpath.HeaderAttempt), h.Values(callpath.HeaderGRPCPreviousAttempts)
		defer func() {
			restore(h, callpath.HeaderAttempt, prevAttempt)
			restore(h, callpath.HeaderGRPCPreviousAttempts, prevPrevious)
		}()
		if i.p == nil {
			setAttempt(ctx, h)
			return next(ctx, req)
		}
		// A server's shedder does not count a handler's call while it waits on this
		// one, as with policyhttp's transport: the server called sheds for itself, and
		// the pipeline's deadline and breaker bound the wait.
		ctx, paused := callpath.PauseFor(ctx)
		defer paused.Resume()
		var res connect.AnyResponse
		err := i.p.Do(ctx, func(actx context.Context) error {
			if callpath.InRace(actx) {
				return fault.Permanent(ErrHedged)
			}
			setAttempt(actx, req.Header())
			r, err := next(actx, req)
			if err != nil {
				return i.c.classify(err, i.clock)
			}
			res = r
			return nil
		})
		if err != nil {
			return nil, connectError(err)
		}
		return res, nil
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		return &attemptConn{StreamingClientConn: next(ctx, spec), ctx: ctx}
	}
}

// attemptConn sets a stream's attempt headers just before they are sent, with its
// first message or CloseRequest: connect-go merges the request's own headers into
// the stream's after the interceptors have run.
type attemptConn struct {
	connect.StreamingClientConn
	ctx  context.Context
	once sync.Once
}

func (c *attemptConn) mark() {
	c.once.Do(func() { setAttempt(c.ctx, c.StreamingClientConn.RequestHeader()) })
}

func (c *attemptConn) Send(m any) error {
	c.mark()
	return c.StreamingClientConn.Send(m)
}

func (c *attemptConn) Receive(m any) error {
	c.mark() // a bidi stream that receives first sends its headers now
	return c.StreamingClientConn.Receive(m)
}

func (c *attemptConn) CloseRequest() error {
	c.mark()
	return c.StreamingClientConn.CloseRequest()
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, _ = owned(ctx, conn.RequestHeader())
		return next(ctx, conn)
	}
}

// setAttempt sets the attempt headers of a request made under ctx, as policyhttp's
// transport and policygrpc's interceptors do: the attempt of the retry in this process
// that owns the call path, or 1 under an owner in another process (this process makes
// the call once: it carries the ownership on, not the number); under no owner it
// removes them.
func setAttempt(ctx context.Context, h http.Header) {
	n, ok := callpath.Outgoing(ctx)
	h.Del(callpath.HeaderGRPCPreviousAttempts)
	if !ok {
		h.Del(callpath.HeaderAttempt)
		return
	}
	h.Set(callpath.HeaderAttempt, strconv.Itoa(n))
	if n > 1 {
		h.Set(callpath.HeaderGRPCPreviousAttempts, strconv.Itoa(n-1))
	}
}

// restore sets header k of h back to vs (absent if vs is nil).
func restore(h http.Header, k string, vs []string) {
	if vs == nil {
		h.Del(k)
		return
	}
	h[http.CanonicalHeaderKey(k)] = vs
}

// attemptOf reads the attempt headers of an incoming request.
func attemptOf(h http.Header) (int, bool) {
	return callpath.ParseAttempt(h.Get(callpath.HeaderAttempt), h.Get(callpath.HeaderEnvoyAttempt), h.Get(callpath.HeaderGRPCPreviousAttempts))
}

// owned returns ctx marked as owned upstream if h carries an attempt header, and the
// attempt (0 if none).
func owned(ctx context.Context, h http.Header) (context.Context, int) {
	n, ok := attemptOf(h)
	if !ok {
		return ctx, 0
	}
	return callpath.WithUpstreamAttempt(ctx, n), n
}

// connectError gives the pipeline's error the code a connect caller expects.
func connectError(err error) error {
	var ce *connect.Error
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.As(err, &ce):
		return err // the last attempt's: connect.CodeOf finds it through the wrapping
	case errors.Is(err, policy.ErrRejected):
		return connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewError(connect.CodeUnknown, err)
}

var errInvalidOptions = errors.New("connectpolicy: invalid options")

func badOption(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidOptions}, args...)...)
}

// Explain says in one line who makes which attempts of a connect call through an
// interceptor built on p, for logs and docs:
//
//	connect: pipeline "echo" makes at most 3 attempts of a unary call, 1 under a retry owner further up or upstream; streams are not retried
func Explain(p *policy.Pipeline) string {
	e := p.Explain()
	return fmt.Sprintf("connect: pipeline %q makes at most %d attempts of a unary call, %d under a retry owner further up or upstream; streams are not retried",
		e.Pipeline, e.MaxAttempts, e.MaxAttemptsPerCallPath)
}
