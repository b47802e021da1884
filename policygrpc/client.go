package policygrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/httpattempt"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// DefaultRetryableCode is the status code retried when Options.RetryableCodes is nil:
// UNAVAILABLE, the one code gRFC A6's examples retry and the one a server that sheds
// or restarts answers.
const DefaultRetryableCode = codes.Unavailable

// Options configure the client interceptors. The zero value is valid: retry
// UNAVAILABLE only, and nothing beneath the channel retries
// (callpath.MeshBackstopOwns).
type Options struct {
	// RetryableCodes are the status codes an attempt may be retried on; nil means
	// {DefaultRetryableCode}. Whatever it holds, an RPC is never retried once the
	// caller's context is done (its CANCELLED or DEADLINE_EXCEEDED), nor after a
	// refusal by a policy (an open breaker, an exhausted budget, the owner rule). A
	// DEADLINE_EXCEEDED that a per-attempt timeout (deadline.NewPerAttempt) caused is
	// retried, as package deadline says.
	RetryableCodes []codes.Code

	// Mesh says who owns the retries beneath the channel, when a service mesh
	// stands there. The zero value is callpath.MeshBackstopOwns: attempts made under
	// a retry owner tell an Envoy beneath not to retry ([MetadataEnvoyMaxRetries]
	// "0"). callpath.MeshEnvoyOwns lets the mesh retry: the pipeline makes one
	// attempt. callpath.MeshNone sends and reads no Envoy metadata. See "A mesh
	// beneath" in the package documentation.
	Mesh callpath.Mesh
	// MeshBudget is charged for the retries a mesh beneath made, read from each
	// attempt's x-envoy-attempt-count response header, so that one budget bounds
	// every retry on the path. When it refuses one, calls the mesh owns tell the
	// mesh not to retry until it allows one again. Nil means the interceptor's
	// pipeline's own (policy.Pipeline.Budget).
	MeshBudget policy.RetryBudget
	// MeshObserver hears the attempts and retries a mesh beneath made: an
	// event.AttemptEnd failed with callpath.ErrMeshRetried and an
	// event.RetryScheduled of reason callpath.ReasonMesh per retry, of Stage "mesh",
	// named for the pipeline. Nil means the interceptor's pipeline's own
	// (policy.Pipeline.Observer).
	MeshObserver event.Observer
}

// UnaryClientInterceptor runs every unary RPC through p: each attempt is one
// invocation, carrying the attempt metadata of the call path's owner
// ([MetadataAttempt], [MetadataPreviousAttempts]). An attempt's error is retryable if
// its code is in o.RetryableCodes; a server's pushback trailer ([MetadataPushback])
// then sets the delay exactly. A pushback that is negative, malformed or given more
// than once forbids the retry whatever the code, and counts as a failure for a budget
// outside the retry even on a code that is not retried (gRFC A6).
//
// An RPC commits, and is not retried, once its server sent response headers, or if
// its request (a proto.Message, with its 5-byte frame header) is larger than the
// replay buffer: grpc.MaxRetryRPCBufferSize among the call's options, else
// DefaultMaxReplayBytes (gRFC A6, as grpc-go does).
//
// The error returned carries a gRPC status for status.FromError and status.Code: the
// caller's CANCELLED or DEADLINE_EXCEEDED when its context ended the call, else the
// last attempt's status, else UNAVAILABLE for a refusal by a policy (errors.Is finds
// breaker.ErrOpen, policy.ErrRejected, retry's causes through it). A call whose
// server's pushback does not leave time for another attempt before the deadline ends
// at once with DEADLINE_EXCEEDED, and its message says so ("policygrpc: server
// pushback 5s exceeds the 2s left before the deadline; last attempt: Unavailable:
// overloaded").
//
// p may be nil: the interceptor then only carries the attempt metadata.
func UnaryClientInterceptor(p *policy.Pipeline, o Options) grpc.UnaryClientInterceptor {
	c := newClassifier(o.meshOf(p))
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return unary(ctx, p, c, method, req, reply, cc, invoker, opts)
	}
}

