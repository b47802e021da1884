package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/coalesce"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/missing"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/redeliver"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// incident is a service wired as docs/operations.md's "Observing Backstop" says, on a fake
// clock: an HTTP API behind a shedder, and the dependencies it calls through
// pipelines, a cache and a queue consumer.
type incident struct {
	clock     *policytest.Clock
	srv       *httptest.Server
	api       *shed.Shedder
	orders    *policy.Pipeline // retry under a budget
	inventory *policy.Pipeline // a fallback around a breaker
	fb        *fallback.Fallback[int]
	prices    *policy.Pipeline // a bulkhead and a rate limiter that waits
	search    *policy.Pipeline // a rate limiter that refuses
	users     *coalesce.Cache[int, string]
	jobs      *redeliver.Schedule
	down      bool // the database is down
}

var errDBDown = errors.New("database down")

func newIncident(t *testing.T) *incident {
	t.Helper()
	in := &incident{clock: policytest.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)}
	clock := in.clock
	ordersBudget := policy.Must(budget.NewRatio(budget.RatioOptions{Ratio: 0.25, Clock: clock}))
	ordersRetry := policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond, Cap: 10 * time.Millisecond, Clock: clock}))
	inventoryFallback := policy.Must(fallback.New(fallback.Options[int]{Name: "inventory", Value: 0, Clock: clock}))
	inventoryBreaker := policy.Must(breaker.New(breaker.Options{Name: "inventory", ConsecutiveFailures: 5, OpenTimeout: time.Hour}))
	api := policy.Must(shed.New(shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 10}, Queue: shed.QueueOptions{Max: -1}, Clock: clock}))
	users := policy.Must(coalesce.New(coalesce.Options[int, string]{TTL: 30 * time.Second, Clock: clock,
		Load: func(ctx context.Context, id int) (string, error) { return "user", in.db(ctx) }}))
	jobs := policy.Must(redeliver.New(redeliver.Options{MaxDeliveries: 3, Rand: policytest.NewRand(0.5)}))
	mux := http.NewServeMux()
	handler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	log := t // the README's log.Fatal fails the test

	// README wiring begin
	reg := prometheus.NewRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{
		Budgets:  map[string]metrics.Leveler{"orders": ordersBudget},
		Shedders: map[string]metrics.ShedGauges{"api": api}, // every shed series, however it refuses
	}))
	// Breakers, bulkheads and rate limiters come with the pipelines they are in.
	orders := policy.Must(policy.Wrap(ordersBudget, ordersRetry, policy.Name("orders"), policy.Observe(obs)))
	inventory := policy.Must(policy.Wrap(inventoryFallback, inventoryBreaker, policy.Name("inventory"), policy.Observe(obs)))
	if err := obs.AddCache("users", users); err != nil {
		log.Fatal(err)
	}
	if err := obs.AddRedeliver("jobs", jobs); err != nil {
		log.Fatal(err)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", shed.Middleware(handler, api))
	// README wiring end

	in.api, in.users, in.jobs, in.fb, in.orders, in.inventory = api, users, jobs, inventoryFallback, orders, inventory
	in.prices = policy.Must(policy.Wrap(policy.Must(bulkhead.New(bulkhead.Options{Name: "prices", MaxConcurrent: 1, Clock: clock})),
		policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 1, Burst: 1, MaxWait: 5 * time.Second, Clock: clock})),
		policy.Name("prices"), policy.Observe(obs)))
	in.search = policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "search", Rate: 1, Burst: 1, Mode: ratelimit.Refuse, Clock: clock})),
		policy.Name("search"), policy.Observe(obs)))
	in.srv = httptest.NewServer(mux)
	t.Cleanup(in.srv.Close)
	return in
}

// db is a call to the database: 20 ms, and an error while it is down.
func (in *incident) db(context.Context) error {
	in.clock.Advance(20 * time.Millisecond)
	if in.down {
		return fault.Retryable(errDBDown)
	}
	return nil
}

// minute drives one minute of traffic.
func (in *incident) minute(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	db := in.db
	for range 100 {
		_ = in.orders.Do(ctx, db)
	}
	for range 50 {
		_, _ = in.fb.Get(ctx, in.inventory, func(ctx context.Context) (int, error) { return 1, db(ctx) })
	}
	// The API: 40 requests admitted; in the incident a burst finds the limit full and
	// 20 requests are shed.
	get := func() int {
		resp, err := in.srv.Client().Get(in.srv.URL + "/")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 40 {
		require.Equal(t, http.StatusOK, get())
	}
	if in.down {
		var held []shed.Permit
		for range 10 {
			p, why := in.api.Admit(ctx, shed.PriorityDefault)
			require.Equal(t, shed.ReasonNone, why)
			held = append(held, p)
		}
		for range 20 {
			require.NotEqual(t, http.StatusOK, get())
		}
		for _, p := range held {
			p.Release()
		}
	}
	// Prices: a call waits for the limiter's token, another finds the bulkhead full.
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = in.prices.Do(ctx, func(context.Context) error { close(entered); <-release; return nil })
	}()
	<-entered
	require.ErrorIs(t, in.prices.Do(ctx, func(context.Context) error { return nil }), policy.ErrRejected)
	close(release)
	<-done
	_ = in.prices.Do(ctx, func(context.Context) error { return nil }) // waits a second for its token
	_ = in.search.Do(ctx, func(context.Context) error { return nil })
	_ = in.search.Do(ctx, func(context.Context) error { return nil }) // refused
	for id := range 5 {
		for range 4 {
			_, _ = in.users.Get(ctx, id)
		}
	}
	for range 10 {
		for n := 1; ; n++ {
			var err error
			if in.down {
				err = errDBDown
			}
			if d := in.jobs.Decide(n, err); !d.Retry {
				break
			}
		}
	}
}

