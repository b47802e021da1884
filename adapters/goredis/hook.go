package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
)

// ErrInvalidOptions is matched by the error of [NewHook] and [NewClient] for a bad
// argument; the error names it.
var ErrInvalidOptions = errors.New("goredis: invalid options")

// Options are a [Hook]'s options. The zero value is valid.
type Options struct {
	// Safe says whether cmd may run twice: a command the hook may retry after an
	// error that leaves unknown whether the server ran it (a broken connection, a
	// timeout). nil means [DefaultSafe]. Commands the server refused (LOADING, BUSY,
	// TRYAGAIN, CLUSTERDOWN, MASTERDOWN) or never received (the dial failed) are
	// retried whatever Safe says: they did not run.
	Safe func(cmd redis.Cmder) bool
}

// A Hook is a redis.Hook that runs every command, and every pipeline of commands,
// through a *policy.Pipeline: one attempt is one round trip, classified as [Classify]
// says. Build it with [NewHook], or let [NewClient] build it with the client's own
// retries turned off. A Hook is safe for concurrent use; the zero value is not usable.
type Hook struct {
	p    *policy.Pipeline
	safe func(redis.Cmder) bool
}

var _ redis.Hook = (*Hook)(nil)

// NewHook returns a Hook running commands through p. It is an error, matching
// ErrInvalidOptions, for p to be nil.
func NewHook(p *policy.Pipeline, o Options) (*Hook, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: the pipeline is nil; want one built with policy.Wrap", ErrInvalidOptions)
	}
	h := &Hook{p: p, safe: o.Safe}
	if h.safe == nil {
		h.safe = DefaultSafe
	}
	return h, nil
}

// inside marks the context of a call the hook is running: go-redis sends a new
// connection's handshake (HELLO, SELECT, CLIENT SETINFO) through the same hooks, from
// inside the attempt that dialled it, and that handshake is part of the attempt.
type inside struct{}

type safeKey struct{}

// Idempotent returns a copy of ctx that says every command sent under it may run
// twice: the hook may retry it after a broken connection or a timeout, as it does the
// commands [Options].Safe accepts. Use it for a command that is idempotent in the way
// you use it (an INCR whose result you would rather double than lose).
func Idempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, safeKey{}, true)
}

func (h *Hook) repeatable(ctx context.Context, cmds ...redis.Cmder) bool {
	if !callpath.Repeatable(ctx) {
		return false
	}
	if marked, _ := ctx.Value(safeKey{}).(bool); marked {
		return true
	}
	for _, c := range cmds {
		if n := c.Name(); n == "multi" || n == "exec" {
			continue // a transaction's frame: what it may repeat is what it holds
		}
		if !h.safe(c) {
			return false
		}
	}
	return true
}

// DialHook returns next: a dial is part of the attempt that needs it.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook runs one command through the pipeline. The command's result is the last
// attempt's; when the call fails, its error (cmd.Err()) is Backstop's — a
// *retry.Error, a breaker's refusal — and still unwraps to the last Redis error, so
// errors.Is and errors.As find it. redis.Nil is a success.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ctx.Value(inside{}) == h {
			return next(ctx, cmd)
		}
		safe := h.repeatable(ctx, cmd)
		// Never hedged: a hedge's attempts run at once, and would write one command's
		// reply together.
		ctx = callpath.WithoutRepeats(context.WithValue(ctx, inside{}, h))
		// raw is what go-redis said of the last attempt: redis.Nil stays the
		// command's error, as go-redis sets it from what the hooks return.
		var raw error
		err := h.p.Do(ctx, func(ctx context.Context) error {
			cmd.SetErr(nil)
			err := contextual(ctx, next(ctx, cmd))
			raw = err
			if errors.Is(err, redis.Nil) {
				return nil
			}
			return Classify(err, safe)
		})
		if err != nil {
			cmd.SetErr(err)
			return err
		}
		return raw
	}
}

// ProcessPipelineHook runs a pipeline of commands (a redis.Pipeliner's Exec, a
// MULTI/EXEC transaction) through the pipeline as one attempt per round trip. After a
// broken connection, a timeout or an error reply, the commands that did run cannot be
// told from those that did not, so the batch is retried only if every command in it
// (a transaction's MULTI and EXEC aside) may run twice, or when the dial failed and
// none was sent.
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if ctx.Value(inside{}) == h {
			return next(ctx, cmds)
		}
		safe := h.repeatable(ctx, cmds...)
		ctx = callpath.WithoutRepeats(context.WithValue(ctx, inside{}, h)) // never hedged, as above
		// raw is what go-redis said of the last attempt.
		var raw error
		err := h.p.Do(ctx, func(ctx context.Context) error {
			for _, c := range cmds {
				c.SetErr(nil)
			}
			err := contextual(ctx, next(ctx, cmds))
			raw = err
			if errors.Is(err, redis.Nil) {
				// Exec reports the first failed command; a missing key is no failure,
				// but a command after it may have failed.
				err = nil
				for _, c := range cmds {
					if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
						err = e
						break
					}
				}
			}
			return Classify(err, safe)
		})
		if err == nil {
			return raw // nil, or redis.Nil as go-redis says it
		}
		for _, c := range cmds {
			if c.Err() == nil {
				c.SetErr(err) // refused, or stopped before it ran
			}
		}
		return err
	}
}

// contextual returns err, an attempt's error, as the context's when it is a timeout at
// the context's deadline. go-redis sets its socket deadlines from the context's
// (ContextTimeoutEnabled), so a read times out at the very instant the context ends,
// and can return before the context says so; the deadline's stage would then not know
// its own deadline in the error.
func contextual(ctx context.Context, err error) error {
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() || ctx.Err() != nil {
		return err
	}
	if d, ok := ctx.Deadline(); !ok || time.Now().Before(d) {
		return err
	}
	<-ctx.Done() // past its deadline: done at once
	return fmt.Errorf("%w: %w", ctx.Err(), err)
}