// unary runs one unary RPC through p, classifying each attempt with c.
func unary(ctx context.Context, p *policy.Pipeline, c *classifier, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	counted := c.counts(ctx)
	// A request larger than the replay buffer commits the call at once: A6 does not
	// retry an RPC whose messages the client could not keep. The interceptor keeps
	// none itself (gRPC encodes req again on each attempt), so a request of another
	// codec, which it cannot measure, is retried.
	size, known := messageSize(req)
	oversized := known && size > replayLimitOf(opts, DefaultMaxReplayBytes)
	if p == nil {
		p = policy.NoProtection() // no route, or a route with no pipeline: one attempt, as gRPC sends it
	}
	ctx, mc := c.mesh.Begin(ctx)
	defer c.mesh.End(mc)
	err := p.Do(ctx, func(actx context.Context) error {
		if callpath.InRace(actx) {
			return hedgedAttempt(actx, c, mc, p.Name(), counted, method, req, reply, cc, invoker, opts)
		}
		a := new(attemptOptions)
		callOpts := append(append(a.buf[:0], opts...), grpc.Header(&a.header), grpc.Trailer(&a.trailer))
		err := invoker(withAttemptMetadata(actx, c.mesh.NoRetries(actx, mc)), method, req, reply, cc, callOpts...)
		if counted {
			c.record(actx, err, a.trailer)
		}
		err = c.classify(actx, err, a.trailer)
		c.countMesh(actx, mc, p.Name(), err, a.header, a.trailer)
		if err != nil && (a.header != nil || oversized) {
			// The server sent response headers, so the RPC committed (A6); or the
			// request did not fit the replay buffer. Either way it is not retried.
			return fault.Permanent(err)
		}
		return err
	})
	return statusError(err)
}

// attemptOptions are an attempt's call options, the caller's and two that receive
// the header and the trailer, with the header and trailer: one allocation for all
// when the caller's options fit in buf, as most calls' do. gRPC sets header to nil
// when the server answered in trailers only, before any response header.
type attemptOptions struct {
	header, trailer metadata.MD
	buf             [6]grpc.CallOption
}

// messageSize is m's size as gRPC frames it: the encoded message and the 5-byte
// message header, or unknown if m is not a proto.Message. Compression is not
// counted: a compressed message may commit a call sooner than in grpc-go, never
// later.
func messageSize(m any) (n int, known bool) {
	if pm, ok := m.(proto.Message); ok {
		return proto.Size(pm) + 5, true
	}
	return 0, false
}

// replayLimitOf returns the replay buffer of a call: the last
// grpc.MaxRetryRPCBufferSize among its options (a channel's default call options
// included, which gRPC hands to interceptors), else def.
func replayLimitOf(opts []grpc.CallOption, def int) int {
	for i := len(opts) - 1; i >= 0; i-- {
		if o, ok := opts[i].(grpc.MaxRetryRPCBufferSizeCallOption); ok {
			return max(o.MaxRetryRPCBufferSize, 0)
		}
	}
	return def
}

// hedgedAttempt is one of a hedge's attempts, which run at the same time: each
// decodes into a reply of its own and gets header, trailer and peer of its own, and
// the attempt that wins the race (callpath.Win) copies them to the caller's.
func hedgedAttempt(actx context.Context, c *classifier, mc httpattempt.Call, pipeline string, counted bool, method string,
	req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	msg, ok := reply.(proto.Message)
	if !ok {
		return fault.Permanent(fmt.Errorf("policygrpc: a hedged call needs a proto.Message reply; got %T", reply))
	}
	own := msg.ProtoReflect().New().Interface()
	var header, trailer metadata.MD
	var copies []func()
	callOpts := make([]grpc.CallOption, 0, len(opts)+1)
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			mine := new(metadata.MD)
			callOpts = append(callOpts, grpc.Header(mine))
			copies = append(copies, func() { *o.HeaderAddr = *mine })
		case grpc.TrailerCallOption:
			mine := new(metadata.MD)
			callOpts = append(callOpts, grpc.Trailer(mine))
			copies = append(copies, func() { *o.TrailerAddr = *mine })
		case grpc.PeerCallOption:
			mine := new(peer.Peer)
			callOpts = append(callOpts, grpc.Peer(mine))
			copies = append(copies, func() { *o.PeerAddr = *mine })
		default:
			callOpts = append(callOpts, o)
		}
	}
	callOpts = append(callOpts, grpc.Header(&header), grpc.Trailer(&trailer))
	err := invoker(withAttemptMetadata(actx, c.mesh.NoRetries(actx, mc)), method, req, own, cc, callOpts...)
	if counted {
		c.record(actx, err, trailer)
	}
	err = c.classify(actx, err, trailer)
	c.countMesh(actx, mc, pipeline, err, header, trailer)
	if err == nil && callpath.Win(actx) {
		proto.Reset(msg)
		proto.Merge(msg, own)
		for _, cp := range copies {
			cp()
		}
	}
	return err
}

