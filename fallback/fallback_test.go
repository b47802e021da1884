package fallback_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errDown = errors.New("503 from prices")
)

func TestConformance(t *testing.T) {
	// Bound alone and run without Get, the fallback has no value to hand over: it
	// passes every result through, as the suite wants of any stage.
	policytest.Run(t, func() policy.Policy {
		return policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: 7}))
	})
}

func TestNew_RefusesBadOptionsNamingTheField(t *testing.T) {
	_, err := fallback.New(fallback.Options[int]{Name: ""})
	require.ErrorIs(t, err, fallback.ErrInvalidOptions)
	require.ErrorContains(t, err, "name is empty")
	_, err = fallback.New(fallback.Options[int]{Name: "prices", LastGood: -time.Second})
	require.ErrorIs(t, err, fallback.ErrInvalidOptions)
	require.ErrorContains(t, err, "LastGood is -1s")
}

// recorder keeps the fallback events of a pipeline.
type recorder struct{ events []event.Event }

func (r *recorder) Observe(e event.Event) {
	if e.Kind == event.Fallback {
		r.events = append(r.events, e)
	}
}

func TestFallback_AnswersTheRetrysLastFailureWithAValue(t *testing.T) {
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: 42}))
	rec := &recorder{}
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(fb, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock})), policy.Name("shop"), policy.Observe(rec)))
	attempts := 0
	v, err := fb.Get(context.Background(), p, func(context.Context) (int, error) { attempts++; return 0, fault.Retryable(errDown) })
	require.NoError(t, err)
	require.Equal(t, 42, v)
	require.Equal(t, 3, attempts, "the retry inside the fallback saw every failure")
	require.Len(t, rec.events, 1)
	e := rec.events[0]
	require.Equal(t, "shop", e.Pipeline)
	require.Equal(t, "prices", e.Source)
	require.Equal(t, policy.OutcomeFailure, e.Reason)
	require.Equal(t, fallback.FromValue, e.To)
	require.ErrorIs(t, e.Err, errDown)
	require.Equal(t, uint64(1), fb.Answered())

	v, err = fb.Get(context.Background(), p, func(context.Context) (int, error) { return 5, nil })
	require.NoError(t, err)
	require.Equal(t, 5, v, "a call that succeeds returns its own value")
}

func TestFallback_FuncSeesTheFailureAndMayFailToo(t *testing.T) {
	errFallback := errors.New("no cache either")
	fb := policy.Must(fallback.New(fallback.Options[string]{Name: "prices", Func: func(_ context.Context, err error) (string, error) {
		if errors.Is(err, errDown) {
			return "cached", nil
		}
		return "", errFallback
	}}))
	p := policy.Must(policy.Wrap(fb))
	v, err := fb.Get(context.Background(), p, func(context.Context) (string, error) { return "", errDown })
	require.NoError(t, err)
	require.Equal(t, "cached", v)

	other := errors.New("400")
	_, err = fb.Get(context.Background(), p, func(context.Context) (string, error) { return "", other })
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, other, "the call's failure is found in the error")
	require.ErrorIs(t, err, errFallback, "and so is the fallback's")
	require.Equal(t, "fallback: prices: the fallback failed (no cache either) after the call failed: 400", err.Error())
}

func TestFallback_AnswersARefusal(t *testing.T) {
	lim := policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 0.001, Burst: 1, Mode: ratelimit.Refuse, Clock: policytest.NewClock(t0)}))
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
	rec := &recorder{}
	p := policy.Must(policy.Wrap(fb, lim, policy.Observe(rec)))
	_, err := fb.Get(context.Background(), p, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	v, err := fb.Get(context.Background(), p, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	require.Equal(t, -1, v, "the rate limiter refused: the fallback answered")
	require.Equal(t, policy.OutcomeRejected, rec.events[0].Reason)
	require.ErrorIs(t, rec.events[0].Err, ratelimit.ErrLimited)
}

func TestFallback_AnswersTheDeadlineInsideIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
		rec := &recorder{}
		p := policy.Must(policy.Wrap(fb, policy.Must(deadline.New(deadline.Options{Timeout: 50 * time.Millisecond})), policy.Observe(rec)))
		v, err := fb.Get(context.Background(), p, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		require.NoError(t, err)
		require.Equal(t, -1, v)
		require.Equal(t, policy.OutcomeDeadline, rec.events[0].Reason)
	})
}

func TestFallback_NotWhenTheCallerHasGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
		p := policy.Must(policy.Wrap(fb))

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := fb.Get(ctx, p, func(ctx context.Context) (int, error) { return 0, ctx.Err() })
		require.ErrorIs(t, err, context.Canceled, "the caller cancelled: its error, no answer")

		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err = fb.Get(ctx, p, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() })
		require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's own deadline passed: no answer")
		require.Zero(t, fb.Answered())
	})
}

