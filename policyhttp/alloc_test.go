package policyhttp_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// answerOK answers every request 200 with no body: one allocation, the response.
type answerOK struct{}

func (answerOK) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

// TestTransport_SuccessPathAllocatesLittleOfItsOwn: a round trip that succeeds at
// once allocates what its pipeline allocates, the attempt's clone of the request with
// its attempt header, the response, and three things of the transport's own: the
// context carrying the call's Releaser (one object), the call's state (the context
// the pipeline runs under, which holds the returned body and the resend guard) and
// the guard's GotConn hook bound to it.
func TestTransport_SuccessPathAllocatesLittleOfItsOwn(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{MaxAttempts: 3})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 100 * time.Millisecond}))))
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://orders.example/", nil)
	if err != nil {
		t.Fatal(err)
	}
	pipeline := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, func(context.Context) error { return nil }) })
	clone := testing.AllocsPerRun(1000, func() {
		c := req.Clone(ctx)
		c.Header.Set("Backstop-Attempt", "1")
	})
	tr := policyhttp.NewTransport(answerOK{}, p, policyhttp.Options{})
	got := testing.AllocsPerRun(1000, func() {
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	})
	// e.g. 21 = 12 (two deadlines and a retry) + 5 (the clone) + 1 (the response) + 3
	if want := pipeline + clone + 1 + 3; got > want {
		t.Errorf("RoundTrip allocates %v per call; want ≤ %v (the pipeline %v, the clone %v, the response 1, the transport's own 3)",
			got, want, pipeline, clone)
	}
}