// scrape reads /metrics as Prometheus would, in the text format, and returns each
// sample by its series (name{labels}, histograms as their _bucket, _sum and _count).
func (in *incident) scrape(t *testing.T) map[string]string {
	t.Helper()
	resp, err := in.srv.Client().Get(in.srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "a sample line: %q", line)
		series, value := line[:i], line[i+1:]
		_, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, "a sample line: %q", line)
		if !strings.Contains(series, "{") {
			series += "{}"
		}
		out[series] = value
	}
	require.NotEmpty(t, out)
	return out
}

// The scripted incident: 5 healthy minutes, then the database down for the rest.
const (
	incidentMinutes = 40
	incidentStart   = 5
	incidentEval    = "39m"
)

// TestIncident_EveryAlertFiresAndEveryPanelHasData builds the README's wiring, drives
// a scripted incident — the database down from minute 5 — on the fake clock, scrapes
// /metrics once a simulated minute, and hands the series to promtool: every alert in
// dashboards/alerts.yaml is firing at the end, and every query of
// dashboards/backstop.json returns a value.
func TestIncident_EveryAlertFiresAndEveryPanelHasData(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not on the PATH; .ci/run installs it")
		}
		missing.Skip(t, "promtool", "apt-get install prometheus")
	}
	in := newIncident(t)
	series := map[string][]string{}
	for m := range incidentMinutes {
		in.clock.Set(time.Date(2026, 3, 1, 0, m, 0, 0, time.UTC))
		in.down = m >= incidentStart
		in.minute(t)
		for k, v := range in.scrape(t) {
			if series[k] == nil {
				series[k] = make([]string, incidentMinutes)
				for i := range series[k] {
					series[k][i] = "_"
				}
			}
			series[k][m] = v
		}
	}

	alerts := alertNames(t)
	queries := dashboardQueries(t)
	dir := t.TempDir()
	rules, err := filepath.Abs("../dashboards/alerts.yaml")
	require.NoError(t, err)
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files:\n  - %q\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n", rules)
	names := make([]string, 0, len(series))
	for k := range series {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "      - series: %q\n        values: %q\n", k, strings.Join(series[k], " "))
	}
	fmt.Fprintf(&b, "    promql_expr_test:\n")
	fmt.Fprintf(&b, "      - expr: 'group by (alertname) (ALERTS{alertstate=\"firing\"})'\n        eval_time: %s\n        exp_samples:\n", incidentEval)
	for _, a := range alerts {
		fmt.Fprintf(&b, "          - labels: '{alertname=%q}'\n            value: 1\n", a)
	}
	for _, q := range queries {
		// A value of the query, not NaN (every panel's values are ≥ 0).
		fmt.Fprintf(&b, "      - expr: %q\n        eval_time: %s\n        exp_samples:\n          - labels: '{}'\n            value: 1\n",
			"group(("+q+") >= 0)", incidentEval)
	}
	file := filepath.Join(dir, "incident_test.yaml")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o644))
	if keep := os.Getenv("BACKSTOP_INCIDENT_OUT"); keep != "" {
		require.NoError(t, os.WriteFile(keep, []byte(b.String()), 0o644))
	}
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	t.Logf("promtool: %d series, %d alerts firing, %d dashboard queries with data", len(series), len(alerts), len(queries))
}

// alertNames are the alerts dashboards/alerts.yaml defines.
func alertNames(t *testing.T) []string {
	text, err := os.ReadFile("../dashboards/alerts.yaml")
	require.NoError(t, err)
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(text), -1) {
		names = append(names, m[1])
	}
	require.NotEmpty(t, names)
	sort.Strings(names)
	return names
}

// dashboardQueries are the queries of every panel of dashboards/backstop.json, with
// Grafana's variables given as a user would pick them: every pipeline, a 5-minute
// rate interval.
func dashboardQueries(t *testing.T) []string {
	text, err := os.ReadFile("../dashboards/backstop.json")
	require.NoError(t, err)
	type panel struct {
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d panel
	require.NoError(t, json.Unmarshal(text, &d))
	var qs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				q := strings.NewReplacer("$__rate_interval", "5m", `"$pipeline"`, `".*"`).Replace(tg.Expr)
				require.NotContains(t, q, "$", "a variable the test does not give: %s", tg.Expr)
				qs = append(qs, q)
			}
		}
	}
	walk(d.Panels)
	require.NotEmpty(t, qs)
	return qs
}

// TestREADME_WiringIsTheIncidentsOwn: the wiring docs/operations.md shows under
// "Observing Backstop" is, line for line, the one the incident above is built with.
func TestREADME_WiringIsTheIncidentsOwn(t *testing.T) {
	src, err := os.ReadFile("incident_test.go")
	require.NoError(t, err)
	text := string(src)
	begin, end := strings.Index(text, "// README wiring begin\n"), strings.Index(text, "\t// README wiring end")
	require.True(t, begin > 0 && end > begin)
	var want []string
	for _, line := range strings.Split(text[begin+len("// README wiring begin\n"):end], "\n") {
		want = append(want, strings.TrimPrefix(line, "\t"))
	}
	readme, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	section := string(readme)
	start := strings.Index(section, "\n## Observing Backstop\n")
	require.Positive(t, start, "docs/operations.md has a section Observing Backstop")
	section = section[start+1:]
	if next := strings.Index(section[1:], "\n## "); next > 0 {
		section = section[:next+1]
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(section)
	require.NotNil(t, block, "the section shows its wiring in a go block")
	require.Equal(t, strings.Join(want, "\n"), block[1])
}
