package policygrpc

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/shed"
)

// owned returns ctx marked as owned upstream if the incoming call carries attempt
// metadata, and the attempt number (0 if none).
func owned(ctx context.Context) (context.Context, int) {
	n, ok := attemptOf(ctx)
	if !ok {
		return ctx, 0
	}
	return callpath.WithUpstreamAttempt(ctx, n), n
}

// UnaryServerInterceptor marks the context of a call that carries attempt metadata
// (Backstop's, grpc-previous-rpc-attempts, x-envoy-attempt-count) as owned upstream: a
// retry in the caller owns this call path, so the handler's own retrying pipelines
// make one attempt each instead of multiplying the caller's retries. Values that do
// not parse are ignored.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, _ = owned(ctx)
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is [UnaryServerInterceptor] for streams.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, n := owned(ss.Context())
		if n == 0 {
			return handler(srv, ss)
		}
		return handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// ShedOptions configure [ShedUnaryServerInterceptor]. The zero value is valid.
type ShedOptions struct {
	// RejectCode is the status of a refused RPC: codes.ResourceExhausted (the zero
	// value, codes.OK, means it) or codes.Unavailable.
	RejectCode codes.Code
	// Priority gives an RPC's priority from its full method name; nil means
	// shed.PriorityDefault. A retry (attempt metadata above 1) is sheddable whatever
	// it says.
	Priority func(ctx context.Context, fullMethod string) shed.Priority
}

// ShedUnaryServerInterceptor admits unary RPCs through s and answers the rest at once,
// without calling the handler: status o.RejectCode (RESOURCE_EXHAUSTED) and a
// grpc-retry-pushback-ms trailer with the shedder's jittered Retry-After, so that
// Backstop and grpc-go clients alike come back later. Retries (attempt metadata above
// 1) are sheddable, so they are shed first; the handler's context is marked as owned
// upstream as with [UnaryServerInterceptor]. Every RPC is served or answered.
func ShedUnaryServerInterceptor(s *shed.Shedder, o ShedOptions) (grpc.UnaryServerInterceptor, error) {
	a, err := newAdmitter(s, o)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, permit, err := a.admit(ctx, info.FullMethod, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
		if err != nil {
			return nil, err
		}
		resp, err := handler(callpath.WithPauser(ctx, permit.Pauser()), req)
		release(permit, err)
		return resp, err
	}, nil
}

// release returns a permit; the latency of a failed RPC is not learnt from (see
// shed.Permit.ReleaseFailed).
func release(p shed.Permit, err error) {
	if err != nil {
		p.ReleaseFailed()
		return
	}
	p.Release()
}

// ShedStreamServerInterceptor is [ShedUnaryServerInterceptor] for streams: a stream
// holds its slot until its handler returns, except while the handler waits for the
// client's next message (RecvMsg) or a retry in it waits out its backoff: a client
// that sends its stream slowly cannot fill the limit.
func ShedStreamServerInterceptor(s *shed.Shedder, o ShedOptions) (grpc.StreamServerInterceptor, error) {
	a, err := newAdmitter(s, o)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, permit, err := a.admit(ss.Context(), info.FullMethod, ss.SetTrailer)
		if err != nil {
			return err
		}
		pz := permit.Pauser()
		err = handler(srv, &pausingStream{ctxStream{ServerStream: ss, ctx: callpath.WithPauser(ctx, pz)}, pz})
		release(permit, err)
		return err
	}, nil
}

// pausingStream pauses the stream's slot while the handler waits for a message.
type pausingStream struct {
	ctxStream
	p callpath.Pauser
}

func (p *pausingStream) RecvMsg(m any) error {
	p.p.Pause()
	defer p.p.Resume()
	return p.ServerStream.RecvMsg(m)
}

// admitter is the admission shared by the shedding interceptors.
type admitter struct {
	s *shed.Shedder
	o ShedOptions
}

func newAdmitter(s *shed.Shedder, o ShedOptions) (*admitter, error) {
	switch o.RejectCode {
	case codes.OK:
		o.RejectCode = codes.ResourceExhausted
	case codes.ResourceExhausted, codes.Unavailable:
	default:
		return nil, fmt.Errorf("policygrpc: ShedOptions.RejectCode is %v; want RESOURCE_EXHAUSTED or UNAVAILABLE", o.RejectCode)
	}
	if s == nil {
		return nil, fmt.Errorf("policygrpc: shedding interceptor: the Shedder is nil")
	}
	return &admitter{s: s, o: o}, nil
}

// admit marks ctx as owned upstream if the call says so and admits the call, or
// refuses it with the reject status after setting the pushback trailer.
func (a *admitter) admit(ctx context.Context, method string, setTrailer func(metadata.MD)) (context.Context, shed.Permit, error) {
	ctx, n := owned(ctx)
	p := shed.PriorityDefault
	if a.o.Priority != nil {
		p = a.o.Priority(ctx, method)
	}
	if n > 1 {
		p = min(p, shed.PrioritySheddable)
	}
	permit, why := a.s.Admit(ctx, p)
	if why != shed.ReasonNone {
		ms := strconv.FormatInt(a.s.RetryAfter().Milliseconds(), 10)
		setTrailer(metadata.Pairs(MetadataPushback, ms))
		return ctx, permit, status.Errorf(a.o.RejectCode, "shed: %s refused the call (%s); retry after %s ms", a.s.Name(), why, ms)
	}
	return ctx, permit, nil
}
