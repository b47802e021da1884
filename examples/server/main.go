// Command server is an instrumented HTTP service built with Backstop: requests pass a
// load shedder, the handler calls a flaky dependency through a breaker-guarded
// retrying client whose stack comes from a configuration file (backstop.yaml beside
// this file, or -config), reloaded while the server runs — when the file changes, and
// on SIGHUP — with the breaker's state kept; Prometheus metrics are on /metrics and
// breaker state on /debug/breakers. POST /control/dependency?mode=fail (or ok, slow, retry-after) makes
// the dependency misbehave, so that the breaker opens and the shedder sheds while you
// watch. It runs until interrupted; -selftest drives it through the whole story —
// healthy, dependency down, overload, recovery — checks each step and exits.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/breaker/breakerhttp"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/shed"
)

// What the dependency does, set with -dependency or POST /control/dependency?mode=….
const (
	depOK         = "ok"          // answers at once (and fails 1 request in -flaky)
	depFail       = "fail"        // answers 503
	depSlow       = "slow"        // answers after 200 ms: the handler's requests pile up
	depRetryAfter = "retry-after" // answers 503 with Retry-After: 1
)

var depModes = []string{depOK, depFail, depSlow, depRetryAfter}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve on")
	dep := flag.String("dependency", depOK, "what the dependency does at start: "+strings.Join(depModes, ", "))
	flaky := flag.Float64("flaky", 0.02, "share of the dependency's requests that fail while it is ok")
	selftest := flag.Bool("selftest", false, "serve on a free loopback port, drive the service through its story, check it and exit")
	configPath := flag.String("config", "", "the client stack's configuration file; empty: a copy of the built-in backstop.yaml, in a temporary directory")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if !slices.Contains(depModes, *dep) {
		fmt.Fprintf(os.Stderr, "server: -dependency %q: want one of %s\n", *dep, strings.Join(depModes, ", "))
		os.Exit(2)
	}
	if !(*flaky >= 0 && *flaky <= 1) {
		fmt.Fprintf(os.Stderr, "server: -flaky %v: want a share in [0, 1]\n", *flaky)
		os.Exit(2)
	}
	if *selftest {
		*addr, *flaky = "127.0.0.1:0", 0 // a deterministic dependency: every check can fail for a reason
	}
	if *configPath == "" {
		dir, err := os.MkdirTemp("", "backstop-server-")
		if err == nil {
			defer os.RemoveAll(dir)
			*configPath = filepath.Join(dir, "backstop.yaml")
			err = os.WriteFile(*configPath, builtinConfig, 0o600)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "server:", err)
			os.Exit(1)
		}
	}
	if err := serve(*addr, *dep, *flaky, *configPath, *selftest, logger); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

//go:embed backstop.yaml
var builtinConfig []byte

// service is the program's parts, for the self-test to look at.
type service struct {
	url        string
	dependency *http.Server
	depHits    atomic.Int64 // requests the dependency received
	srv        *http.Server
	mode       atomic.Value // string: what the dependency does
	configPath string
	loader     *config.Loader
}

// inventoryBreaker is the running configuration's breaker for inventory: a reload
// that changes its settings replaces it.
func (svc *service) inventoryBreaker() *breaker.Breaker {
	b, _ := svc.loader.Config().Stage("inventory", config.StageBreaker).(*breaker.Breaker)
	return b
}

// breakerGauge reads the state of whichever breaker is running, for the metrics.
type breakerGauge struct{ svc *service }

func (g breakerGauge) Name() string        { return "inventory" }
func (g breakerGauge) StateValue() float64 { return g.svc.inventoryBreaker().StateValue() }

func (svc *service) setMode(m string) { svc.mode.Store(m) }
func (svc *service) modeNow() string  { return svc.mode.Load().(string) }

