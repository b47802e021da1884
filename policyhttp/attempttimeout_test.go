package policyhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// An attempt that runs out its per-attempt timeout is retried. net/http's transport
// answers a request whose context ended with the context's cause, which the
// per-attempt timeout sets to deadline.ErrAttemptTimeout: the retry must still see a
// timeout there, not an error it may not retry.
func TestTransport_RetriesAnAttemptThatTimedOut(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select { // the first attempt hangs until the client gives up on it
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	defer close(release)
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 10 * time.Second})), policy.Must(retry.New(retry.Options{MaxAttempts: 5})), policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 250 * time.Millisecond}))))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(tr, p, policyhttp.Options{})}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	res, err := c.Do(req)
	require.NoError(t, err, "the second attempt, after the first timed out")
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.GreaterOrEqual(t, n.Load(), int32(2), "requests the server saw: the one that timed out, then its retries")
}