// StreamClientInterceptor carries the attempt metadata of the call path's owner on
// every stream, so that the server below sees the ownership, and does nothing else;
// [RetryStreamClientInterceptor] runs streams through a pipeline. Under an owner it
// also tells an Envoy beneath not to retry ([MetadataEnvoyMaxRetries] "0"), as
// callpath.MeshBackstopOwns does.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(withAttemptMetadata(ctx, true), desc, cc, method, opts...)
	}
}

// DialOptions returns the dial options of a channel whose retries Backstop owns: the
// unary and stream interceptors running p (streams with the default replay buffer),
// and grpc.WithDisableRetry(), so that grpc-go's built-in retry (a service config's
// retryPolicy) does not retry the same calls a second time. A channel must have one
// owner; build the pipelines from the service config instead with
// [ParseServiceConfig].
func DialOptions(p *policy.Pipeline, o Options) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(p, o)),
		grpc.WithChainStreamInterceptor(RetryStreamClientInterceptor(p, StreamOptions{Options: o})),
		grpc.WithDisableRetry(),
	}
}

// classifier turns an attempt's outcome into an error the retry can judge, and
// counts it into the channel's throttling bucket if there is one.
type classifier struct {
	retryable [32]bool            // by code; codes are below 17
	bucket    *budget.TokenBucket // a service config's retryThrottling; nil if none
	mesh      *httpattempt.Mesh   // the mesh beneath; nil for MeshNone
}

// meshOf is o with the mesh's budget and observer defaulting to p's.
func (o Options) meshOf(p *policy.Pipeline) Options {
	if o.MeshBudget == nil {
		o.MeshBudget = p.Budget()
	}
	if o.MeshObserver == nil {
		o.MeshObserver = p.Observer()
	}
	return o
}

func newClassifier(o Options) *classifier {
	c := &classifier{mesh: httpattempt.NewMesh(o.Mesh, o.MeshBudget, o.MeshObserver, nil)}
	if o.RetryableCodes == nil {
		c.retryable[DefaultRetryableCode] = true
	}
	for _, code := range o.RetryableCodes {
		if int(code) < len(c.retryable) {
			c.retryable[code] = true
		}
	}
	return c
}

// countMesh counts the attempts a mesh beneath made for one attempt, from Envoy's
// x-envoy-attempt-count in its response header, or in its trailer when the server
// answered in trailers only. err is the attempt's outcome, classified.
func (c *classifier) countMesh(actx context.Context, mc httpattempt.Call, pipeline string, err error, header, trailer metadata.MD) {
	if c.mesh == nil {
		return
	}
	v := header.Get(MetadataEnvoyAttempt)
	if len(v) == 0 {
		v = trailer.Get(MetadataEnvoyAttempt)
	}
	if len(v) > 0 {
		if n, ok := httpattempt.MeshAttempts(v[0]); ok {
			c.mesh.Count(actx, mc, pipeline, n, err)
		}
	}
}

func (c *classifier) classify(actx context.Context, err error, trailer metadata.MD) error {
	if err == nil {
		return nil
	}
	code := status.Code(err)
	if code == codes.DeadlineExceeded && past(actx) {
		// The attempt's own deadline (gRPC's timer may fire just before the context's):
		// let the deadline stage that set it claim it.
		return &attemptTimeout{err: err, ctxErr: context.DeadlineExceeded}
	}
	d, pushed := pushbackOf(trailer)
	switch {
	case pushed && d < 0:
		// The server said not to retry: whatever the code, the call ends here, and a
		// budget outside the retry counts the failure (gRFC A6).
		return fault.Pushback(err, d)
	case int(code) >= len(c.retryable) || !c.retryable[code]:
		return err // a code no status has, too: a hostile server's cannot index past the table
	case pushed:
		err = fault.Pushback(err, d)
		if dl, ok := actx.Deadline(); ok {
			return &pushedBack{err: err, delay: d, deadline: dl, left: time.Until(dl)}
		}
		return err
	}
	return fault.Retryable(err)
}

