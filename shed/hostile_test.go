package shed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/shed"
)

// blockingBody never yields a byte: a slowloris body.
type blockingBody struct{ done chan struct{} }

func (b blockingBody) Read([]byte) (int, error) { <-b.done; return 0, context.Canceled }
func (blockingBody) Close() error               { return nil }

// TestHostile_SlowBodyIsAnsweredWithoutReading: a refused request whose body never
// arrives is answered at once: the shedder never reads a body.
func TestHostile_SlowBodyIsAnsweredWithoutReading(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
	held, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer held.Release()
	body := blockingBody{done: make(chan struct{})}
	defer close(body.done)
	w := httptest.NewRecorder()
	shed.Middleware(okHandler, s).ServeHTTP(w, httptest.NewRequest("POST", "/", body))
	require.Equal(t, http.StatusTooManyRequests, w.Code, "answered without waiting for the body")
}

// TestHostile_GiantAndRepeatedAttemptHeaders: a megabyte of digits, or a thousand
// repeated headers, cost one bounded parse and can only lower a request's priority.
func TestHostile_GiantAndRepeatedAttemptHeaders(t *testing.T) {
	var seen []int
	s := policy.Must(shed.New(shed.Options{}))
	h := shed.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		n, _, _ := callpath.Attempt(r.Context())
		seen = append(seen, n)
	}), s)

	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(callpath.HeaderAttempt, strings.Repeat("9", 1<<20))
	h.ServeHTTP(httptest.NewRecorder(), req)

	req = httptest.NewRequest("GET", "/", nil)
	for range 1000 {
		req.Header.Add(callpath.HeaderAttempt, "7")
	}
	req.Header.Add(callpath.HeaderEnvoyAttempt, "-3")
	req.Header.Add(callpath.HeaderGRPCPreviousAttempts, "1e9")
	h.ServeHTTP(httptest.NewRecorder(), req)
	require.Equal(t, []int{callpath.MaxAttempt, 7}, seen, "clamped to MaxAttemptHeader; the first of repeated values; garbage ignored")
}
