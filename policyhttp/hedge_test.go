package policyhttp_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// gated is a RoundTripper whose requests each wait for the test to answer them, by
// attempt number; a request whose context ends gets its late response if it has one,
// as a response can cross a cancellation on the wire.
type gated struct {
	mu      sync.Mutex
	started chan int
	gates   map[int]chan *http.Response
	late    map[int]*http.Response
}

func (g *gated) gate(n int) chan *http.Response {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates[n] == nil {
		g.gates[n] = make(chan *http.Response, 1)
	}
	return g.gates[n]
}

func (g *gated) RoundTrip(r *http.Request) (*http.Response, error) {
	n, _ := policyhttp.AttemptOf(r)
	g.started <- n
	select {
	case res := <-g.gate(n):
		return res, nil
	case <-r.Context().Done():
		if res := g.late[n]; res != nil {
			return res, nil
		}
		return nil, r.Context().Err()
	}
}

func reply(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
}

func TestTransport_HedgeKeepsTheWinnersResponseAndClosesTheLosers(t *testing.T) {
	clock := policytest.NewClock(t0)
	g := &gated{started: make(chan int, 4), gates: map[int]chan *http.Response{},
		late: map[int]*http.Response{1: reply(200, "from the slow first attempt")}} // arrives as it is cancelled
	bodies := &policytest.Bodies{Next: g}
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: 50 * time.Millisecond, Clock: clock}))))
	client := &http.Client{Transport: policyhttp.NewTransport(bodies, p, policyhttp.Options{})}

	type result struct {
		body string
		err  error
	}
	done := make(chan result)
	go func() {
		res, err := client.Get("http://backend.test/item")
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(res.Body) // read after RoundTrip returned: the winner's context lives on
		res.Body.Close()
		done <- result{string(b), err}
	}()
	require.Equal(t, 1, <-g.started)
	clock.BlockUntil(1)
	clock.Advance(50 * time.Millisecond)
	require.Equal(t, 2, <-g.started, "the hedge went out at the delay")
	g.gate(2) <- reply(200, "from the hedge")
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "from the hedge", r.body)
	require.Equal(t, int64(2), bodies.Opened())
	require.Equal(t, int64(2), bodies.Closed(), "the loser's body was closed by the transport, the winner's by the caller")
}

func TestTransport_NeverHedgesARequestThatIsNotIdempotent(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	g := &gated{started: make(chan int, 4), gates: map[int]chan *http.Response{}}
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: -1, Clock: clock})))) // all attempts at once
	client := &http.Client{Transport: policyhttp.NewTransport(g, p, policyhttp.Options{})}
	g.gate(1) <- reply(201, "created")
	res, err := client.Post("http://backend.test/orders", "text/plain", strings.NewReader("one order"))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 201, res.StatusCode)
	require.Len(t, g.started, 1, "a POST without an Idempotency-Key goes out once")

	g.gate(1) <- reply(200, "a")
	g.gate(2) <- reply(200, "b")
	res, err = client.Get("http://backend.test/item")
	require.NoError(t, err)
	res.Body.Close()
	require.Len(t, g.started, 3, "a GET is hedged: two at once")
}
