package throttle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/race"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
	"github.com/backstop-go/backstop/throttle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// overloaded is a backend's refusal of work, as policyhttp reports a 429.
type overloaded struct{}

func (overloaded) Error() string        { return "429 Too Many Requests" }
func (overloaded) Is(target error) bool { return target == policy.ErrRejected }

func accept(context.Context) error { return nil }
func refuse(context.Context) error { return overloaded{} }

func TestConformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy { return policy.Must(throttle.New(throttle.Options{Name: "db"})) })
}

func TestThrottle_TheSREBookFormula(t *testing.T) {
	clock := policytest.NewClock(t0)
	// A draw of 0.5: a request is refused when the probability is above one half.
	th := policy.Must(throttle.New(throttle.Options{Name: "db", Clock: clock, Rand: policytest.NewRand(0.5)}))
	p := policy.Must(policy.Wrap(th))

	for range 100 {
		require.NoError(t, p.Do(context.Background(), accept))
	}
	require.Equal(t, 0.0, th.Probability(), "a backend that accepts everything: nothing refused")

	// The backend now refuses everything it is sent.
	sent := 0
	for range 1000 {
		err := p.Do(context.Background(), func(ctx context.Context) error { sent++; return refuse(ctx) })
		require.ErrorIs(t, err, policy.ErrRejected)
	}
	requests, accepts := th.Counts()
	require.Equal(t, int64(1100), requests, "refused requests count as requests")
	require.Equal(t, int64(100), accepts)
	// Sending stops once (requests − 2 × 100) / (requests + 1) > 0.5: from the 403rd request on.
	require.Equal(t, 302, sent, "the backend saw 302 of the 1000: the rest were refused locally")
	require.InDelta(t, (1100.0-200)/1101, th.Probability(), 1e-12)

	err := p.Do(context.Background(), accept)
	require.ErrorIs(t, err, throttle.ErrThrottled)
	require.ErrorIs(t, err, policy.ErrRejected)
	require.Contains(t, err.Error(), "db")
	var rej *policy.RejectError
	require.ErrorAs(t, err, &rej, "a throttle's refusal is a *policy.RejectError")
	require.Equal(t, throttle.Kind, rej.Policy)
	require.Equal(t, "db", rej.Name)
	require.Equal(t, "throttled", rej.Reason)
	require.Zero(t, rej.RetryAfter, "a throttle names no time")
	require.Equal(t, throttle.ErrThrottled, rej.Err)
	require.Same(t, rej, p.Do(context.Background(), accept), "every refusal shares one error")

	// Two minutes later the history is gone: requests flow again.
	clock.Advance(throttle.DefaultWindow)
	require.Equal(t, 0.0, th.Probability())
	require.NoError(t, p.Do(context.Background(), accept))
}

// TestThrottle_RefusalDoesNotAllocate: every refusal returns the throttle's one error.
func TestThrottle_RefusalDoesNotAllocate(t *testing.T) {
	th := policy.Must(throttle.New(throttle.Options{Name: "db", Clock: policytest.NewClock(t0), Rand: policytest.NewRand(0)}))
	run := th.Bind(policy.RunnerFunc(func(ctx context.Context, fn policy.Func) error { return fn(ctx) }), policy.Env{})
	ctx := context.Background()
	require.ErrorIs(t, run.Run(ctx, refuse), policy.ErrRejected, "the backend refuses: p = 1/2 from now on")
	require.ErrorIs(t, run.Run(ctx, accept), throttle.ErrThrottled, "a draw of 0 is below any p > 0")
	if race.Enabled {
		return // the race detector allocates
	}
	if n := testing.AllocsPerRun(1000, func() { _ = run.Run(ctx, accept) }); n != 0 {
		t.Errorf("a refusal allocates %v per call; want 0", n)
	}
}

func TestThrottle_SendsAboutKTimesWhatTheBackendAccepts(t *testing.T) {
	// The client wants 100 requests a second; the backend accepts 10 a second and
	// refuses the rest. Once two minutes of history are in, the client sends about
	// K × 10 = 20 a second and refuses the other 80 itself.
	clock := policytest.NewClock(t0)
	th := policy.Must(throttle.New(throttle.Options{Name: "db", Clock: clock, Rand: jitter.Seeded(1, 2)}))
	p := policy.Must(policy.Wrap(th))
	sent := 0
	for second := range 600 {
		capacity := 10
		for range 100 {
			_ = p.Do(context.Background(), func(context.Context) error {
				if second >= 300 {
					sent++
				}
				if capacity > 0 {
					capacity--
					return nil
				}
				return overloaded{}
			})
		}
		clock.Advance(time.Second)
	}
	perSecond := float64(sent) / 300
	t.Logf("sent %.1f requests a second", perSecond)
	require.InDelta(t, 20, perSecond, 2, "sent per second in the steady state")
}

func TestThrottle_CallersCancellationCountsNeitherWay(t *testing.T) {
	th := policy.Must(throttle.New(throttle.Options{Name: "db", Rand: policytest.NewRand(0.99)}))
	p := policy.Must(policy.Wrap(th))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, p.Do(ctx, func(ctx context.Context) error { return ctx.Err() }), context.Canceled)
	requests, accepts := th.Counts()
	require.Zero(t, requests)
	require.Zero(t, accepts)
	// A deadline the backend did not meet is a refusal of the work.
	require.False(t, throttle.DefaultAccepted(context.DeadlineExceeded))
	require.True(t, throttle.DefaultAccepted(errors.New("500 Internal Server Error")), "it answered: accepted")
}

func TestThrottle_InsideARetryItsRefusalIsNotRetried(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	// Every error is a refusal here: a 503 the retry would retry.
	th := policy.Must(throttle.New(throttle.Options{Name: "db", Clock: clock, Rand: policytest.NewRand(0),
		Accepted: func(err error) bool { return err == nil }}))
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 5, Clock: clock})), th))
	attempts := 0
	err := p.Do(context.Background(), func(context.Context) error { attempts++; return fault.Retryable(errors.New("503")) })
	require.ErrorIs(t, err, throttle.ErrThrottled)
	require.Equal(t, 1, attempts, "after one refused attempt (p = 1/2), the throttle refuses the retry and the retry stops")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, 2, re.Attempts)
}

func TestThrottle_OrderingRules(t *testing.T) {
	th := policy.Must(throttle.New(throttle.Options{Name: "db"}))
	_, err := policy.Wrap(th, policy.Must(shed.New(shed.Options{}))) //backstopvet:ignore wraporder (the test checks the refusal)
	require.ErrorIs(t, err, policy.ErrOrder, "a throttle never stands outside a shedder (O5)")
	_, err = policy.Wrap(policy.Must(retry.New(retry.Options{})), th)
	require.NoError(t, err)
	_, err = policy.Wrap(th, policy.Must(retry.New(retry.Options{})))
	require.NoError(t, err)
	require.Equal(t, "throttle", th.Placement().Kind)
}

func TestNew_RefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		o    throttle.Options
		want string
	}{
		{"", throttle.Options{}, "name is empty"},
		{"db", throttle.Options{K: 0.5}, "K is 0.5"},
		{"db", throttle.Options{K: -1}, "K is -1"},
		{"db", throttle.Options{Window: 5}, "Window is 5ns"},
	} {
		c.o.Name = c.name
		_, err := throttle.New(c.o)
		require.ErrorIs(t, err, throttle.ErrInvalidOptions)
		require.ErrorContains(t, err, c.want)
	}
}