// pushedBack is a retryable attempt's error whose server asked for a delay, with the
// deadline the attempt ran under and the time it had left: if the retry gives up
// because the delay does not fit, the caller is told so.
type pushedBack struct {
	err         error
	delay, left time.Duration
	deadline    time.Time
}

func (e *pushedBack) Error() string { return e.err.Error() }
func (e *pushedBack) Unwrap() error { return e.err }

// deadlineMessage is the status message of a call that ended with DEADLINE_EXCEEDED:
// the pipeline's error, unless the retry gave up before the deadline because the
// server's pushback would not leave time for another attempt; then it says that.
func deadlineMessage(err error) string {
	var pb *pushedBack
	if !errors.Is(err, retry.ErrDeadline) || !errors.As(err, &pb) || !time.Now().Before(pb.deadline) {
		return err.Error()
	}
	left := pb.left.Round(10 * time.Millisecond)
	last := status.New(codes.Unknown, pb.err.Error())
	var carrier interface{ GRPCStatus() *status.Status }
	if errors.As(pb.err, &carrier) && carrier.GRPCStatus() != nil {
		last = carrier.GRPCStatus()
	}
	if pb.delay >= pb.left {
		return fmt.Sprintf("policygrpc: server pushback %v exceeds the %v left before the deadline; last attempt: %v: %s",
			pb.delay, left, last.Code(), last.Message())
	}
	return fmt.Sprintf("policygrpc: server pushback %v leaves too little of the %v left before the deadline for another attempt; last attempt: %v: %s",
		pb.delay, left, last.Code(), last.Message())
}

// pushbackOf reads the server's pushback trailer: the delay it asks for, or −1 for do
// not retry (a negative or malformed value, or more than one value); ok is false if
// there is none.
func pushbackOf(trailer metadata.MD) (d time.Duration, ok bool) {
	switch v := trailer.Get(MetadataPushback); len(v) {
	case 0:
		return 0, false
	case 1:
		return parsePushback(v[0]), true
	}
	return -1, true
}

// past reports whether ctx is done or its deadline has passed.
func past(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// parsePushback reads a grpc-retry-pushback-ms value, which gRFC A6 defines as "an
// ASCII encoded signed 32-bit integer with no unnecessary leading zeros": a delay of
// that many milliseconds, or −1 (do not retry) for a negative value or anything
// else — spaces, a sign on a positive number, leading zeros, a fraction, a value past
// 2³¹−1.
func parsePushback(v string) time.Duration {
	if v == "" || len(v) > 1 && v[0] == '0' {
		return -1
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1 // a negative value, or not an integer
		}
	}
	ms, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// attemptTimeout is a DEADLINE_EXCEEDED an attempt's own context caused: it keeps the
// status and matches the context's error, so a deadline stage recognises its timer.
type attemptTimeout struct {
	err, ctxErr error
}

func (e *attemptTimeout) Error() string   { return e.err.Error() }
func (e *attemptTimeout) Unwrap() []error { return []error{e.err, e.ctxErr} }

// Error is the error the client interceptor returns for a failed RPC: it carries a
// gRPC status (GRPCStatus) and unwraps to what the pipeline returned.
type Error struct {
	Status *status.Status
	Err    error
}

// Error returns the status's message: what the pipeline returned, or, for a call a
// server's pushback ended before its deadline, what happened.
func (e *Error) Error() string {
	if e.Status != nil {
		return e.Status.Message()
	}
	return e.Err.Error()
}

// Unwrap returns the pipeline's error.
func (e *Error) Unwrap() error { return e.Err }

// GRPCStatus returns the status, for status.FromError and status.Code.
func (e *Error) GRPCStatus() *status.Status { return e.Status }

// statusError gives the pipeline's error the status a gRPC caller expects.
func statusError(err error) error {
	if err == nil {
		return nil
	}
	var st *status.Status
	var carrier interface{ GRPCStatus() *status.Status }
	switch {
	case errors.Is(err, context.Canceled):
		st = status.New(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		st = status.New(codes.DeadlineExceeded, deadlineMessage(err))
	case errors.As(err, &carrier) && carrier.GRPCStatus() != nil:
		return err // the last attempt's status, found by status.FromError through the wrapping
	case errors.Is(err, policy.ErrRejected):
		st = status.New(codes.Unavailable, err.Error())
	default:
		st = status.New(codes.Unknown, err.Error())
	}
	return &Error{Status: st, Err: err}
}