func serve(addr, dep string, flaky float64, configPath string, selftest bool, logger *slog.Logger) error {
	svc := &service{configPath: configPath}
	svc.setMode(dep)
	// The dependency: an inventory service on loopback that does what mode says.
	depLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	svc.dependency = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.depHits.Add(1)
		switch svc.modeNow() {
		case depFail:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case depRetryAfter:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case depSlow:
			select {
			case <-time.After(200 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		default:
			if rand.Float64() < flaky {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, `{"sku": "42", "stock": 7}`)
	})}
	go svc.dependency.Serve(depLn) //nolint:errcheck // ends with Close
	defer svc.dependency.Close()

	reg := prometheus.NewRegistry()
	// The metrics' gauges read the budget and breaker of whichever configuration is
	// running: a reload may replace them.
	obs, err := metrics.New(reg, metrics.Options{Budgets: map[string]metrics.Leveler{"inventory": budgetLevel{svc}},
		Breakers: []metrics.BreakerGauge{breakerGauge{svc}}})
	if err != nil {
		return err
	}
	svc.loader, err = config.NewLoader(configPath, config.LoaderOptions{
		Options:    config.Options{Observer: event.Observers(obs, metrics.Slog(logger, slog.LevelInfo))},
		Logger:     logger,
		Registerer: reg,
	})
	if err != nil {
		return err
	}
	// The shedder answers 503 at the door while the breaker it was given is open. It is
	// given the breaker the server starts with; a reload that changes the breaker's
	// settings replaces it in the pipeline, and then the handler's own check
	// (policyhttp.WriteRejection, below) answers for the new one.
	shedder, err := shed.New(shed.Options{Name: "orders", Breaker: svc.inventoryBreaker(), Observer: obs})
	if err != nil {
		return err
	}
	if err := obs.AddShedder("orders", shedder); err != nil {
		return err
	}
	inventory := &http.Client{Transport: svc.loader.Transport(nil, policyhttp.Options{})}
	depURL := "http://" + depLn.Addr().String()

	mux := http.NewServeMux()
	mux.Handle("GET /orders", shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", depURL, nil)
		res, err := inventory.Do(req)
		if err != nil {
			// The breaker in front of inventory refused (open, half-open with its probes
			// taken, forced): 503 with the breaker's own Retry-After.
			if policyhttp.WriteRejection(w, err) {
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
	// The page lists the running configuration's breaker, whichever it is.
	mux.Handle("/debug/breakers", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var breakers breaker.Registry
		if err := breakers.Add(svc.inventoryBreaker()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		breakerhttp.Handler(&breakers, breakerhttp.AllowControl()).ServeHTTP(w, r)
	}))
	mux.Handle("/control/dependency", http.NewCrossOriginProtection().Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			m := r.FormValue("mode")
			if !slices.Contains(depModes, m) {
				http.Error(w, "mode must be one of "+strings.Join(depModes, ", "), http.StatusBadRequest)
				return
			}
			svc.setMode(m)
		}
		fmt.Fprintln(w, svc.modeNow())
	})))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	svc.url = "http://" + ln.Addr().String()
	// The timeouts a production server needs: headers, the whole request (a client
	// trickling its body is cut off), the response, and idle keep-alives.
	svc.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- svc.srv.Serve(ln) }()

	if selftest {
		err := svc.selftest()
		_ = svc.srv.Close()
		<-errc
		return err
	}
	fmt.Printf("serving on %s: /orders, /metrics, /debug/breakers, POST /control/dependency?mode=%s\n",
		svc.url, strings.Join(depModes, "|"))
	fmt.Printf("configuration: %s (edit it, or kill -HUP %d, to reload it)\n", configPath, os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	watched := make(chan error, 1)
	go func() { watched <- svc.loader.Watch(ctx) }()
	defer func() { <-watched }()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case err := <-errc:
			stop()
			return err
		case <-hup:
			_, _ = svc.loader.Reload() // logged, counted and reported as an event either way
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return svc.srv.Shutdown(sctx)
		}
	}
}

