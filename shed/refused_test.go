package shed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy"
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
	s := shed.MustNew(shed.Options{Limit: 1, MaxQueue: -1, Clock: clock, Rand: pinned(0)})
	h := shed.Middleware(okHandler, s)
	held, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer held.Release()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "limit", w.Header().Get(policy.HeaderRefused))
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Equal(t, "100", w.Header().Get(policy.HeaderRetryAfterMillis), "a brief refusal: the queue interval")

	for range 2 { // a second of nothing but refusals: the base rises above 1 s
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		clock.Advance(time.Second)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.NotEqual(t, "1", w.Header().Get("Retry-After"), "refusals went on: the base grew")
	require.Empty(t, w.Header().Get(policy.HeaderRetryAfterMillis), "no fine-grained wait once refusals go on")
}
