package policygrpc

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/internal/httpattempt"

	"github.com/backstop-go/backstop/policy"
)

// DefaultMaxReplayBytes is how much of a stream's sent messages is kept for replay
// before the stream commits: 256 KiB, grpc-go's per-RPC retry buffer.
const DefaultMaxReplayBytes = 256 << 10

// StreamOptions configure [RetryStreamClientInterceptor]. The zero value is valid.
type StreamOptions struct {
	Options
	// MaxReplayBytes bounds the messages kept to replay on a retry, each counted
	// with its 5-byte gRPC frame header; 0 means DefaultMaxReplayBytes. A stream
	// whose sent messages exceed it commits: it is not retried any more (gRFC A6).
	// Negative means no buffer: the stream commits at its first message sent. A
	// grpc.MaxRetryRPCBufferSize call option, given per call or as a channel's
	// default call option, wins over it, as in grpc-go.
	MaxReplayBytes int
}

// RetryStreamClientInterceptor runs every stream through p, retried as gRFC A6 says:
// only until the stream commits — the server's response headers or first message
// received, the messages sent exceeding the replay buffer (o.MaxReplayBytes), or the
// caller asking for the stream's Context. Until then the messages sent are kept and
// replayed, in order, on each new attempt (with CloseSend if it was called), and a
// failed attempt's status is classified as for unary calls (codes, pushback). After
// the commit, errors reach the caller untouched: an attempt whose server sent headers
// and then failed is never retried, whether or not the caller read the headers, and
// neither is one that failed after a message. An attempt that failed in trailers
// only, before any header, has not committed: Header retries it and returns the next
// attempt's headers, and so does RecvMsg. p's call ends at the commit, and counts as
// a success for the policies in it.
//
// The pipeline's deadlines bound the whole stream, as the caller's context does; the
// stream's resources are released when RecvMsg returns an error (io.EOF included) or
// the caller's context ends, as grpc-go requires of every stream.
func RetryStreamClientInterceptor(p *policy.Pipeline, o StreamOptions) grpc.StreamClientInterceptor {
	c := newClassifier(o.Options.meshOf(p))
	limit := replayLimit(o.MaxReplayBytes)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return newRetryStream(ctx, p, c, limit, desc, cc, method, streamer, opts)
	}
}

func replayLimit(n int) int {
	switch {
	case n == 0:
		return DefaultMaxReplayBytes
	case n < 0:
		return 0
	}
	return n
}

// newRetryStream opens a stream whose attempts p makes, classified by c.
func newRetryStream(ctx context.Context, p *policy.Pipeline, c *classifier, limit int, desc *grpc.StreamDesc,
	cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption) (grpc.ClientStream, error) {
	rctx, rel := callpath.WithReleaser(ctx)
	rctx, mc := c.mesh.Begin(rctx)
	limit = replayLimitOf(opts, limit)
	s := &retryStream{ctx: ctx, limit: limit, release: rel.Release, serverStreams: desc.ServerStreams,
		mesh: c.mesh, mc: mc, pipeline: p.Name()}
	if c.counts(ctx) {
		s.c = c
	}
	s.cond = sync.NewCond(&s.mu)
	open := func(actx context.Context) error {
		cs, err := streamer(withAttemptMetadata(actx, c.mesh.NoRetries(actx, mc)), desc, cc, method, opts...)
		if err != nil {
			s.record(err, nil)
			return c.classify(actx, err, nil)
		}
		failed := s.attempt(cs)
		if failed == nil {
			return nil // committed: RecvMsg counts how the stream ends, Header the mesh's attempts
		}
		s.record(failed, cs.Trailer())
		err = c.classify(actx, failed, cs.Trailer())
		// The attempt failed: its header (if any) and trailer are in, and Header
		// does not block.
		header, _ := cs.Header()
		s.countMesh(actx, err, header, cs.Trailer())
		return err
	}
	go func() {
		err := doContained(rctx, p, open)
		s.mu.Lock()
		s.done, s.final = true, statusError(err)
		s.cond.Broadcast()
		s.mu.Unlock()
		s.mesh.End(mc)
		if err != nil {
			rel.Release()
		}
	}()
	// Wait for the first attempt's stream, or the pipeline's refusal.
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.cur == nil && !s.done {
		s.cond.Wait()
	}
	if s.cur == nil {
		return nil, s.final
	}
	return s, nil
}

