package breaker_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
)

// outage is what a breaker did around one outage of its dependency.
type outage struct {
	probes    int           // calls that reached the dependency while it was down, once the breaker had opened
	back      time.Duration // from the return to the start of the first call that succeeded
	share     float64       // successes among the calls of the second after that one
	openTimes int           // transitions to open during the outage
}

// Faults of the dependency while it is down.
const (
	refuses = iota // fails at once
	hangs          // answers nothing: the call ends at its 2 s deadline
)

// letGo drives a breaker of o, inside a 2 s deadline, at 50 calls/s: 2 s healthy, an
// outage of down, then at least 3 s healthy. The bubble's clock makes a 10-minute outage
// instant.
func letGo(t *testing.T, o breaker.Options, down time.Duration, fault int) outage {
	t.Helper()
	var res outage
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		opened := false
		o.OnStateChange = func(_ string, _, to breaker.State) {
			if to == breaker.StateOpen {
				mu.Lock()
				res.openTimes++
				opened = true
				mu.Unlock()
			}
		}
		o.Name = "db"
		b := must(breaker.New(o))
		p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), b))
		start := time.Now()
		from, to := start.Add(2*time.Second), start.Add(2*time.Second+down)
		dep := func(ctx context.Context) error {
			if now := time.Now(); now.Before(from) || !now.Before(to) {
				return nil
			}
			mu.Lock()
			if opened {
				res.probes++
			}
			mu.Unlock()
			if fault == hangs {
				<-ctx.Done()
				return ctx.Err()
			}
			return errDown
		}
		type call struct {
			at time.Time
			ok bool
		}
		tail := 3*time.Second + 2*max(o.MaxOpenTimeout, breaker.DefaultOpenTimeout)
		calls := make([]call, int((2*time.Second+down+tail)/(20*time.Millisecond)))
		var wg sync.WaitGroup
		for i := range calls {
			at := time.Now()
			wg.Go(func() {
				err := p.Do(context.Background(), dep)
				calls[i] = call{at: at, ok: err == nil}
			})
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
		first := -1
		for i, c := range calls {
			if c.ok && !c.at.Before(to) {
				first = i
				break
			}
		}
		require.NotEqual(t, -1, first, "no call succeeded after the outage")
		res.back = calls[first].at.Sub(to)
		n, ok := 0, 0
		for _, c := range calls[first:] {
			if c.at.Sub(calls[first].at) >= time.Second {
				break
			}
			n++
			if c.ok {
				ok++
			}
		}
		res.share = float64(ok) / float64(n)
	})
	return res
}

// TestBreaker_LetsGoWithinASecondOfAnyOutage: with default Options, traffic is back
// within a second of the dependency's return for outages from 1 s to 10 min, nearly
// every call of the next second succeeds, and the dead dependency sees about one
// probe a second (one each 750 to 825 ms).
func TestBreaker_LetsGoWithinASecondOfAnyOutage(t *testing.T) {
	for _, down := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, time.Minute, 10 * time.Minute} {
		for _, fault := range []int{refuses, hangs} {
			res := letGo(t, breaker.Options{}, down, fault)
			perSecond := float64(res.probes) / down.Seconds()
			t.Logf("down %v (fault %d): back after %v, %.0f %% ok in the next second, %d probes (%.2f/s), %d opens",
				down, fault, res.back, res.share*100, res.probes, perSecond, res.openTimes)
			require.LessOrEqual(t, res.back, time.Second, "down %v: traffic back within 1 s of the return", down)
			require.GreaterOrEqual(t, res.share, 0.9, "down %v: ≥ 90 %% of the next second's calls succeed", down)
			// Once open, one probe an interval (750 ms at least).
			require.LessOrEqual(t, res.probes, int(down/breaker.DefaultOpenTimeout)+1, "down %v: at most one probe each 750 ms", down)
			if down >= time.Minute {
				require.Greater(t, perSecond, 1.0, "down %v: the probes go on", down)
				require.Less(t, perSecond, 1.4, "down %v: about one probe a second", down)
			}
		}
	}
}

