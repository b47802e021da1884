package breaker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/policy"
)

// After the dependency returns, a breaker with SlowStart lets a share of calls through
// that grows from 10 % to all of them over SlowStart; the calls it holds back are
// refused at once (not counted as failures) and asked back after a tenth of the ramp.
func TestBreaker_SlowStartRampsTheTrafficUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: 100 * time.Millisecond,
			OpenJitter: -1, SlowStart: time.Second, Rand: jitter.Seeded(1, 2)}))
		r := policy.Must(policy.Wrap(b))
		require.ErrorIs(t, r.Do(context.Background(), fail), errDown)
		time.Sleep(100*time.Millisecond + time.Nanosecond)
		require.NoError(t, r.Do(context.Background(), ok), "the probe")
		require.Equal(t, breaker.StateClosed, b.State())

		// share returns the share of 1 000 calls let through during the next 100 ms.
		share := func() float64 {
			t.Helper()
			through := 0
			for range 10 {
				for range 100 {
					err := r.Do(context.Background(), ok)
					if err == nil {
						through++
						continue
					}
					var rej *policy.RejectError
					require.ErrorAs(t, err, &rej)
					require.Equal(t, breaker.ReasonSlowStart, rej.Reason, "a call held back by the ramp: %v", err)
					require.Equal(t, 100*time.Millisecond, rej.RetryAfter, "a tenth of SlowStart")
					require.ErrorIs(t, err, breaker.ErrOpen)
					require.ErrorIs(t, err, policy.ErrRejected)
				}
				time.Sleep(10 * time.Millisecond)
			}
			return float64(through) / 1000
		}
		if s := b.Snapshot(time.Now()); s.SlowStart < 0.1 || s.SlowStart > 0.11 || s.RetryAfter != 100*time.Millisecond {
			t.Errorf("Snapshot at the start of the ramp: SlowStart %v, RetryAfter %v; want 10 %% and 100ms", s.SlowStart, s.RetryAfter)
		}
		var shares []float64
		for range 10 {
			shares = append(shares, share())
		}
		// The ramp's mean share in each tenth: 10 % + 90 % × (k + 0.45) / 10.
		for k, got := range shares {
			want := 0.1 + 0.9*(float64(k)+0.45)/10
			require.InDelta(t, want, got, 0.06, "share let through in tenth %d of the ramp: %v", k, shares)
		}
		for range 100 {
			require.NoError(t, r.Do(context.Background(), ok), "after the ramp, every call")
		}
		if s := b.Snapshot(time.Now()); s.SlowStart != 0 || s.RetryAfter != 0 {
			t.Errorf("Snapshot after the ramp: SlowStart %v, RetryAfter %v; want 0 and 0", s.SlowStart, s.RetryAfter)
		}
		require.Equal(t, breaker.StateClosed, b.State(), "held-back calls are not failures")
	})
}

// A failure during the ramp trips the breaker as in the closed state, and the ramp of
// the next recovery starts again from 10 %.
func TestBreaker_SlowStartEndsWhenTheBreakerTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: 100 * time.Millisecond,
			OpenJitter: -1, SlowStart: time.Second, Rand: jitter.Seeded(3, 4)}))
		r := policy.Must(policy.Wrap(b))
		require.ErrorIs(t, r.Do(context.Background(), fail), errDown)
		time.Sleep(100*time.Millisecond + time.Nanosecond)
		require.NoError(t, r.Do(context.Background(), ok), "the probe")
		time.Sleep(900 * time.Millisecond) // nine tenths of the ramp: most calls go through
		var err error
		for err == nil || errors.Is(err, breaker.ErrOpen) {
			err = r.Do(context.Background(), fail)
		}
		require.ErrorIs(t, err, errDown)
		require.Equal(t, breaker.StateOpen, b.State(), "a failure in the ramp trips it")
		time.Sleep(100*time.Millisecond + time.Nanosecond) // a trip from closed: the first open time again
		require.NoError(t, r.Do(context.Background(), ok), "the probe")
		through := 0
		for range 1000 {
			if r.Do(context.Background(), ok) == nil {
				through++
			}
		}
		require.Less(t, through, 200, "the next ramp starts again from 10 %%: %d of 1000 through", through)
	})
}

func TestNew_RefusesANegativeSlowStart(t *testing.T) {
	_, err := breaker.New(breaker.Options{Name: "db", SlowStart: -time.Second})
	require.ErrorIs(t, err, breaker.ErrInvalidOptions)
	require.ErrorContains(t, err, "SlowStart is -1s")
}