// retryStream is a grpc.ClientStream whose attempts a pipeline makes.
type retryStream struct {
	ctx           context.Context
	limit         int
	release       func()
	serverStreams bool
	c             *classifier // counts the stream's RPCs into the channel's bucket; nil: not counted

	mu         sync.Mutex // guards the fields below
	cond       *sync.Cond
	cur        grpc.ClientStream // the current attempt's stream
	gen        int               // attempts opened
	sent       []any             // messages sent before the commit, to replay
	sentBytes  int
	closedSend bool
	committed  bool
	failGen    int   // the attempt a caller's operation saw fail
	failErr    error // and how
	done       bool  // the pipeline returned
	final      error // what it returned, as a status error
	ended      bool  // the committed stream's outcome was counted

	mesh      *httpattempt.Mesh // the mesh beneath; nil for MeshNone
	pipeline  string            // p's name, for the mesh's events
	mc        httpattempt.Call  // the stream's dealings with the mesh
	meshCount int               // the attempt whose mesh attempts were counted last; guarded by mu
}

// countMesh counts the attempts the mesh made for the current attempt, once, from
// x-envoy-attempt-count in its header or trailer. err is its classified outcome.
func (s *retryStream) countMesh(actx context.Context, err error, header, trailer metadata.MD) {
	if s.mesh == nil {
		return
	}
	v := header.Get(MetadataEnvoyAttempt)
	if len(v) == 0 {
		v = trailer.Get(MetadataEnvoyAttempt)
	}
	n, ok := 0, false
	if len(v) > 0 {
		n, ok = httpattempt.MeshAttempts(v[0])
	}
	s.mu.Lock()
	if s.meshCount == s.gen {
		ok = false // counted already
	}
	s.meshCount = s.gen
	s.mu.Unlock()
	if ok {
		s.mesh.Count(actx, s.mc, s.pipeline, n, err)
	}
}

// record counts a failed attempt, or the outcome of the stream, into the channel's
// bucket (see classifier.record).
func (s *retryStream) record(err error, trailer metadata.MD) {
	if s.c != nil {
		s.c.record(s.ctx, err, trailer)
	}
}

// recordEnd counts the end of the committed stream once: err nil for a success.
func (s *retryStream) recordEnd(cs grpc.ClientStream, err error) {
	if s.c == nil {
		return
	}
	s.mu.Lock()
	first := !s.ended
	s.ended = true
	s.mu.Unlock()
	if first {
		var trailer metadata.MD
		if err != nil {
			trailer = cs.Trailer()
		}
		s.record(err, trailer)
	}
}

// attempt runs on the pipeline's goroutine: it replays what was sent on cs, makes cs
// the current stream, and waits until the stream commits (nil), this attempt fails, or
// the caller's context ends. It sends outside the lock: messages the caller sends
// meanwhile are kept and replayed in turn, so the order holds.
func (s *retryStream) attempt(cs grpc.ClientStream) error {
	for n := 0; ; {
		s.mu.Lock()
		msgs := s.sent[n:]
		if len(msgs) == 0 || s.committed {
			s.gen++
			s.cur = cs
			break // still locked: no message can slip in between
		}
		s.mu.Unlock()
		for _, m := range msgs {
			if err := cs.SendMsg(m); err != nil {
				break // the stream failed: RecvMsg says how
			}
		}
		n += len(msgs)
	}
	gen, closed := s.gen, s.closedSend
	s.cond.Broadcast()
	s.mu.Unlock()
	if closed {
		_ = cs.CloseSend()
	}

	stop := context.AfterFunc(s.ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.committed && s.failGen != gen && s.ctx.Err() == nil {
		s.cond.Wait()
	}
	switch {
	case s.committed:
		return nil
	case s.failGen == gen:
		return s.failErr
	}
	return s.ctx.Err()
}

// commitLocked ends the retrying: what happens to this stream from now on is the
// caller's.
func (s *retryStream) commitLocked() {
	if !s.committed {
		s.committed = true
		s.sent = nil
		s.cond.Broadcast()
	}
}

// failed reports that attempt gen failed with err before the commit and waits for the
// next attempt's stream; it returns false if there is none (the pipeline gave up).
func (s *retryStream) failed(gen int, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == gen && !s.committed {
		s.failGen, s.failErr = gen, err
		s.cond.Broadcast()
	}
	for s.gen == gen && !s.done {
		s.cond.Wait()
	}
	return s.gen != gen
}

// current returns the current stream, its attempt and whether the stream committed.
func (s *retryStream) current() (grpc.ClientStream, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.gen, s.committed
}

func (s *retryStream) Header() (md metadata.MD, err error) {
	for {
		cs, gen, committed := s.current()
		md, err = cs.Header()
		switch {
		case err == nil && md != nil:
			// Response headers arrived: the stream commits (gRFC A6).
			s.mu.Lock()
			s.commitLocked()
			s.mu.Unlock()
			s.countMesh(s.ctx, nil, md, nil)
			return md, nil
		case err == nil && committed:
			return nil, nil
		case err == nil:
			// The attempt ended without headers (trailers only). If it failed, it
			// is retried here and Header returns the next attempt's headers, as
			// grpc-go's own retry does; if not, RecvMsg tells the caller how.
			if err = trailersOnlyStatus(cs); err == nil || !s.failed(gen, err) {
				return nil, nil
			}
			continue
		}
		if committed || !s.failed(gen, err) {
			return nil, s.finalOr(err)
		}
	}
}

// trailersOnlyStatus returns the error of cs, an attempt that ended in trailers only
// (its Header returned nil metadata and no error); nil if it ended with OK. No
// message can arrive on such a stream, so RecvMsg decodes nothing.
func trailersOnlyStatus(cs grpc.ClientStream) error {
	err := cs.RecvMsg(new(emptypb.Empty))
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// headersArrived reports whether the server sent cs's response headers: asked after
// cs failed, Header no longer blocks, and it returns nil metadata for an attempt
// that ended in trailers only, before any header.
func headersArrived(cs grpc.ClientStream) bool {
	md, err := cs.Header()
	return err == nil && md != nil
}

func (s *retryStream) Trailer() metadata.MD {
	cs, _, _ := s.current()
	return cs.Trailer()
}

func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	s.closedSend = true
	cs := s.cur
	s.mu.Unlock()
	return cs.CloseSend()
}

// Context commits the stream, as grpc.ClientStream documents: the context belongs
// to one attempt, so the stream is not retried once the caller holds it.
func (s *retryStream) Context() context.Context {
	s.mu.Lock()
	s.commitLocked()
	cs := s.cur
	s.mu.Unlock()
	return cs.Context()
}

func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	if s.closedSend {
		// A caller's mistake, which gRPC reports: nothing to keep.
		cs := s.cur
		s.mu.Unlock()
		return cs.SendMsg(m)
	}
	if !s.committed {
		size, known := messageSize(m)
		if !known || s.sentBytes+size > s.limit {
			// A message that cannot be measured cannot be kept.
			s.commitLocked() // too much to replay: no more retries (A6)
		} else {
			s.sent = append(s.sent, m)
			s.sentBytes += size
		}
	}
	cs, committed := s.cur, s.committed
	s.mu.Unlock()
	err := cs.SendMsg(m)
	if err != nil && !committed && !s.over() {
		return nil // kept for the next attempt; RecvMsg tells how this one ended
	}
	return err
}