func TestFallback_UnderAnOwnerLeavesItTheFailuresItMayRetry(t *testing.T) {
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
	p := policy.Must(policy.Wrap(fb))
	lim := policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 0.001, Burst: 1, Mode: ratelimit.Refuse, Clock: policytest.NewClock(t0)}))
	require.NoError(t, policy.Must(policy.Wrap(lim)).Do(context.Background(), func(context.Context) error { return nil })) // its one token spent
	refused := policy.Must(policy.Wrap(lim)).Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, refused, policy.ErrRejected)

	for _, owned := range []struct {
		name string
		ctx  context.Context
	}{
		{"in this process", callpath.WithAttempt(context.Background(), 1)},
		{"upstream", callpath.WithUpstreamAttempt(context.Background(), 2)},
	} {
		for _, tt := range []struct {
			name     string
			err      error
			answered bool
		}{
			{"a retryable failure goes up to the owner", fault.Retryable(errDown), false},
			{"a server's hint goes up to the owner", fault.After(errDown, time.Second), false},
			{"a timeout goes up to the owner", timeout{}, false},
			{"a plain failure is answered", errDown, true},
			{"a permanent failure is answered", fault.Permanent(fault.Retryable(errDown)), true},
			{"a refusal is answered: no owner retries it", refused, true},
		} {
			v, err := fb.Get(owned.ctx, p, func(context.Context) (int, error) { return 0, tt.err })
			if tt.answered {
				require.NoError(t, err, "owned %s: %s", owned.name, tt.name)
				require.Equal(t, -1, v)
			} else {
				require.ErrorIs(t, err, tt.err, "owned %s: %s", owned.name, tt.name)
			}
		}
	}
}

type timeout struct{}

func (timeout) Error() string { return "i/o timeout" }
func (timeout) Timeout() bool { return true }

func TestFallback_StepsAsideWithoutGet(t *testing.T) {
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
	p := policy.Must(policy.Wrap(fb))
	require.ErrorIs(t, p.Do(context.Background(), func(context.Context) error { return errDown }), errDown,
		"under Do there is no value to hand over: the failure is returned")
	v, err := policy.Get(context.Background(), p, func(context.Context) (int, error) { return 0, errDown })
	require.ErrorIs(t, err, errDown, "nor under policy.Get: never a zero value with a nil error")
	require.Zero(t, v)
	require.Zero(t, fb.Answered())
}

func TestFallback_LastGoodValueWhileFresh(t *testing.T) {
	clock := policytest.NewClock(t0)
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1, LastGood: time.Minute, Clock: clock}))
	rec := &recorder{}
	p := policy.Must(policy.Wrap(fb, policy.Observe(rec)))
	fail := func(context.Context) (int, error) { return 0, errDown }

	v, err := fb.Get(context.Background(), p, fail)
	require.NoError(t, err)
	require.Equal(t, -1, v, "no good value yet: Value answers")

	_, err = fb.Get(context.Background(), p, func(context.Context) (int, error) { return 10, nil })
	require.NoError(t, err)
	clock.Advance(59 * time.Second)
	v, _ = fb.Get(context.Background(), p, fail)
	require.Equal(t, 10, v, "59s old: the last good value answers")
	require.Equal(t, fallback.FromLastGood, rec.events[1].To)

	clock.Advance(time.Second)
	v, _ = fb.Get(context.Background(), p, fail)
	require.Equal(t, -1, v, "a minute old: too old, Value answers")
	require.Equal(t, fallback.FromValue, rec.events[2].To)
}

func TestFallback_HandleReplacesTheDefault(t *testing.T) {
	errNotFound := errors.New("404")
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1,
		Handle: func(_ context.Context, err error) bool { return !errors.Is(err, errNotFound) }}))
	p := policy.Must(policy.Wrap(fb))
	_, err := fb.Get(context.Background(), p, func(context.Context) (int, error) { return 0, errNotFound })
	require.ErrorIs(t, err, errNotFound)
	v, err := fb.Get(context.Background(), p, func(context.Context) (int, error) { return 0, errDown })
	require.NoError(t, err)
	require.Equal(t, -1, v)
}

func TestFallback_StandsOutsideTheRetry(t *testing.T) {
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices"}))
	_, err := policy.Wrap(policy.Must(retry.New(retry.Options{})), fb) //backstopvet:ignore wraporder (Wrap must refuse it)
	require.ErrorIs(t, err, policy.ErrOrder)
	require.EqualError(t, err, "policy: O7: fallback at position 2 is inside retry at position 1; move the fallback outward, before every stage whose failures it answers")
}

func TestFallback_Explain(t *testing.T) {
	st := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: 42, LastGood: time.Minute})).ExplainStage()
	require.Equal(t, `fallback "prices": answers a failed call with the last good value while younger than 1m0s, else a fixed value (42); `+
		`it answers every failure, refusals and the deadline included, except when the caller has gone, or when a retry owner further up may retry it`, st.Summary)
	require.Empty(t, st.Refusal, "a fallback never ends a call without running it")
}

func TestFallback_GetAllocatesTheCallAndItsFunc(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
	p := policy.Must(policy.Wrap(fb))
	ctx := context.Background()
	ok := func(context.Context) (int, error) { return 1, nil }
	fail := func(context.Context) (int, error) { return 0, errDown }
	if got := testing.AllocsPerRun(1000, func() { _, _ = fb.Get(ctx, p, ok) }); got != 2 {
		t.Errorf("fb.Get of a call that succeeds allocates %v; want 2 (the call's context and its Func)", got)
	}
	if got := testing.AllocsPerRun(1000, func() { _, _ = fb.Get(ctx, p, fail) }); got != 2 {
		t.Errorf("fb.Get of a call answered by Value allocates %v; want 2", got)
	}
}

// Under a hedge two attempts run at once; when both succeed, Get keeps the winner's
// value and no other write races it (run with -race).
func TestFallback_GetUnderAHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1, LastGood: time.Minute}))
		p := policy.Must(policy.Wrap(fb, policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: time.Millisecond}))))
		for range 10 {
			v, err := fb.Get(context.Background(), p, func(ctx context.Context) (int, error) {
				n, _, _ := callpath.Attempt(ctx)
				time.Sleep(3 * time.Millisecond)
				return n, nil
			})
			require.NoError(t, err)
			require.Contains(t, []int{1, 2}, v)
		}
	})
}
