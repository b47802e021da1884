package fallback_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// A price service on 127.0.0.1 that answers 503 to everything: the retry tries it
// three times, the breaker inside the retry opens on the third failure, and from then
// on the fallback answers with no request sent.
func TestFallback_AgainstARealServerThatIsDown(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := srv.Client()
	load := func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/price", nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fault.Retryable(fmt.Errorf("price: %s", resp.Status))
		}
		return string(body), nil
	}

	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true) // the retry's sleeps pass at once
	fb := policy.Must(fallback.New(fallback.Options[string]{Name: "prices", Value: "price unknown"}))
	rec := &recorder{}
	p := policy.Must(policy.Wrap(fb,
		policy.Must(deadline.New(deadline.Options{Timeout: 5 * time.Second})),
		policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock})),
		policy.Must(breaker.New(breaker.Options{Name: "prices", ConsecutiveFailures: 3, OpenTimeout: time.Hour})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})),
		policy.Name("prices"), policy.Observe(rec)))

	v, err := fb.Get(context.Background(), p, load)
	require.NoError(t, err)
	require.Equal(t, "price unknown", v)
	require.Equal(t, int64(3), hits.Load(), "three attempts reached the server")
	require.Equal(t, policy.OutcomeFailure, rec.events[0].Reason, "the retry gave up: a failure answered")

	v, err = fb.Get(context.Background(), p, load)
	require.NoError(t, err)
	require.Equal(t, "price unknown", v)
	require.Equal(t, int64(3), hits.Load(), "the open breaker refused before any request")
	require.Equal(t, policy.OutcomeRejected, rec.events[1].Reason, "an open breaker's refusal answered")
	require.ErrorIs(t, rec.events[1].Err, breaker.ErrOpen)
}