// selftest drives the service through its story and checks each step: healthy, the
// dependency down (the breaker opens and the service answers 503 with Retry-After at
// once), overload (the shedder answers 429 with Retry-After), and recovery (the
// breaker closes and every request is served again). Each wait is bounded; a step
// that does not happen fails the self-test.
func (svc *service) selftest() error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	var mu sync.Mutex
	codes := map[int]int{}
	retryAfter := map[int]int{} // responses with a Retry-After, by status
	call := func() int {
		res, err := client.Get(svc.url + "/orders")
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		mu.Lock()
		codes[res.StatusCode]++
		if res.Header.Get("Retry-After") != "" {
			retryAfter[res.StatusCode]++
		}
		mu.Unlock()
		return res.StatusCode
	}
	burst := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); call() }()
		}
		wg.Wait()
	}
	breakerState := func() (string, error) {
		js, err := get(client, svc.url+"/debug/breakers?format=json")
		if err != nil {
			return "", err
		}
		var state struct {
			Breakers []struct {
				State string `json:"state"`
			} `json:"breakers"`
		}
		if err := json.Unmarshal([]byte(js), &state); err != nil || len(state.Breakers) != 1 {
			return "", fmt.Errorf("selftest: /debug/breakers: %v %s", err, js)
		}
		return state.Breakers[0].State, nil
	}
	// until drives requests until cond holds, for at most limit: a bound, not a timing.
	until := func(what string, limit time.Duration, cond func() (bool, error)) error {
		for end := time.Now().Add(limit); time.Now().Before(end); {
			call()
			ok, err := cond()
			if err != nil {
				return err
			}
			if ok {
				fmt.Printf("selftest: %s\n", what)
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("selftest: %s did not happen within %v", what, limit)
	}

	// 1. Healthy.
	burst(50)
	if codes[http.StatusOK] == 0 {
		return fmt.Errorf("selftest: healthy, no request succeeded: %v", codes)
	}
	// 2. The dependency is down: the breaker opens, and the service answers 503 with
	// Retry-After without calling it.
	svc.setMode(depFail)
	if err := until("the breaker opened while the dependency was down", 10*time.Second, func() (bool, error) {
		s, err := breakerState()
		return s == "open", err
	}); err != nil {
		return err
	}
	if call() != http.StatusServiceUnavailable || retryAfter[http.StatusServiceUnavailable] == 0 {
		return fmt.Errorf("selftest: with the breaker open, want 503 with Retry-After; got %v (with Retry-After: %v)", codes, retryAfter)
	}
	// 3. The dependency is slow and a burst arrives. The handlers wait on it without
	// holding shed slots (a dependency sheds for itself; this service's limit bounds
	// its own work): every request is answered — served, or refused by the pipeline's
	// deadline and breaker — none is lost.
	svc.setMode(depSlow)
	if err := until("the breaker closed again with the dependency slow but answering", 15*time.Second, func() (bool, error) {
		s, err := breakerState()
		return s == "closed", err
	}); err != nil {
		return err
	}
	answered := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range codes {
			n += c
		}
		return n
	}
	before := answered()
	burst(400)
	if got := answered() - before; got != 400 {
		return fmt.Errorf("selftest: a burst of 400 with a slow dependency got %d answers; want 400 (%v)", got, codes)
	}
	fmt.Printf("selftest: a burst of 400 with a slow dependency: every request answered (all so far: %v)\n", codes)
	// 4. Recovery: healthy again, every request is served.
	svc.setMode(depOK)
	if err := until("the breaker is closed with the dependency healthy", 15*time.Second, func() (bool, error) {
		s, err := breakerState()
		return s == "closed", err
	}); err != nil {
		return err
	}
	for i := range 50 {
		if c := call(); c != http.StatusOK {
			return fmt.Errorf("selftest: recovered, request %d of 50 got %d; want 200", i+1, c)
		}
	}
	if s, err := breakerState(); err != nil || s != "closed" {
		return fmt.Errorf("selftest: after recovery the breaker is %q (%v); want closed", s, err)
	}

	// 5. An operator forces the breaker open from /debug/breakers: a transition to
	// open, counted, and the page's retry-after is the Retry-After the 503 sends.
	opened := func() (float64, error) {
		body, err := get(client, svc.url+"/metrics")
		if err != nil {
			return 0, err
		}
		m := regexp.MustCompile(`backstop_breaker_transitions_total\{breaker="inventory",from="closed",to="open"\} (\d+)`).FindStringSubmatch(body)
		if m == nil {
			return 0, nil
		}
		return strconv.ParseFloat(m[1], 64)
	}
	openedBefore, err := opened()
	if err != nil {
		return err
	}
	if err := svc.control(client, "open"); err != nil {
		return err
	}
	js, err := get(client, svc.url+"/debug/breakers?format=json")
	if err != nil {
		return err
	}
	var page struct {
		Breakers []struct {
			State      string  `json:"state"`
			Forced     bool    `json:"forced"`
			RetryAfter float64 `json:"retry_after_seconds"`
			Last       struct {
				From, To string
			} `json:"last_transition"`
		} `json:"breakers"`
	}
	if err := json.Unmarshal([]byte(js), &page); err != nil || len(page.Breakers) != 1 {
		return fmt.Errorf("selftest: /debug/breakers: %v %s", err, js)
	}
	forced := page.Breakers[0]
	if !forced.Forced || forced.State != "open" || forced.Last.From != "closed" || forced.Last.To != "open" {
		return fmt.Errorf("selftest: forced open, the page says %s", js)
	}
	res, err := client.Get(svc.url + "/orders")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if want := strconv.FormatFloat(math.Ceil(forced.RetryAfter), 'f', 0, 64); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != want {
		return fmt.Errorf("selftest: forced open, /orders answered %d with Retry-After %q; the page says %s s", res.StatusCode, res.Header.Get("Retry-After"), want)
	}
	if n, err := opened(); err != nil || n != openedBefore+1 {
		return fmt.Errorf("selftest: forcing the breaker open counted %v closed → open transitions (%v); want 1", n-openedBefore, err)
	}
	fmt.Printf("selftest: forced open from the page: counted, and /orders says Retry-After: %s as the page does\n", res.Header.Get("Retry-After"))
	if err := svc.control(client, "reset"); err != nil {
		return err
	}

	body, err := get(client, svc.url+"/metrics")
	if err != nil {
		return err
	}
	for _, want := range []string{"backstop_calls_total", "backstop_retries_total", "backstop_budget_level", "backstop_shed_limit",
		`backstop_breaker_state{breaker="inventory"} 0`, `backstop_shed_requests_total{priority="default",reason=`} {
		if !strings.Contains(body, want) {
			return fmt.Errorf("selftest: /metrics lacks %s", want)
		}
	}
	if !regexp.MustCompile(`backstop_breaker_transitions_total\{breaker="inventory",from="closed",to="open"\} [1-9]`).MatchString(body) {
		return errors.New("selftest: /metrics counts no closed → open transition")
	}
	fmt.Printf("selftest: responses by status %v; the breaker opened, shed, recovered and is closed\n", codes)
	if err := svc.selftestReload(client, breakerState, until); err != nil {
		return err
	}
	fmt.Println("selftest: ok")
	return nil
}

