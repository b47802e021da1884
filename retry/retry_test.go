package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errDown = errors.New("db down")
)

func TestConformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy { return policy.Must(retry.New(retry.Options{})) })
}

func TestNew_Defaults(t *testing.T) {
	r := policy.Must(retry.New(retry.Options{}))
	require.Equal(t, retry.DefaultMaxAttempts, r.MaxAttempts())
	require.True(t, r.Placement().OwnsRetries)
}

func TestNew_RefusesBadOptions(t *testing.T) {
	tests := []struct {
		o     retry.Options
		field string
	}{
		{retry.Options{MaxAttempts: -1}, "MaxAttempts is -1"},
		{retry.Options{Base: -time.Second}, "Base is -1s"},
		{retry.Options{Cap: -time.Second}, "Cap is -1s"},
		{retry.Options{Base: time.Second, Cap: 500 * ms}, "Cap is 500ms, below Base 1s"},
		{retry.Options{MaxHintDelay: -1}, "MaxHintDelay is -1ns"},
		{retry.Options{Strategy: retry.GRPC{Multiplier: -0.5}}, "GRPC.Multiplier is -0.5"},
		{retry.Options{Strategy: retry.GRPC{Multiplier: math.Inf(1)}}, "GRPC.Multiplier is +Inf"},
	}
	for _, tt := range tests {
		_, err := retry.New(tt.o)
		if !errors.Is(err, retry.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) = %v; want ErrInvalidOptions naming %q", tt.o, err, tt.field)
		}
	}
	// A Base above the default cap raises the cap to Base rather than failing.
	if _, err := retry.New(retry.Options{Base: 10 * time.Second}); err != nil {
		t.Errorf("New(Base: 10s) = %v; want the cap raised to Base", err)
	}
}

// harness runs calls through Wrap(budget?, retry) on an auto-advancing fake clock and
// records events.
type harness struct {
	clock  *policytest.Clock
	events []event.Event
	p      *policy.Pipeline
}

func newHarness(t *testing.T, o retry.Options, outer ...policy.Policy) *harness {
	t.Helper()
	h := &harness{clock: policytest.NewClock(t0).AutoAdvance(true)}
	if o.Clock == nil {
		o.Clock = h.clock
	}
	if o.Rand == nil {
		o.Rand = pinned(0.5)
	}
	p, err := policy.Wrap(append(outer, policy.Must(retry.New(o)))...)
	require.NoError(t, err)
	h.p = p.With(policy.Name("db"), policy.Observe(event.ObserverFunc(func(e event.Event) { h.events = append(h.events, e) })), policy.UseClock(h.clock))
	return h
}

func (h *harness) of(kind event.Kind) []event.Event {
	var out []event.Event
	for _, e := range h.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// failing returns a fn that fails with errs[i] on call i (the last one repeats), and
// counts its calls.
func failing(calls *int, errs ...error) policy.Func {
	return func(context.Context) error {
		i := min(*calls, len(errs)-1)
		*calls++
		return errs[i]
	}
}

func giveUp(t *testing.T, err error) *retry.Error {
	t.Helper()
	var re *retry.Error
	require.ErrorAs(t, err, &re, "the call's error is a *retry.Error")
	return re
}

func TestRetry_RetriesRetryableErrorsUntilExhausted(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 4, Strategy: retry.None{}})
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
	require.Equal(t, 4, calls)
	re := giveUp(t, err)
	require.Equal(t, 4, re.Attempts)
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.ErrorIs(t, err, errDown, "the give-up error unwraps to the last failure")
	require.NotErrorIs(t, err, policy.ErrRejected)
	require.Equal(t, "retry: 4 attempts, attempts exhausted: db down", err.Error())
	// None: 100, 200, 400ms between the 4 attempts.
	require.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms}, h.clock.Waits())

	sched := h.of(event.RetryScheduled)
	require.Len(t, sched, 3)
	require.Equal(t, 2, sched[0].Attempt, "scheduled events name the attempt to come")
	require.Equal(t, retry.ReasonMarked, sched[0].Reason)
	require.Equal(t, 400*ms, sched[2].Delay)
	require.Len(t, h.of(event.AttemptStart), 4)
	ends := h.of(event.AttemptEnd)
	require.Len(t, ends, 4)
	require.Equal(t, 4, ends[3].Attempt)
}

