package connectpolicy

import (
	"context"
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/shed"
)

// ShedOptions configure [NewShedInterceptor]. The zero value is valid.
type ShedOptions struct {
	// RejectCode is the code of a refused call: connect.CodeResourceExhausted (the zero
	// value means it) or connect.CodeUnavailable.
	RejectCode connect.Code
	// Priority gives a call's priority from its procedure ("/pkg.Service/Method"); nil
	// means shed.PriorityDefault. A retry (an attempt header above 1) is sheddable
	// whatever it says.
	Priority func(ctx context.Context, procedure string) shed.Priority
}

// shedInterceptor is the connect.Interceptor of [NewShedInterceptor].
type shedInterceptor struct {
	s    *shed.Shedder
	o    ShedOptions
	name string
}

// NewShedInterceptor returns a handler interceptor that admits calls through s and
// answers the rest at once, without calling the handler, in the call's own protocol:
// a *connect.Error of o.RejectCode (resource_exhausted: HTTP 429 in the Connect
// protocol) whose metadata says when to come back to every kind of client —
// Retry-After in whole seconds (the shedder's jittered value), Grpc-Retry-Pushback-Ms
// for gRPC clients, and callpath.HeaderRefused with the reason, so a Backstop caller's
// breaker and budget leave the refusal to this server. A retry (an attempt header
// above 1) is sheddable, so retries are shed first; the handler's context is marked as
// owned upstream as [NewInterceptor]'s is, and carries the call's callpath.Pauser, so
// a retry in the handler that waits out its backoff holds no slot. A stream holds its
// slot until its handler returns, except while it waits for the client's next message.
// Every call is served or answered.
//
// The interceptor is safe for concurrent use. On a client it does nothing. connect handlers are http.Handlers, so shed.Middleware
// can guard them too; its refusals are plain HTTP 429s, which connect and gRPC clients
// read as unavailable without a pushback.
func NewShedInterceptor(s *shed.Shedder, o ShedOptions) (connect.Interceptor, error) {
	switch o.RejectCode {
	case 0:
		o.RejectCode = connect.CodeResourceExhausted
	case connect.CodeResourceExhausted, connect.CodeUnavailable:
	default:
		return nil, badOption("ShedOptions.RejectCode is %v; want resource_exhausted or unavailable", o.RejectCode)
	}
	if s == nil {
		return nil, badOption("NewShedInterceptor: the Shedder is nil")
	}
	return &shedInterceptor{s: s, o: o, name: s.Name()}, nil
}

func (i *shedInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, permit, err := i.admit(ctx, req.Spec().Procedure, req.Header())
		if err != nil {
			return nil, err
		}
		res, err := next(callpath.WithPauser(ctx, permit.Pauser()), req)
		release(permit, err)
		return res, err
	}
}

func (i *shedInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *shedInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, permit, err := i.admit(ctx, conn.Spec().Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		pz := permit.Pauser()
		err = next(callpath.WithPauser(ctx, pz), &pausingConn{StreamingHandlerConn: conn, p: pz})
		release(permit, err)
		return err
	}
}

// admit marks ctx as owned upstream if the call says so and admits the call, or
// refuses it.
func (i *shedInterceptor) admit(ctx context.Context, procedure string, h interface{ Get(string) string }) (context.Context, shed.Permit, error) {
	n, ok := callpath.ParseAttempt(h.Get(callpath.HeaderAttempt), h.Get(callpath.HeaderEnvoyAttempt), h.Get(callpath.HeaderGRPCPreviousAttempts))
	if ok {
		ctx = callpath.WithUpstreamAttempt(ctx, n)
	}
	p := shed.PriorityDefault
	if i.o.Priority != nil {
		p = i.o.Priority(ctx, procedure)
	}
	if n > 1 {
		p = min(p, shed.PrioritySheddable)
	}
	permit, why := i.s.Admit(ctx, p)
	if why == shed.ReasonNone {
		return ctx, permit, nil
	}
	ra := i.s.RetryAfter()
	secs := strconv.FormatInt(int64(ra.Seconds()), 10)
	err := connect.NewError(i.o.RejectCode, fmt.Errorf("shed: %s refused the call (%s); retry after %s s", i.name, why, secs))
	m := err.Meta()
	m.Set(HeaderRetryAfter, secs)
	m.Set(HeaderPushback, strconv.FormatInt(ra.Milliseconds(), 10))
	m.Set(callpath.HeaderRefused, why.String())
	return ctx, permit, err
}

// release returns a permit; the latency of a failed call is not learnt from (see
// shed.Permit.ReleaseFailed).
func release(p shed.Permit, err error) {
	if err != nil {
		p.ReleaseFailed()
		return
	}
	p.Release()
}

// pausingConn gives the stream's slot back while the handler waits for a message.
type pausingConn struct {
	connect.StreamingHandlerConn
	p callpath.Pauser
}

func (c *pausingConn) Receive(m any) error {
	c.p.Pause()
	defer c.p.Resume()
	return c.StreamingHandlerConn.Receive(m)
}
