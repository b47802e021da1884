package coalesce_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/backstop-go/backstop/clock"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/coalesce"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy/policytest"
)

// TestGet_OnTheSystemClockHitsUntilTheTTL: on the real clock (read on its monotonic
// side alone), a value is served from the cache until its TTL, then loaded again.
func TestGet_OnTheSystemClockHitsUntilTheTTL(t *testing.T) {
	for _, clock := range []clock.Clock{nil, clock.System()} {
		ctx := context.Background()
		o := &origin{}
		c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, Clock: clock, TTL: time.Hour}))
		for range 3 {
			v, err := c.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, "k#1", v, "one load, then hits within the TTL")
		}
		require.Equal(t, uint64(2), c.Stats().Hits)
		c.Close()

		o = &origin{}
		c = policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, Clock: clock, TTL: time.Microsecond,
			Jitter: -1, StaleWhileRefresh: -1}))
		v, _ := c.Get(ctx, "k")
		require.Equal(t, "k#1", v)
		for start := time.Now(); time.Since(start) <= 10*time.Microsecond; { // let the TTL run out
		}
		v, _ = c.Get(ctx, "k")
		require.Equal(t, "k#2", v, "a load once the TTL ran out")
		c.Close()
	}
}

// TestGet_AHugeTTLDoesNotOverflow: a TTL and windows near the largest duration
// saturate rather than wrap into the past.
func TestGet_AHugeTTLDoesNotOverflow(t *testing.T) {
	o := &origin{}
	clock := policytest.NewClock(t0)
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, Clock: clock, TTL: math.MaxInt64 - 1, Jitter: -1,
		StaleWhileRefresh: math.MaxInt64, StaleIfError: math.MaxInt64}))
	defer c.Close()
	ctx := context.Background()
	_, err := c.Get(ctx, "k")
	require.NoError(t, err)
	clock.Advance(100 * 365 * 24 * time.Hour)
	v, err := c.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "k#1", v, "still fresh a century later")
	require.Equal(t, int64(1), o.calls.Load())
}

func TestGet_AHitDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	o := &origin{}
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, TTL: time.Hour}))
	defer c.Close()
	ctx := context.Background()
	_, err := c.Get(ctx, "k")
	require.NoError(t, err)
	if n := testing.AllocsPerRun(100, func() { _, _ = c.Get(ctx, "k") }); n != 0 {
		t.Errorf("a hit allocates %v times; want 0", n)
	}
}
