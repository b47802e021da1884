package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/ratelimit"
)

// A handler whose dependency's quota is spent answers as a Backstop server does: 503
// with the limiter's Retry-After, rounded up to whole seconds, and the wait to the
// millisecond — a real server on 127.0.0.1, read by a real client.
func TestLimiter_RefusalAnsweredOverHTTP(t *testing.T) {
	clock := policytest.NewClock(t0)
	geo := policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "geocoder", Rate: 0.4, Burst: 1, Mode: ratelimit.Refuse, Clock: clock}))))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := geo.Do(r.Context(), func(context.Context) error { return nil })
		if policyhttp.WriteRejection(w, err) {
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	get := func() *http.Response {
		resp, err := srv.Client().Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp
	}
	require.Equal(t, http.StatusNoContent, get().StatusCode, "the one token")
	resp := get()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "3", resp.Header.Get("Retry-After"), "0.4 a second: the next token in 2.5s, rounded up")
	require.Equal(t, "2500", resp.Header.Get(callpath.HeaderRetryAfterMillis))
	require.Equal(t, ratelimit.ReasonNoToken, resp.Header.Get(callpath.HeaderRefused))

	clock.Advance(2500 * time.Millisecond)
	require.Equal(t, http.StatusNoContent, get().StatusCode, "the token is back")
}