// over reports whether the pipeline has returned: no attempt will follow.
func (s *retryStream) over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *retryStream) RecvMsg(m any) error {
	for {
		cs, gen, committed := s.current()
		err := cs.RecvMsg(m)
		switch {
		case err == nil:
			s.mu.Lock()
			s.commitLocked()
			s.mu.Unlock()
			if s.mesh != nil {
				header, _ := cs.Header() // a message arrived: so did the header
				s.countMesh(s.ctx, nil, header, nil)
			}
			if !s.serverStreams {
				// A single response received is the end of the RPC, with OK.
				s.recordEnd(cs, nil)
			}
			return nil
		case errors.Is(err, io.EOF):
			// The server ended the stream with OK: commit, the call succeeded.
			s.mu.Lock()
			s.commitLocked()
			s.mu.Unlock()
			s.recordEnd(cs, nil)
			s.release()
			return err
		case committed:
			s.recordEnd(cs, err)
			s.countEnded(cs, err)
			s.release()
			return err
		case headersArrived(cs):
			// The server answered with headers and then failed: the headers
			// committed the stream, and its failure is the caller's (gRFC A6).
			s.mu.Lock()
			s.commitLocked()
			s.mu.Unlock()
			s.recordEnd(cs, err)
			s.countEnded(cs, err)
			s.release()
			return err
		}
		if !s.failed(gen, err) {
			s.release()
			return s.finalOr(err)
		}
	}
}

// countEnded counts the mesh's attempts for cs, a committed stream that ended with
// err: its header and trailer are in.
func (s *retryStream) countEnded(cs grpc.ClientStream, err error) {
	if s.mesh != nil {
		header, _ := cs.Header()
		s.countMesh(s.ctx, err, header, cs.Trailer())
	}
}

// finalOr returns the pipeline's final error if it gave up, else err.
func (s *retryStream) finalOr(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done && s.final != nil {
		return s.final
	}
	return err
}

// doContained runs p.Do on a goroutine the interceptor started: a panic in the
// pipeline's policies, its observer or the streamer becomes the stream's error, a
// *policy.PanicError with the panic's value and stack, instead of killing a process no
// caller could recover it in.
func doContained(ctx context.Context, p *policy.Pipeline, fn policy.Func) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = policy.NewPanicError(v)
		}
	}()
	if p == nil {
		p = policy.NoProtection() // no route, or a route with no pipeline: one attempt, as gRPC sends it
	}
	return p.Do(ctx, fn)
}
