package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// The load and the timeline of every run.
const (
	tick = 20 * time.Millisecond // 50 calls/s, open loop
	lead = 2 * time.Second       // healthy, before the fault
	tail = 5 * time.Second       // after the fault's end
	// callDeadline is the pipeline's overall deadline.
	callDeadline = 2 * time.Second
)

// fault is one way the upstream fails, behind the proxy.
type fault struct {
	name        string
	what        string
	full, short time.Duration
	apply       func(*toxiproxy.Proxy) error
	clear       func(*toxiproxy.Proxy) error
}

// faults are run in this order.
var faults = []fault{
	{"down", "proxy disabled: connections refused", 5 * time.Second, 5 * time.Second, disable, enable},
	{"down-long", "proxy disabled: connections refused", 60 * time.Second, 20 * time.Second, disable, enable},
	{"reset_peer", "reset_peer toxic: every connection reset", 10 * time.Second, 5 * time.Second,
		addToxic(`{"name": "fault", "type": "reset_peer", "attributes": {"timeout": 0}}`), removeToxic},
	{"timeout", "timeout toxic, timeout 0: answers never come", 10 * time.Second, 5 * time.Second,
		addToxic(`{"name": "fault", "type": "timeout", "attributes": {"timeout": 0}}`), removeToxic},
	{"latency", "latency toxic of 3 s, beyond the 2 s deadline", 10 * time.Second, 5 * time.Second,
		addToxic(`{"name": "fault", "type": "latency", "attributes": {"latency": 3000}}`), removeToxic},
}

func disable(p *toxiproxy.Proxy) error { p.Stop(); return nil }
func enable(p *toxiproxy.Proxy) error  { return p.Start() }

func addToxic(spec string) func(*toxiproxy.Proxy) error {
	return func(p *toxiproxy.Proxy) error {
		_, err := p.Toxics.AddToxicJson(strings.NewReader(spec))
		return err
	}
}

func removeToxic(p *toxiproxy.Proxy) error {
	return p.Toxics.RemoveToxic(context.Background(), "fault")
}

// upstream is the healthy HTTP server behind the proxy. It notes when each request
// arrives.
type upstream struct {
	t0 time.Time
	mu sync.Mutex
	at []time.Duration // guarded by mu
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.at = append(u.at, time.Since(u.t0))
	u.mu.Unlock()
	io.WriteString(w, "ok\n")
}

// recorder keeps a run's calls and breaker state changes.
type recorder struct {
	t0      time.Time
	mu      sync.Mutex
	calls   []call   // guarded by mu
	changes []change // guarded by mu
}

func (r *recorder) stateChange(_ string, from, to breaker.State) {
	at := time.Since(r.t0)
	r.mu.Lock()
	r.changes = append(r.changes, change{at: at, from: from, to: to})
	r.mu.Unlock()
}

// attemptsKey holds a call's attempt counter in its request's context.
type attemptsKey struct{}

// counting counts the requests a call sends below the pipeline.
type counting struct{ next http.RoundTripper }

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	if n, ok := req.Context().Value(attemptsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	return c.next.RoundTrip(req)
}

// run runs one fault for d on a fresh upstream, proxy, breaker and pipeline.
func run(f fault, d time.Duration) (figures, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return figures{}, err
	}
	up := &upstream{}
	srv := &http.Server{Handler: up, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	px := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		"upstream", "127.0.0.1:0", ln.Addr().String())
	if err := px.Start(); err != nil {
		return figures{}, fmt.Errorf("proxy: %w", err)
	}
	defer px.Stop()
	url := "http://" + px.Listen + "/"

	rec := &recorder{}
	// The pipeline a new user writes. OnStateChange only watches the breaker.
	b := policy.Must(breaker.New(breaker.Options{Name: "up", OnStateChange: rec.stateChange}))
	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: callDeadline})), b, policy.Must(retry.New(retry.Options{MaxAttempts: 3})))
	if err != nil {
		return figures{}, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: policyhttp.NewTransport(counting{tr}, p, policyhttp.Options{})}

	start, end := lead, lead+d
	stop := end + tail
	t0 := time.Now()
	rec.t0, up.t0 = t0, t0

	// The fault's switch: its actual start and end are what the figures use.
	var faultErr error
	var began, ended time.Duration
	switched := make(chan struct{})
	go func() {
		defer close(switched)
		time.Sleep(time.Until(t0.Add(start)))
		began = time.Since(t0)
		if faultErr = f.apply(px); faultErr != nil {
			return
		}
		time.Sleep(time.Until(t0.Add(end)))
		faultErr = f.clear(px)
		ended = time.Since(t0)
	}()

	var wg sync.WaitGroup
	for i := 0; ; i++ {
		at := time.Duration(i) * tick
		if at >= stop {
			break
		}
		time.Sleep(time.Until(t0.Add(at)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := do(client, url, t0)
			rec.mu.Lock()
			rec.calls = append(rec.calls, c)
			rec.mu.Unlock()
		}()
	}
	wg.Wait()
	<-switched
	if faultErr != nil {
		return figures{}, fmt.Errorf("%s: %w", f.name, faultErr)
	}
	up.mu.Lock()
	arrivals := up.at
	up.mu.Unlock()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return measure(f.name, rec.calls, rec.changes, arrivals, began, ended), nil
}

// do makes one call through the client and records it.
func do(client *http.Client, url string, t0 time.Time) call {
	var n atomic.Int32
	c := call{start: time.Since(t0)}
	req, err := http.NewRequestWithContext(context.WithValue(context.Background(), attemptsKey{}, &n), http.MethodGet, url, nil)
	if err != nil {
		panic(err) // the URL is ours
	}
	res, err := client.Do(req)
	if err == nil {
		_, rerr := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		c.ok = rerr == nil && res.StatusCode == http.StatusOK
	}
	c.refused = errors.Is(err, breaker.ErrOpen)
	c.end = time.Since(t0)
	c.attempts = int(n.Load())
	return c
}