func TestRetry_StopsOnSuccess(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 5})
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, fault.Retryable(errDown), nil))
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	// Full jitter with rand 0.5: half the 100ms window.
	require.Equal(t, []time.Duration{50 * ms}, h.clock.Waits())
}

func TestRetry_DoesNotRetry(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		cause error
	}{
		{"a plain error", errDown, retry.ErrNotRetryable},
		{"a rejection, even marked", fault.Retryable(policy.ErrRejected), retry.ErrNotRetryable},
		{"the caller's cancellation", context.Canceled, retry.ErrNotRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, retry.Options{})
			calls := 0
			err := h.p.Do(context.Background(), failing(&calls, tt.err))
			require.Equal(t, 1, calls)
			require.ErrorIs(t, err, tt.cause)
			require.ErrorIs(t, err, tt.err)
			require.Empty(t, h.clock.Waits(), "no sleep")
		})
	}
}

func TestRetry_DoesNotRetryOpenBreaker(t *testing.T) {
	open := errors.Join(errors.New("breaker: open"), policy.ErrRejected)
	h := newHarness(t, retry.Options{ShouldRetry: func(error) bool { return true }})
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, open))
	require.Equal(t, 1, calls, "a custom classifier cannot retry a rejection")
	require.ErrorIs(t, err, policy.ErrRejected)
}

func TestRetry_CustomClassifier(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 2, ShouldRetry: func(err error) bool { return errors.Is(err, errDown) }})
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, errDown))
	require.Equal(t, 2, calls)
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, retry.ReasonCustom, h.of(event.RetryScheduled)[0].Reason)
}

func TestRetry_HintIsAFloorWithUpwardJitter(t *testing.T) {
	tests := []struct {
		name string
		hint time.Duration
		rand pinned
		max  time.Duration
		want time.Duration
	}{
		{"hint above backoff, no jitter drawn", 2 * time.Second, 0, 0, 2 * time.Second},
		{"hint plus 50 % at the top of the range", 2 * time.Second, 1, 0, 3 * time.Second},
		{"hint plus 25 %", 2 * time.Second, 0.5, 0, 2500 * ms},
		{"hint below backoff: backoff wins", 10 * ms, 0, 0, 100 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, retry.Options{MaxAttempts: 2, Strategy: retry.None{}, Rand: tt.rand, MaxHintDelay: tt.max})
			calls := 0
			_ = h.p.Do(context.Background(), failing(&calls, fault.After(errDown, tt.hint)))
			require.Equal(t, []time.Duration{tt.want}, h.clock.Waits())
			require.Equal(t, retry.ReasonHint, h.of(event.RetryScheduled)[0].Reason)
		})
	}
}

// TestRetry_DeadlineStopsBeforeSleepingPastIt: with a 250ms deadline and un-jittered
// backoff from 100ms, attempt 2 starts at 100ms and the next delay (200ms) would end at
// 300ms, past the deadline, so the call returns at 100ms without sleeping.
func TestRetry_DeadlineStopsBeforeSleepingPastIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []event.Event
		d, err := deadline.New(deadline.Options{Timeout: 250 * ms})
		require.NoError(t, err)
		p := policy.Must(policy.Wrap(d, policy.Must(retry.New(retry.Options{MaxAttempts: 5, Strategy: retry.None{}})))).
			With(policy.Observe(event.ObserverFunc(func(e event.Event) { events = append(events, e) })))
		start := time.Now()
		calls := 0
		err = p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
		require.Equal(t, 100*ms, time.Since(start), "the call returned when the next sleep would have passed the deadline")
		require.Equal(t, 2, calls)
		require.ErrorIs(t, err, retry.ErrDeadline)
		require.ErrorIs(t, err, errDown)
		var last event.Event
		for _, e := range events {
			if e.Kind == event.RetrySuppressed {
				last = e
			}
		}
		require.Equal(t, event.SuppressedDeadline, last.Reason)
		require.Equal(t, 2, last.Attempt)
	})
}

func TestRetry_NothingRetriedAfterContextDone(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 5})
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := h.p.Do(ctx, func(context.Context) error {
		calls++
		cancel()
		return fault.Retryable(errDown)
	})
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, retry.ErrCanceled)
}

func TestRetry_CancelDuringSleepStopsTheTimer(t *testing.T) {
	clock := policytest.NewClock(t0)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{Clock: clock, Strategy: retry.None{}}))))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Do(ctx, func(context.Context) error { return fault.Retryable(errDown) }) }()
	clock.BlockUntil(1) // the loop sleeps
	cancel()
	err := <-done
	require.ErrorIs(t, err, retry.ErrCanceled)
	require.Equal(t, 1, giveUp(t, err).Attempts)
	require.Equal(t, 0, clock.Pending(), "the sleep's timer was stopped")
}

