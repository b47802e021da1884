package shed_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// TestMiddleware_AHandlerWaitingOnItsDependencyHoldsNoSlot: at a limit of 1, a
// handler whose call through policyhttp's transport waits on a slow dependency does
// not hold the slot: a second request is admitted meanwhile (the dependency sheds for
// itself; the pipeline's deadline and breaker bound the wait), and both are served.
func TestMiddleware_AHandlerWaitingOnItsDependencyHoldsNoSlot(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{}, 2)
	dep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer dep.Close()
	client := &http.Client{Transport: policyhttp.NewTransport(dep.Client().Transport,
		policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2})))), policyhttp.Options{})}

	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	srv := httptest.NewServer(shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", dep.URL, nil)
		res, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}), s))
	defer srv.Close()
	defer unblock() // before the servers close: a failed assertion must not leave a handler waiting

	codes := make(chan int, 2)
	get := func() {
		res, err := srv.Client().Get(srv.URL)
		if err != nil {
			codes <- 0
			return
		}
		res.Body.Close()
		codes <- res.StatusCode
	}
	go get()
	<-arrived // the first request waits on the dependency
	require.Zero(t, s.InFlight(), "a request waiting on its dependency holds no slot")
	go get()
	select {
	case <-arrived: // the second was admitted, not refused
	case c := <-codes:
		unblock()
		t.Fatalf("the second request was answered %d while the first waited on the dependency; want it admitted", c)
	}
	unblock()
	require.Equal(t, http.StatusOK, <-codes)
	require.Equal(t, http.StatusOK, <-codes)
}
