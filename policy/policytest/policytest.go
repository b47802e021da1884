package policytest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

// Pipeline is the name the suite gives the pipeline it binds policies into.
const Pipeline = "policytest"

var errFn = errors.New("policytest: fn failed")

type ctxKey struct{}

// Run runs the conformance suite as subtests of t. newPolicy must return a fresh
// policy on each call. Some subtests change a policy's state (a breaker's counts).
func Run(t *testing.T, newPolicy func() policy.Policy) {
	t.Helper()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	bind := func(t *testing.T, obs event.Observer) (policy.Policy, policy.Runner) {
		t.Helper()
		p := newPolicy()
		if p == nil {
			t.Fatal("newPolicy returned nil")
		}
		r := p.Bind(terminal{}, policy.Env{Pipeline: Pipeline, Observer: obs, Position: 1})
		if r == nil {
			t.Fatalf("%T.Bind returned a nil Runner", p)
		}
		return p, r
	}

	t.Run("Placement", func(t *testing.T) {
		p := newPolicy()
		pl := p.Placement()
		if !snakeCase(pl.Kind) {
			t.Errorf("%T.Placement().Kind = %q; want a snake_case name such as \"my_cache\"", p, pl.Kind)
		}
		if pl2 := p.Placement(); pl2 != pl {
			t.Errorf("%T.Placement() changed between calls: %+v then %+v", p, pl, pl2)
		}
		if err := policy.CheckPlacements(pl); err != nil && pl.Retry == policy.RetryAnywhere && !pl.OwnsRetries {
			t.Errorf("%T alone in a pipeline is refused: %v", p, err)
		}
	})

	t.Run("Success", func(t *testing.T) {
		_, r := bind(t, nil)
		var calls int
		err := r.Run(context.Background(), func(context.Context) error { calls++; return nil })
		if err != nil {
			t.Errorf("Run(fn returning nil) = %v; want nil", err)
		}
		if calls != 1 {
			t.Errorf("Run(fn returning nil) called fn %d times; want 1", calls)
		}
	})

	t.Run("ErrorPassesThrough", func(t *testing.T) {
		_, r := bind(t, nil)
		var calls int
		err := r.Run(context.Background(), func(context.Context) error { calls++; return errFn })
		if !errors.Is(err, errFn) {
			t.Errorf("Run(fn returning %v) = %v; want an error matching it", errFn, err)
		}
		if calls != 1 {
			t.Errorf("Run(fn returning a plain error) called fn %d times; want 1 (a plain error is not retryable)", calls)
		}
	})

	t.Run("ContextValuesReachFn", func(t *testing.T) {
		_, r := bind(t, nil)
		ctx := context.WithValue(context.Background(), ctxKey{}, "v")
		var got any
		if err := r.Run(ctx, func(ctx context.Context) error { got = ctx.Value(ctxKey{}); return nil }); err != nil {
			t.Fatalf("Run = %v; want nil", err)
		}
		if got != "v" {
			t.Errorf("fn saw ctx.Value(key) = %v; want the caller's value %q", got, "v")
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		_, r := bind(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var calls int
		err := r.Run(ctx, func(ctx context.Context) error { calls++; return ctx.Err() })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run(cancelled ctx) = %v; want an error matching context.Canceled", err)
		}
		if calls > 1 {
			t.Errorf("Run(cancelled ctx) called fn %d times; want at most 1", calls)
		}
	})

	t.Run("HonoursContext", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, r := bind(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			start := time.Now()
			_ = r.Run(ctx, func(ctx context.Context) error { return ctx.Err() })
			if waited := time.Since(start); waited > 0 {
				t.Errorf("Run(cancelled ctx) waited %v before returning; a policy must honour ctx and never wait past its end", waited)
			}

			const limit = time.Second
			ctx, cancel = context.WithTimeout(context.Background(), limit)
			defer cancel()
			start = time.Now()
			_ = r.Run(ctx, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
			if took := time.Since(start); took > limit {
				t.Errorf("Run(ctx with a %v deadline) returned after %v; a policy must honour ctx and never wait past its end", limit, took)
			}
		})
	})

	t.Run("ReleaserKeepsContext", func(t *testing.T) {
		_, r := bind(t, nil)
		ctx, rel := callpath.WithReleaser(context.Background())
		var handed context.Context
		if err := r.Run(ctx, func(ctx context.Context) error { handed = ctx; return nil }); err != nil {
			t.Fatalf("Run = %v; want nil", err)
		}
		if handed == nil {
			t.Fatal("Run returned nil without calling fn")
		}
		if err := handed.Err(); err != nil {
			t.Errorf("the context handed to fn ended (%v) when Run returned, though the caller's context carries a callpath.Releaser; "+
				"the Releaser rule: hand the cancel function to callpath.DeferRelease instead of cancelling at the end of Run", err)
		}
		rel.Release()
	})

	t.Run("Concurrent", func(t *testing.T) {
		_, r := bind(t, nil)
		const goroutines, calls = 8, 200
		var fnCalls, runs atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range calls {
					fail := (g+i)%3 == 0
					runs.Add(1)
					err := r.Run(context.Background(), func(context.Context) error {
						fnCalls.Add(1)
						if fail {
							return errFn
						}
						return nil
					})
					switch {
					case err == nil && !fail, errors.Is(err, errFn), errors.Is(err, policy.ErrRejected):
					default:
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent Run returned %v; want nil, fn's error or a rejection", err)
		}
		if fnCalls.Load() > runs.Load() {
			t.Errorf("fn ran %d times for %d calls; want at most one attempt per call", fnCalls.Load(), runs.Load())
		}
	})

	t.Run("Events", func(t *testing.T) {
		var mu sync.Mutex
		var events []event.Event
		_, r := bind(t, event.ObserverFunc(func(e event.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
		_ = r.Run(context.Background(), func(context.Context) error { return nil })
		_ = r.Run(context.Background(), func(context.Context) error { return errFn })
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			if e.Kind.String() == "unknown" {
				t.Errorf("event %+v has an invalid Kind", e)
			}
			if e.Pipeline != Pipeline {
				t.Errorf("event %v has Pipeline %q; want %q", e.Kind, e.Pipeline, Pipeline)
			}
			if k := newPolicy().Placement().Kind; e.Stage != k {
				t.Errorf("event %v has Stage %q; want the stage's Placement().Kind %q", e.Kind, e.Stage, k)
			}
		}
	})
}

type terminal struct{}

func (terminal) Run(ctx context.Context, fn policy.Func) error { return fn(ctx) }

// snakeCase reports whether s is a non-empty snake_case name: lower-case letters,
// digits and underscores, starting with a letter.
func snakeCase(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
