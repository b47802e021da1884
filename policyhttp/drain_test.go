package policyhttp_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policyhttp"
)

// hangBound ends a slow body the client never gives up on: a bound on a test that
// would otherwise hang, not a timing the tests assert.
const hangBound = 5 * time.Second

// slow is the first response of a slowFailure server.
type slow struct {
	abandoned atomic.Bool   // the client went away before the body ended
	done      chan struct{} // closed when the handler has returned
}

// wasAbandoned waits for the first request's handler to return and reports whether
// the client closed the connection before the server ended the body.
func (s *slow) wasAbandoned() bool {
	<-s.done
	return s.abandoned.Load()
}

// slowFailure answers the first request with a 503 whose body is head at once, then
// one byte every trickle (never, if trickle is 0), until the client goes away or
// hangBound passes. Later requests get 200.
func slowFailure(head string, trickle time.Duration) (*slow, func(http.ResponseWriter, *http.Request, int)) {
	s := &slow{done: make(chan struct{})}
	return s, func(w http.ResponseWriter, r *http.Request, n int) {
		if n > 1 {
			w.WriteHeader(200)
			return
		}
		defer close(s.done)
		w.WriteHeader(503)
		_, _ = w.Write([]byte(head))
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		bound := time.NewTimer(hangBound)
		defer bound.Stop()
		var tick <-chan time.Time
		if trickle > 0 {
			tk := time.NewTicker(trickle)
			defer tk.Stop()
			tick = tk.C
		}
		for {
			select {
			case <-r.Context().Done():
				s.abandoned.Store(true)
				return
			case <-bound.C:
				return
			case <-tick:
				_, _ = w.Write([]byte("x"))
				_ = rc.Flush()
			}
		}
	}
}

// TestTransport_DrainGivesUpAfterMaxDrainBytes: a failed attempt's body sends 16 KiB
// at once and then stalls. The transport reads DefaultMaxDrain (2 KiB), closes the
// connection and retries; the drain's timer never fires (its clock is not moved), so
// only the byte bound can have ended it.
func TestTransport_DrainGivesUpAfterMaxDrainBytes(t *testing.T) {
	const head = 16 << 10
	require.Less(t, policyhttp.DefaultMaxDrain, head)
	first, h := slowFailure(strings.Repeat("x", head), 0)
	srv := newServer(t, h)
	r := newRig(t, 2)
	res := r.do(t, get(t, srv.URL))
	require.Equal(t, 200, res.StatusCode, "the retry's response")
	require.Equal(t, 2, srv.count(), "requests sent")
	require.True(t, first.wasAbandoned(), "the first attempt's connection was closed by the client, not ended by the server")
}

// TestTransport_DrainGivesUpAfterDrainTimeout: a failed attempt's body arrives at
// 20 B/s, so it never reaches DefaultMaxDrain. The drain starts its timer; when the
// transport's clock passes DefaultDrainTimeout the body is closed and the retry goes
// out at once, long before the server would end the body.
func TestTransport_DrainGivesUpAfterDrainTimeout(t *testing.T) {
	first, h := slowFailure("x", 50*time.Millisecond) // 20 B/s
	srv := newServer(t, h)
	r := newRig(t, 2)
	done := make(chan *http.Response, 1)
	go func() {
		res, err := r.client.Do(get(t, srv.URL))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	started := make(chan struct{})
	go func() { r.drains.BlockUntil(1); close(started) }()
	select {
	case <-started:
	case res := <-done:
		if res != nil {
			res.Body.Close()
		}
		r.drains.NewTimer(time.Hour) // lets the waiting goroutine go
		<-started
		t.Fatalf("the call ended (%d requests) without the drain starting a timer: it waited for the server to end the body", srv.count())
	}
	r.drains.Advance(policyhttp.DefaultDrainTimeout)
	res := <-done
	require.NotNil(t, res)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode, "the retry's response")
	require.Equal(t, 2, srv.count(), "requests sent")
	require.True(t, first.wasAbandoned(), "the first attempt's connection was closed by the client, not ended by the server")
	require.Equal(t, []time.Duration{policyhttp.DefaultDrainTimeout}, r.drains.Waits(), "the drain's one timer")
}

// TestTransport_WithDrainTimeout: a negative drain timeout closes every discarded
// body at once, without reading it.
func TestTransport_WithDrainTimeout(t *testing.T) {
	first, h := slowFailure("x", 50*time.Millisecond) // 20 B/s
	srv := newServer(t, h)
	r := newRig(t, 2, policyhttp.Options{DrainTimeout: -1})
	res := r.do(t, get(t, srv.URL))
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, 2, srv.count())
	require.True(t, first.wasAbandoned())
	require.Empty(t, r.drains.Waits(), "no drain, no timer")
}