// TestRetry_OwnerRule: a retrying pipeline called under another's attempt makes one
// attempt; three nested layers of 4 attempts reach the database 4 times, not 64.
func TestRetry_OwnerRule(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	layer := func(name string) (*policy.Pipeline, *[]event.Event) {
		var evs []event.Event
		p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4, Clock: clock})))).
			With(policy.Name(name), policy.Observe(event.ObserverFunc(func(e event.Event) { evs = append(evs, e) })))
		return p, &evs
	}
	edge, _ := layer("edge")
	api, apiEvents := layer("api")
	db, _ := layer("db")
	dbCalls := 0
	var inner error
	err := edge.Do(context.Background(), func(ctx context.Context) error {
		return api.Do(ctx, func(ctx context.Context) error {
			inner = db.Do(ctx, failing(&dbCalls, fault.Retryable(errDown)))
			return inner
		})
	})
	require.Equal(t, 4, dbCalls, "database calls for one user call")
	require.ErrorIs(t, err, retry.ErrExhausted, "the owner gives up when its attempts are spent")
	require.ErrorIs(t, inner, retry.ErrOwner, "inner layers give up at once, naming the owner")
	require.Equal(t, 1, giveUp(t, inner).Attempts)

	var suppressed int
	for _, e := range *apiEvents {
		if e.Kind == event.RetrySuppressed && e.Reason == event.SuppressedOwner {
			suppressed++
		}
	}
	require.Equal(t, 4, suppressed, "api reports retry_suppressed{why=owner} on each of the edge's attempts")
}

func TestRetry_MarksEachAttemptOwned(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 3})
	var seen []int
	_ = h.p.Do(context.Background(), func(ctx context.Context) error {
		n, upstream, ok := callpath.Attempt(ctx)
		require.True(t, ok)
		require.False(t, upstream)
		seen = append(seen, n)
		return fault.Retryable(errDown)
	})
	require.Equal(t, []int{1, 2, 3}, seen)
}

func TestRetry_UpstreamOwnerMeansOneAttempt(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 3})
	ctx := callpath.WithUpstreamAttempt(context.Background(), 2)
	calls := 0
	err := h.p.Do(ctx, failing(&calls, fault.Retryable(errDown)))
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, retry.ErrOwner)
}

// budgetLog is a policy.RetryBudget that allows a fixed number of retries and logs
// every call made to it.
type budgetLog struct {
	allow int
	log   []string
}

func (*budgetLog) Placement() policy.Placement {
	return policy.Placement{Kind: "budget", Retry: policy.OutsideRetry}
}
func (*budgetLog) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
func (b *budgetLog) Deposit()                                          { b.log = append(b.log, "deposit") }
func (b *budgetLog) OnSuccess()                                        { b.log = append(b.log, "success") }
func (b *budgetLog) OnFailure()                                        { b.log = append(b.log, "failure") }
func (b *budgetLog) Withdraw() bool {
	ok := b.allow > 0
	b.allow--
	b.log = append(b.log, map[bool]string{true: "withdraw", false: "refuse"}[ok])
	return ok
}

func TestRetry_AsksTheBudgetBeforeEveryRetry(t *testing.T) {
	b := &budgetLog{allow: 1}
	h := newHarness(t, retry.Options{MaxAttempts: 5}, b)
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
	require.Equal(t, 2, calls)
	require.ErrorIs(t, err, retry.ErrBudget)
	require.Equal(t, []string{"deposit", "failure", "withdraw", "failure", "refuse"}, b.log)
	sup := h.of(event.RetrySuppressed)
	require.Len(t, sup, 1)
	require.Equal(t, event.SuppressedBudget, sup[0].Reason)

	b.log = nil
	calls = 0
	require.NoError(t, h.p.Do(context.Background(), failing(&calls, nil)))
	require.Equal(t, []string{"deposit", "success"}, b.log)

	// A failure on the last allowed attempt still costs: reported, not withdrawn.
	b.log, b.allow, calls = nil, 10, 0
	h2 := newHarness(t, retry.Options{MaxAttempts: 2}, b)
	_ = h2.p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
	require.Equal(t, []string{"deposit", "failure", "withdraw", "failure"}, b.log)
}