// selftestReload reloads the configuration while the dependency is down and the
// breaker open: a reload that changes the retry keeps the breaker itself, open; one
// that lowers the breaker's threshold builds a new breaker that stays open; a file
// with problems is refused whole, and the running configuration serves on.
func (svc *service) selftestReload(client *http.Client, breakerState func() (string, error),
	until func(what string, limit time.Duration, cond func() (bool, error)) error) error {
	svc.setMode(depFail)
	if err := until("the breaker opened while the dependency was down", 10*time.Second, func() (bool, error) {
		s, err := breakerState()
		return s == "open", err
	}); err != nil {
		return err
	}
	src := string(builtinConfig)
	rewrite := func(old, new string) error {
		if !strings.Contains(src, old) {
			return fmt.Errorf("selftest: the configuration lacks %q", old)
		}
		src = strings.Replace(src, old, new, 1)
		tmp := svc.configPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, svc.configPath) // as a deployment replaces a file: whole
	}
	orders := func() (int, int64, error) {
		before := svc.depHits.Load()
		res, err := client.Get(svc.url + "/orders")
		if err != nil {
			return 0, 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, svc.depHits.Load() - before, nil
	}
	reload := func(what string) error {
		before := svc.inventoryBreaker()
		stateBefore := before.State()
		changes, err := svc.loader.Reload()
		if err != nil {
			return fmt.Errorf("selftest: %s: %v", what, err)
		}
		after := svc.inventoryBreaker()
		same := "the same breaker"
		if after != before {
			same = "a new breaker"
		}
		code, hits, err := orders()
		if err != nil {
			return err
		}
		fmt.Printf("selftest: reload (%s): changes %v; breaker before: %s, after: %s (%s); /orders answered %d with %d requests to the dependency\n",
			what, changes, stateBefore, after.State(), same, code, hits)
		if after.State() != breaker.StateOpen || code != http.StatusServiceUnavailable || hits != 0 {
			return fmt.Errorf("selftest: %s: the breaker did not stay open across the reload", what)
		}
		return nil
	}
	// A retry change: the breaker is kept, with its state and counts.
	if err := rewrite("attempts: 3", "attempts: 2"); err != nil {
		return err
	}
	if err := reload("retry attempts 3 → 2"); err != nil {
		return err
	}
	// A breaker threshold change: a new breaker, held open as long as the old one was.
	if err := rewrite("consecutive_failures: 5", "consecutive_failures: 3"); err != nil {
		return err
	}
	if err := reload("breaker consecutive_failures 5 → 3"); err != nil {
		return err
	}
	if got := svc.loader.Config().Pipeline("inventory").Explain().MaxAttempts; got != 2 {
		return fmt.Errorf("selftest: after the reloads the stack makes %d attempts; want 2", got)
	}
	// A file with problems is refused whole: the running configuration stays.
	running := svc.loader.Config()
	if err := rewrite("attempt_timeout: 300ms", "attempt_timeout: 300ms\n    order: [retry, deadline, breaker, budget, attempt_timeout]"); err != nil {
		return err
	}
	if err := rewrite("attempts: 2", "attempts: 2\n      base: 100"); err != nil {
		return err
	}
	_, err := svc.loader.Reload()
	if err == nil || svc.loader.Config() != running {
		return fmt.Errorf("selftest: a file with problems was not refused (%v)", err)
	}
	fmt.Printf("selftest: refused reload, the running configuration stays:\n%v\n", err)
	body, gerr := get(client, svc.url+"/metrics")
	if gerr != nil {
		return gerr
	}
	if !strings.Contains(body, `backstop_config_reloads_total{result="refused"} 1`) || !strings.Contains(body, "backstop_config_last_reload_successful 0") {
		return errors.New("selftest: /metrics does not count the refused reload")
	}
	svc.setMode(depOK)
	if err := until("the breaker closed again after the refused reload", 15*time.Second, func() (bool, error) {
		s, err := breakerState()
		return s == "closed", err
	}); err != nil {
		return err
	}
	if code, hits, err := orders(); err != nil || code != http.StatusOK || hits == 0 {
		return fmt.Errorf("selftest: after the refused reload /orders answered %d (%v); want 200 from the dependency", code, err)
	}
	fmt.Println("selftest: the running configuration serves on after the refused reload")
	return nil
}

// control presses a button of /debug/breakers: action "open" or "reset".
func (svc *service) control(c *http.Client, action string) error {
	res, err := c.PostForm(svc.url+"/debug/breakers", url.Values{"name": {"inventory"}, "action": {action}})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK { // the redirect back to the page, followed
		return fmt.Errorf("selftest: POST /debug/breakers action=%s: %s", action, res.Status)
	}
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

// budgetLevel reads the tokens of whichever budget is running, for the metrics.
type budgetLevel struct{ svc *service }

func (b budgetLevel) Level() float64 {
	if tb, ok := b.svc.loader.Config().Stage("inventory", config.StageBudget).(*budget.TokenBucket); ok {
		return tb.Level()
	}
	return 0
}
