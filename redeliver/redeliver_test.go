package redeliver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/redeliver"
	"github.com/backstop-go/backstop/retry"
)

var errJob = errors.New("job failed")

func TestDecide(t *testing.T) {
	p := policy.Must(redeliver.New(redeliver.Options{Rand: policytest.NewRand(0.5)}))
	require.Equal(t, redeliver.Decision{Reason: redeliver.ReasonSuccess}, p.Decide(3, nil))
	// Full jitter at rand 0.5: half of min(15 min, 10 s · 2^(n−1)).
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second} {
		require.Equal(t, redeliver.Decision{Retry: true, Delay: want, Reason: redeliver.ReasonRetry}, p.Decide(n, errJob), "delivery %d", n)
	}
	require.Equal(t, redeliver.Decision{DeadLetter: true, Reason: redeliver.ReasonExhausted}, p.Decide(5, errJob), "the fifth failure")
	require.Equal(t, redeliver.Decision{DeadLetter: true, Reason: redeliver.ReasonPermanent}, p.Decide(1, fault.Permanent(errJob)),
		"a permanent error dead-letters at once")
	d := p.Decide(1, fault.After(errJob, time.Minute))
	require.Equal(t, time.Minute, d.Delay, "a server's hint sets the least delay")
}

func TestDecide_SQSLimitAndCap(t *testing.T) {
	p := policy.Must(redeliver.New(redeliver.Options{Base: time.Hour, Cap: 24 * time.Hour, MaxDeliveries: 100, MaxDelay: redeliver.SQSMaxDelay,
		Strategy: retry.None{}}))
	require.Equal(t, 4*time.Hour, p.Decide(3, errJob).Delay)
	require.Equal(t, redeliver.SQSMaxDelay, p.Decide(10, errJob).Delay, "never past SQS's 12 h visibility limit")
	require.Equal(t, redeliver.SQSMaxDelay, p.Decide(1, fault.After(errJob, 48*time.Hour)).Delay, "hints too")
}

func TestDecide_DecorrelatedChainsOnThePreviousWindow(t *testing.T) {
	p := policy.Must(redeliver.New(redeliver.Options{Base: time.Second, Cap: time.Hour, Strategy: retry.Decorrelated{}, Rand: policytest.NewRand(0.999999)}))
	// delivery 3: the previous window is 2 s, so the delay tops out at 3 × 2 s.
	require.InDelta(t, float64(6*time.Second), float64(p.Decide(3, errJob).Delay), float64(time.Millisecond))
}

// Package retry's strategies are redeliver.Backoffs.
var (
	_ redeliver.Backoff = retry.Full{}
	_ redeliver.Backoff = retry.Equal{}
	_ redeliver.Backoff = retry.Decorrelated{}
	_ redeliver.Backoff = retry.None{}
	_ redeliver.Backoff = retry.GRPC{}
)

// TestDecide_DefaultIsRetryFull: a nil Strategy draws the same delays as retry.Full,
// for every delivery count and draw, up to and past the cap.
func TestDecide_DefaultIsRetryFull(t *testing.T) {
	for _, v := range []float64{0, 0.25, 0.5, 0.999999} {
		def := policy.Must(redeliver.New(redeliver.Options{MaxDeliveries: 100, Rand: policytest.NewRand(v)}))
		full := policy.Must(redeliver.New(redeliver.Options{MaxDeliveries: 100, Rand: policytest.NewRand(v), Strategy: retry.Full{}}))
		for n := 1; n < 100; n++ {
			require.Equal(t, full.Decide(n, errJob), def.Decide(n, errJob), "delivery %d, rand %v", n, v)
		}
	}
}

func TestNew_RefusesBadOptions(t *testing.T) {
	for _, tt := range []struct {
		o    redeliver.Options
		want string
	}{
		{redeliver.Options{Base: -1}, "Base is -1ns"},
		{redeliver.Options{Base: time.Hour, Cap: time.Minute}, "Cap is 1m0s, below Base 1h0m0s"},
		{redeliver.Options{MaxDeliveries: -2}, "MaxDeliveries is -2"},
		{redeliver.Options{MaxDelay: -time.Second}, "MaxDelay is -1s"},
	} {
		_, err := redeliver.New(tt.o)
		if !errors.Is(err, redeliver.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v; want ErrInvalidOptions saying %q", tt.o, err, tt.want)
		}
	}
	p := policy.Must(redeliver.New(redeliver.Options{ShouldRetry: func(err error) bool { return !errors.Is(err, errJob) }}))
	require.True(t, p.Decide(1, errJob).DeadLetter, "ShouldRetry replaces the default")
}

// TestCounts: every decision is counted once: deliveries, dead-letters by reason, and
// redeliveries by delay bucket (cumulative) with their sum.
func TestCounts(t *testing.T) {
	p := policy.Must(redeliver.New(redeliver.Options{Rand: policytest.NewRand(0.5), MaxDeliveries: 4}))
	require.Len(t, redeliver.DelayBounds(), 7)
	redeliver.DelayBounds()[0] = time.Hour // a copy: changing it changes nothing
	require.Equal(t, time.Second, redeliver.DelayBounds()[0])
	p.Decide(1, nil)
	p.Decide(1, errJob)                           // 5 s
	p.Decide(2, errJob)                           // 10 s
	p.Decide(3, errJob)                           // 20 s
	p.Decide(1, fault.After(errJob, 2*time.Hour)) // a hint of 2 h
	p.Decide(4, errJob)                           // exhausted
	p.Decide(1, fault.Permanent(errJob))          // permanent
	c := p.Counts()
	require.Equal(t, uint64(7), c.Deliveries)
	require.Equal(t, uint64(1), c.Permanent)
	require.Equal(t, uint64(1), c.Exhausted)
	//                    ≤1s ≤10s ≤1m ≤5m ≤15m ≤1h ≤12h all
	require.Equal(t, []uint64{0, 2, 3, 3, 3, 3, 4, 4}, c.Retries)
	require.Equal(t, 35*time.Second+2*time.Hour, c.DelaySum)
	bounds, cumulative, sum := p.Delays()
	require.Equal(t, redeliver.DelayBounds(), bounds, "Delays buckets by DelayBounds")
	require.Equal(t, c.Retries, cumulative)
	require.Equal(t, c.DelaySum, sum)
	deliveries, permanent, exhausted := p.Decisions()
	require.Equal(t, [3]uint64{7, 1, 1}, [3]uint64{deliveries, permanent, exhausted})
}