// timeoutError is a timeout as net.Error reports one.
type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

// leaseLog is a budget that implements policy.RetryLease and logs what it is told.
type leaseLog struct {
	budgetLog
	taken int64
}

func (b *leaseLog) Take(reason string) (int64, bool) {
	ok := b.allow > 0
	b.allow--
	if !ok {
		b.log = append(b.log, "refuse "+reason)
		return 0, false
	}
	b.taken++
	b.log = append(b.log, fmt.Sprintf("take %s %d", reason, b.taken))
	return b.taken, true
}

func (b *leaseLog) End(taken int64, ok bool) {
	b.log = append(b.log, fmt.Sprintf("end %d %v", taken, ok))
}

func TestRetry_TellsALeaseWhyAndHowEachRetryEnded(t *testing.T) {
	b := &leaseLog{budgetLog: budgetLog{allow: 2}}
	h := newHarness(t, retry.Options{MaxAttempts: 5}, b)
	calls := 0
	timeout := timeoutError{}
	require.NoError(t, h.p.Do(context.Background(), failing(&calls, timeout, fault.Retryable(errDown), nil)))
	require.Equal(t, []string{"deposit", "failure", "take timeout 1", "end 1 false", "failure", "take retryable 2", "end 2 true", "success"}, b.log,
		"Take with each retry's reason instead of Withdraw; End once per Take, after its attempt")

	// Refused: no End. Cancelled while the retry waits: End(…, false).
	b.log, b.allow, calls = nil, 0, 0
	_ = h.p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
	require.Equal(t, []string{"deposit", "failure", "refuse retryable"}, b.log)

	b.log, b.allow, b.taken = nil, 1, 0
	clock := policytest.NewClock(t0)
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: pinned(0.5)}))))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Do(ctx, func(context.Context) error { return fault.Retryable(errDown) }) }()
	clock.BlockUntil(1) // the retry sleeps
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, []string{"deposit", "failure", "take retryable 1", "end 1 false"}, b.log)
}

func TestRetry_AttemptTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		per, err := deadline.NewPerAttempt(deadline.Options{Timeout: 50 * ms})
		require.NoError(t, err)
		p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Strategy: retry.None{}})), per))
		calls := 0
		err = p.Do(context.Background(), func(ctx context.Context) error {
			calls++
			if calls < 3 {
				<-ctx.Done() // hang until the attempt times out
				return ctx.Err()
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, calls)
	})
}

func nop(context.Context) error { return nil }

func TestRetry_SuccessPathAllocatesOnlyTheOwnerMark(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{}))))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if got := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, nop) }); got != 1 {
		t.Errorf("Wrap(retry).Do under a request's context allocates %v per call; want 1 (the owner mark)", got)
	}
	for _, ctx := range []context.Context{context.Background(), context.TODO()} {
		if got := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, nop) }); got != 0 {
			t.Errorf("Wrap(retry).Do under %v allocates %v per call; want 0 (its mark is made once)", ctx, got)
		}
	}
}

func BenchmarkPipeline_Retry(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{}))))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, nop)
	}
}

func BenchmarkPipeline_RetryParallel(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{}))))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			_ = p.Do(ctx, nop)
		}
	})
}

func BenchmarkPipeline_DeadlineRetry(b *testing.B) {
	d := policy.Must(deadline.New(deadline.Options{Timeout: time.Second}))
	p := policy.Must(policy.Wrap(d, policy.Must(retry.New(retry.Options{}))))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, nop)
	}
}

func BenchmarkPipeline_DeadlineRetryParallel(b *testing.B) {
	d := policy.Must(deadline.New(deadline.Options{Timeout: time.Second}))
	p := policy.Must(policy.Wrap(d, policy.Must(retry.New(retry.Options{}))))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			_ = p.Do(ctx, nop)
		}
	})
}

// TestExplain_OneAttemptNeverRetries: a retry of MaxAttempts 1 says it never retries,
// not "up to 1 attempts" with a backoff it never sleeps.
func TestExplain_OneAttemptNeverRetries(t *testing.T) {
	st := policy.Must(retry.New(retry.Options{MaxAttempts: 1})).ExplainStage()
	require.Equal(t, "1 attempt: never retries (MaxAttempts 1)", st.Summary)
	require.Equal(t, 1, st.Attempts)
	require.Empty(t, st.Sleeps)
}
