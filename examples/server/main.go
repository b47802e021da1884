// Command server is an instrumented HTTP service built with Backstop: requests pass a
// load shedder, the handler calls a flaky dependency through a breaker-guarded
// retrying client, Prometheus metrics are on /metrics and breaker state on
// /debug/breakers. It runs until interrupted; -selftest drives it for a few seconds,
// checks its own endpoints and exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/breaker/breakerhttp"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve on")
	selftest := flag.Bool("selftest", false, "serve on a free loopback port, drive the service for a few seconds, check it and exit")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *selftest {
		*addr = "127.0.0.1:0"
	}
	if err := serve(*addr, *selftest, logger); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// service is the program's parts, for the self-test to look at.
type service struct {
	url        string
	dependency *http.Server
	srv        *http.Server
	failing    atomic.Bool
}

func serve(addr string, selftest bool, logger *slog.Logger) error {
	svc := &service{}
	// The dependency: an inventory service on loopback that fails while `failing`, and
	// now and then (1 in 50) otherwise.
	depLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	svc.dependency = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if svc.failing.Load() || rand.IntN(50) == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, `{"sku": "42", "stock": 7}`)
	})}
	go svc.dependency.Serve(depLn) //nolint:errcheck // ends with Close
	defer svc.dependency.Close()

	reg := prometheus.NewRegistry()
	var breakers breaker.Registry
	brk, err := breaker.New("inventory", breaker.Options{OpenTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	if err := breakers.Add(brk); err != nil {
		return err
	}
	bud, err := budget.NewTokenBucket(10, 0.1)
	if err != nil {
		return err
	}
	obs, err := metrics.New(reg, metrics.Options{Budgets: map[string]metrics.Leveler{"inventory": bud}})
	if err != nil {
		return err
	}
	shedder, err := shed.New(shed.Options{Name: "orders", Breaker: brk, Observer: obs})
	if err != nil {
		return err
	}
	if err := obs.AddShedder("orders", shedder); err != nil {
		return err
	}
	d := deadline.MustNew(time.Second)
	rt := retry.MustNew(retry.Options{MaxAttempts: 3})
	per := deadline.MustPerAttempt(300 * time.Millisecond)
	p := policy.MustWrap(d, brk, bud, rt, per).
		With(policy.Name("inventory"), policy.Observe(policy.Observers(obs, metrics.Slog(logger, slog.LevelInfo))))
	inventory := &http.Client{Transport: policyhttp.NewTransport(nil, p)}
	depURL := "http://" + depLn.Addr().String()

	mux := http.NewServeMux()
	mux.Handle("GET /orders", shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", depURL, nil)
		res, err := inventory.Do(req)
		if err != nil {
			var open *breaker.OpenError
			if errors.As(err, &open) {
				http.Error(w, "inventory unavailable", http.StatusServiceUnavailable)
				return
			}
			http.Error(w, "inventory failed", http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	}), shedder))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/breakers", breakerhttp.Handler(&breakers))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	svc.url = "http://" + ln.Addr().String()
	svc.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- svc.srv.Serve(ln) }()

	if selftest {
		err := svc.selftest()
		_ = svc.srv.Close()
		<-errc
		return err
	}
	fmt.Printf("serving on %s: /orders, /metrics, /debug/breakers\n", svc.url)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return svc.srv.Shutdown(sctx)
	}
}

// selftest drives the service for about 3 seconds — 1 s healthy, 1 s with the
// dependency failing, 1 s healthy again — then checks /metrics and /debug/breakers.
func (svc *service) selftest() error {
	client := &http.Client{Timeout: 5 * time.Second}
	var mu sync.Mutex
	codes := map[int]int{}
	phase := func(d time.Duration) {
		var wg sync.WaitGroup
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := client.Get(svc.url + "/orders")
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				mu.Lock()
				codes[res.StatusCode]++
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	phase(time.Second)
	svc.failing.Store(true)
	phase(time.Second)
	svc.failing.Store(false)
	time.Sleep(2 * time.Second) // the breaker's open timeout
	phase(time.Second)

	body, err := get(client, svc.url+"/metrics")
	if err != nil {
		return err
	}
	for _, want := range []string{"backstop_calls_total", "backstop_retries_total", "backstop_breaker_transitions_total",
		"backstop_budget_level", "backstop_shed_limit"} {
		if !strings.Contains(body, want) {
			return fmt.Errorf("selftest: /metrics lacks %s", want)
		}
	}
	js, err := get(client, svc.url+"/debug/breakers?format=json")
	if err != nil {
		return err
	}
	var state struct {
		Breakers []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"breakers"`
	}
	if err := json.Unmarshal([]byte(js), &state); err != nil || len(state.Breakers) != 1 {
		return fmt.Errorf("selftest: /debug/breakers: %v %s", err, js)
	}
	fmt.Printf("selftest: responses by status %v; breaker %s is %s\n", codes, state.Breakers[0].Name, state.Breakers[0].State)
	if codes[http.StatusOK] == 0 {
		return errors.New("selftest: no request succeeded")
	}
	fmt.Println("selftest: ok")
	return nil
}

func get(c *http.Client, url string) (string, error) {
	res, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return string(b), err
}
