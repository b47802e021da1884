package shed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/shed"
)

// TestMiddleware_RefusalsTellBackstopCallersWhenToComeBack: every refusal names its
// reason in Backstop-Refused; one for want of a slot on a server that refuses only
// briefly adds Backstop-Retry-After-Ms (about two requests' time: the fixed limit's
// queue interval here) beside Retry-After's whole second; once refusals go on it grows
// as Retry-After's base does.
func TestMiddleware_RefusalsTellBackstopCallersWhenToComeBack(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Clock: clock, Rand: pinned(0)}))
	h := shed.Middleware(okHandler, s)
	held, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer held.Release()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "limit", w.Header().Get(callpath.HeaderRefused))
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Equal(t, "100", w.Header().Get(callpath.HeaderRetryAfterMillis), "a brief refusal: the queue interval")

	for range 2 { // a second of nothing but refusals, 100 of them: the base rises above 1 s
		for range 100 {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}
		clock.Advance(time.Second)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.Greater(t, ra, 1, "refusals went on: the base grew")
	ms, err := strconv.Atoi(w.Header().Get(callpath.HeaderRetryAfterMillis))
	require.NoError(t, err)
	require.Greater(t, ms, 100, "the fine-grained wait grows with the base")
	require.LessOrEqual(t, ms, 1000, "and stays within a second")
}

// steppingClock moves on by step each time it is read: a refusal's readings of the
// time then fall in different seconds of the pressure, as they can on a real clock.
type steppingClock struct {
	*policytest.Clock
	step time.Duration
}

func (c steppingClock) Now() time.Time {
	c.Advance(c.step)
	return c.Clock.Now()
}

// TestMiddleware_OneRefusalOneReading: the Retry-After and the Backstop-Retry-After-Ms
// of one refusal come from one reading of the pressure, even when the second in which
// the pressure is counted ends between them: the milliseconds are the queue interval
// (100 ms) times the base whose jitter gave the Retry-After, [base, base + ⌈base/2⌉],
// at most 1 000.
func TestMiddleware_OneRefusalOneReading(t *testing.T) {
	clock := steppingClock{policytest.NewClock(t0), 1500 * time.Millisecond}
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Clock: clock, Rand: pinned(0.99)}))
	h := shed.Middleware(okHandler, s)
	held, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer held.Release()
	for i := range 20 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		secs, err := strconv.Atoi(w.Header().Get("Retry-After"))
		require.NoError(t, err)
		ms, err := strconv.Atoi(w.Header().Get(callpath.HeaderRetryAfterMillis))
		require.NoError(t, err)
		agree := false // some base gives both: the milliseconds are capped at 1 000
		for base := 1; base <= 30; base++ {
			agree = agree || secs >= base && secs <= base+(base+1)/2 && ms == min(100*base, 1000)
		}
		require.True(t, agree, "refusal %d: Retry-After %d s and Backstop-Retry-After-Ms %d disagree", i, secs, ms)
	}
}

// TestPermit_PausesNest: one admitted request paused five times at once (calls in
// parallel, a body read within a proxied call) gives back one slot, not five, and takes
// it back once; the zero Permit's Pauser does nothing.
func TestPermit_PausesNest(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 2}, Queue: shed.QueueOptions{Max: -1}}))
	p, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonNone, why)
	pz := p.Pauser()
	for range 5 {
		pz.Pause()
	}
	require.Equal(t, 0, s.InFlight(), "in flight with one request paused five times")
	admitted := 0
	var others []shed.Permit
	for range 10 {
		if q, why := s.Admit(context.Background(), shed.PriorityDefault); why == shed.ReasonNone {
			admitted++
			others = append(others, q)
		}
	}
	require.Equal(t, 2, admitted, "admitted beside it at a limit of 2")
	for range 5 {
		pz.Resume()
	}
	require.Equal(t, 3, s.InFlight(), "the paused request took its slot back, once")
	p.Release()
	for _, q := range others {
		q.Release()
	}
	require.Equal(t, 0, s.InFlight())
	var zero shed.Permit
	zero.Pauser().Pause()
	zero.Pauser().Resume()
	require.Equal(t, 0, s.InFlight())
}
