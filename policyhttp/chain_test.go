package policyhttp_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// retryingClient is a service's client: its own pipeline retries 3 times.
func retryingClient(t *testing.T) *http.Client {
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))))
	return &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.Options{})}
}

// forward is a service that calls next with its own retrying client and answers with
// the status it got.
func forward(t *testing.T, next string, middleware bool) string {
	client := retryingClient(t)
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", next, nil)
		res, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		w.WriteHeader(res.StatusCode)
	})
	if middleware {
		h = policyhttp.Middleware(h)
	}
	srv := newServerHandler(t, h)
	return srv
}

func newServerHandler(t *testing.T, h http.Handler) string {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { h.ServeHTTP(w, r) })
	return s.URL
}

// TestChain_DatabaseSeesMaxAttemptsNotItsCube is the headline behaviour: edge → api →
// data → database, every layer with its own 3-attempt retrying pipeline, the database
// down. With Backstop's middleware on each service, one user call reaches the database
// 3 times; without it, 3 × 3 × 3 = 27.
func TestChain_DatabaseSeesMaxAttemptsNotItsCube(t *testing.T) {
	for _, tt := range []struct {
		name       string
		middleware bool
		want       int64
	}{
		{"with Middleware: one retry owner", true, 3},
		{"without: every layer retries", false, 27},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var dbCalls atomic.Int64
			db := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				dbCalls.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			data := forward(t, db.URL, tt.middleware)
			api := forward(t, data, tt.middleware)
			edge := retryingClient(t)

			res, err := edge.Get(api)
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
			require.Equal(t, tt.want, dbCalls.Load(), "database requests for one user call")
		})
	}
}
