package retry_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

func explodingAttempt(ctx context.Context) error {
	if n, _, _ := callpath.Attempt(ctx); n == 2 {
		panic("attempt exploded")
	}
	<-ctx.Done() // the first attempt waits to be cancelled
	return ctx.Err()
}

// TestHedge_APanicInAHedgedAttemptIsReturned: a panic in a hedged attempt, on a
// goroutine the hedge started, does not end the process: the call ends with it as a
// *policy.PanicError (value and stack), the other attempts are cancelled and waited
// for, and an EventPanic names the attempt.
func TestHedge_APanicInAHedgedAttemptIsReturned(t *testing.T) {
	var mu sync.Mutex
	var panics []event.Event
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: -1})))).With(policy.Name("orders"),
		policy.Observe(event.ObserverFunc(func(e event.Event) {
			if e.Kind == event.Panic {
				mu.Lock()
				panics = append(panics, e)
				mu.Unlock()
			}
		})))
	err := p.Do(context.Background(), explodingAttempt)
	var pe *policy.PanicError
	require.ErrorAs(t, err, &pe, "Do with a panicking hedged attempt = %v; want a *policy.PanicError", err)
	require.Equal(t, "attempt exploded", pe.Value)
	require.Contains(t, string(pe.Stack), "explodingAttempt", "the stack names the panicking function")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, re.Cause, retry.ErrNotRetryable, "a panic is not retried")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, panics, 1, "EventPanic events")
	require.Equal(t, retry.HedgePanicSource, panics[0].Source)
	require.Equal(t, "orders", panics[0].Pipeline)
	require.Equal(t, 2, panics[0].Attempt)
	require.ErrorIs(t, panics[0].Err, pe)
}

// TestHedge_GoexitInAHedgedAttemptEndsTheCall: an attempt that calls runtime.Goexit
// (t.FailNow in a fake) leaves the call waiting for nothing.
func TestHedge_GoexitInAHedgedAttemptEndsTheCall(t *testing.T) {
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: -1}))))
	err := p.Do(context.Background(), func(ctx context.Context) error {
		if n, _, _ := callpath.Attempt(ctx); n == 1 {
			runtime.Goexit()
		}
		<-ctx.Done()
		return ctx.Err()
	})
	require.ErrorContains(t, err, "Goexit")
}

// TestHedge_APanicOnTheCallersGoroutinePropagates: a hedge that makes one attempt (under
// another owner) runs it on the caller's goroutine, where a panic is the caller's own.
func TestHedge_APanicOnTheCallersGoroutinePropagates(t *testing.T) {
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: time.Second}))
	owned := policy.Must(policy.Wrap(h))
	outer := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2}))))
	boom := errors.New("boom")
	require.PanicsWithValue(t, boom, func() {
		_ = outer.Do(context.Background(), func(ctx context.Context) error {
			return owned.Do(ctx, func(context.Context) error { panic(boom) })
		})
	})
}