// TestBreaker_AHungProbeHoldsBackNothingButItself: a probe that waits for its 2 s
// deadline does not keep the next probe from going an interval after it.
func TestBreaker_AHungProbeHoldsBackNothingButItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", OpenJitter: -1, ConsecutiveFailures: 1}))
		p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), b))
		require.Error(t, p.Do(context.Background(), fail))
		time.Sleep(breaker.DefaultOpenTimeout)

		hung := make(chan error)
		go func() {
			hung <- p.Do(context.Background(), func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		}()
		synctest.Wait()
		var rej *policy.RejectError
		require.ErrorAs(t, p.Do(context.Background(), ok), &rej, "the probe is out: the next call is refused")
		require.Equal(t, breaker.ReasonHalfOpen, rej.Reason)
		require.Equal(t, breaker.DefaultOpenTimeout, rej.RetryAfter, "come back once the probe has had OpenTimeout to answer")
		next, open := b.OpenNow()
		require.True(t, open)
		require.Equal(t, breaker.DefaultOpenTimeout, next, "the next probe may go an interval after the first")

		time.Sleep(breaker.DefaultOpenTimeout)
		require.NoError(t, p.Do(context.Background(), ok), "the next probe goes while the first still hangs, and closes the breaker")
		require.Equal(t, breaker.StateClosed, b.State())
		require.ErrorIs(t, <-hung, context.DeadlineExceeded)
		require.Equal(t, breaker.StateClosed, b.State(), "the hung probe's late failure is stale: the breaker stays closed")
	})
}

// TestBreaker_ProbesOfAnIntervalAndTheirOutcomes: HalfOpenProbes calls go through each
// interval; a failure reopens the breaker until an interval after the probe went
// out; an excluded error gives its turn to the next call.
func TestBreaker_ProbesOfAnIntervalAndTheirOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", OpenJitter: -1, ConsecutiveFailures: 1, OpenTimeout: time.Second}))
		p := policy.Must(policy.Wrap(b))
		require.Error(t, p.Do(context.Background(), fail))
		time.Sleep(time.Second)

		// An excluded error decides nothing: the next call probes at once.
		require.ErrorIs(t, p.Do(context.Background(), func(context.Context) error { return context.Canceled }), context.Canceled)
		require.Equal(t, breaker.StateHalfOpen, b.State())
		calls := 0
		slow := func(context.Context) error { calls++; time.Sleep(300 * time.Millisecond); return errDown }
		require.ErrorIs(t, p.Do(context.Background(), slow), errDown)
		require.Equal(t, 1, calls, "the excluded probe gave its turn")

		// The failed probe went out 300 ms ago: open for the rest of its interval.
		require.Equal(t, breaker.StateOpen, b.State())
		var rej *policy.RejectError
		require.ErrorAs(t, p.Do(context.Background(), ok), &rej)
		require.Equal(t, breaker.ReasonOpen, rej.Reason)
		require.Equal(t, 700*time.Millisecond, rej.RetryAfter)

		// A probe slower than the interval: when it fails, the next call probes.
		time.Sleep(700 * time.Millisecond)
		require.ErrorIs(t, p.Do(context.Background(), func(context.Context) error { time.Sleep(1500 * time.Millisecond); return errDown }), errDown)
		require.Equal(t, breaker.StateHalfOpen, b.State())
		require.NoError(t, p.Do(context.Background(), ok))
		require.Equal(t, breaker.StateClosed, b.State())
	})
}

// TestBreaker_LongerIntervalsWhenAsked: MaxOpenTimeout above OpenTimeout doubles the
// interval after each failed probe, up to it.
func TestBreaker_LongerIntervalsWhenAsked(t *testing.T) {
	res := letGo(t, breaker.Options{OpenTimeout: time.Second, MaxOpenTimeout: 30 * time.Second}, time.Minute, refuses)
	t.Logf("1 s doubling to 30 s, down 1m: back after %v, %d probes", res.back, res.probes)
	require.Less(t, res.probes, 8, "probes grow rarer: 1, 2, 4, 8, 16, 30 s apart")
}
