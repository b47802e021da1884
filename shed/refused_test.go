package shed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/shed"
)

// TestMiddleware_RefusalsTellBackstopCallersWhenToComeBack: every refusal names its
// reason in Backstop-Refused; one for want of a slot on a server that refuses only
// briefly adds Backstop-Retry-After-Ms (about two requests' time: the fixed limit's
// queue interval here) beside Retry-After's whole second, and stops adding it once
// refusals go on (the base is above 1 s).
func TestMiddleware_RefusalsTellBackstopCallersWhenToComeBack(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := shed.MustNew(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Clock: clock, Rand: pinned(0)})
	h := shed.Middleware(okHandler, s)
	held, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer held.Release()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "limit", w.Header().Get(callpath.HeaderRefused))
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Equal(t, "100", w.Header().Get(callpath.HeaderRetryAfterMillis), "a brief refusal: the queue interval")

	for range 2 { // a second of nothing but refusals: the base rises above 1 s
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		clock.Advance(time.Second)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.NotEqual(t, "1", w.Header().Get("Retry-After"), "refusals went on: the base grew")
	require.Empty(t, w.Header().Get(callpath.HeaderRetryAfterMillis), "no fine-grained wait once refusals go on")
}

// TestPermit_PausesNest: one admitted request paused five times at once (calls in
// parallel, a body read within a proxied call) gives back one slot, not five, and takes
// it back once; the zero Permit's Pauser does nothing.
func TestPermit_PausesNest(t *testing.T) {
	s := shed.MustNew(shed.Options{Limit: shed.LimitOptions{Fixed: 2}, Queue: shed.QueueOptions{Max: -1}})
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
