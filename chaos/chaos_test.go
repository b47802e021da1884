package chaos_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/chaos"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0          = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errInjected = errors.New("injected")
)

func TestConformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy {
		return policy.Must(chaos.New(chaos.Options{Probability: 1, Latency: time.Millisecond}))
	})
}

func TestNew_RefusesBadOptions(t *testing.T) {
	for _, tt := range []struct {
		o    chaos.Options
		want string
	}{
		{chaos.Options{Err: errInjected}, "Probability is 0"},
		{chaos.Options{Probability: 1.5, Err: errInjected}, "Probability is 1.5"},
		{chaos.Options{Probability: 1, Latency: -time.Second}, "Latency is -1s"},
		{chaos.Options{Probability: 1, Status: 99}, "Status is 99"},
		{chaos.Options{Probability: 1, RetryAfter: time.Second}, "RetryAfter is 1s without a Status"},
		{chaos.Options{Probability: 1}, "no fault is set"},
	} {
		_, err := chaos.New(tt.o)
		if !errors.Is(err, chaos.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v; want ErrInvalidOptions saying %q", tt.o, err, tt.want)
		}
	}
	require.Panics(t, func() { policy.Must(chaos.New(chaos.Options{})) })
}

// TestPolicy_FailsTheDrawnCallsOnly: draws below Probability are affected.
func TestPolicy_FailsTheDrawnCallsOnly(t *testing.T) {
	inj := policy.Must(chaos.New(chaos.Options{Probability: 0.3, Err: errInjected, Rand: policytest.NewRand(0.1, 0.5, 0.29, 0.3, 0.99)}))
	p := policy.Must(policy.Wrap(inj))
	var got []bool
	calls := 0
	for range 5 {
		err := p.Do(context.Background(), func(context.Context) error { calls++; return nil })
		got = append(got, errors.Is(err, errInjected))
	}
	require.Equal(t, []bool{true, false, true, false, false}, got)
	require.Equal(t, 3, calls, "an injected error replaces the call")
	require.Equal(t, uint64(2), inj.Injected())

	inj.Enable(false)
	require.False(t, inj.Enabled())
	require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }), "off: no effect")
	require.Equal(t, uint64(2), inj.Injected())
}

// TestPolicy_InsideTheRetryFailsAttempts: a retryable injected error inside the retry
// is retried like a real one.
func TestPolicy_InsideTheRetryFailsAttempts(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	inj := policy.Must(chaos.New(chaos.Options{Probability: 0.5, Err: fault.Retryable(errInjected), Rand: policytest.NewRand(0, 0, 0.9)}))
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock})), inj))
	calls := 0
	require.NoError(t, p.Do(context.Background(), func(context.Context) error { calls++; return nil }))
	require.Equal(t, 1, calls, "two attempts failed by injection, the third ran")
	require.Equal(t, uint64(2), inj.Injected())
}

func TestPolicy_LatencyOnTheClockAndHonoursCtx(t *testing.T) {
	clock := policytest.NewClock(t0)
	inj := policy.Must(chaos.New(chaos.Options{Probability: 1, Latency: time.Second, LatencyJitter: time.Second,
		Clock: clock, Rand: policytest.NewRand(0, 0.5)}))
	p := policy.Must(policy.Wrap(inj))
	done := make(chan error)
	go func() { done <- p.Do(context.Background(), func(context.Context) error { return nil }) }()
	clock.BlockUntil(1)
	clock.Advance(1500 * time.Millisecond) // 1 s + 0.5 × 1 s of jitter
	require.NoError(t, <-done)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- p.Do(ctx, func(context.Context) error { return nil }) }()
	clock.BlockUntil(1)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "a latency gives up when the call's context ends")
	require.Zero(t, clock.Pending())
}

func serve(t *testing.T, inj *chaos.Injector, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(inj.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for _, part := range strings.SplitAfter(body, " ") {
			_, _ = io.WriteString(w, part)
		}
	})))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string, error) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

func TestMiddleware_StatusWithRetryAfter(t *testing.T) {
	inj := policy.Must(chaos.New(chaos.Options{Probability: 1, Status: 503, RetryAfter: 1500 * time.Millisecond}))
	res, _, err := get(t, serve(t, inj, "hello").URL)
	require.NoError(t, err)
	require.Equal(t, 503, res.StatusCode)
	require.Equal(t, "2", res.Header.Get("Retry-After"), "whole seconds, rounded up")

	inj = policy.Must(chaos.New(chaos.Options{Probability: 1, Err: errInjected}))
	res, body, err := get(t, serve(t, inj, "hello").URL)
	require.NoError(t, err)
	require.Equal(t, 500, res.StatusCode)
	require.Contains(t, body, "chaos: injected")
}

func TestMiddleware_ResetAndTruncatedBody(t *testing.T) {
	_, _, err := get(t, serve(t, policy.Must(chaos.New(chaos.Options{Probability: 1, Reset: true})), "hello").URL)
	require.Error(t, err, "a reset connection gives the client an error, not a response")

	res, body, err := get(t, serve(t, policy.Must(chaos.New(chaos.Options{Probability: 1, TruncateBody: 4})), "one two three").URL)
	require.NotNil(t, res)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the body ends early")
	require.Equal(t, "one ", body)
}

func TestMiddleware_SlowBodyWaitsOnTheClock(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	inj := policy.Must(chaos.New(chaos.Options{Probability: 1, SlowBody: 200 * time.Millisecond, Clock: clock}))
	_, body, err := get(t, serve(t, inj, "one two three").URL)
	require.NoError(t, err)
	require.Equal(t, "one two three", body, "slow, but whole")
	require.Equal(t, []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}, clock.Waits(),
		"one delay per write")
}

func BenchmarkPipeline_Bare(b *testing.B) {
	p := policy.Must(policy.Wrap())
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, fn)
	}
}

// BenchmarkPipeline_ChaosOff is what a disabled injector costs a call: one atomic load.
func BenchmarkPipeline_ChaosOff(b *testing.B) {
	inj := policy.Must(chaos.New(chaos.Options{Probability: 1, Err: errInjected}))
	inj.Enable(false)
	p := policy.Must(policy.Wrap(inj))
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, fn)
	}
}
