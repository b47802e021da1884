package config_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeFile replaces the file at path with src as a deployment does: written beside
// it, then renamed over it, so that no reader sees half a file.
func writeFile(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(src), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// events collects a loader's reload events.
type events struct {
	mu sync.Mutex
	es []event.Event
	ch chan event.Event
}

func newEvents() *events { return &events{ch: make(chan event.Event, 64)} }

func (e *events) Observe(ev event.Event) {
	if ev.Kind != event.ConfigReload && ev.Kind != event.StageReset {
		return
	}
	e.mu.Lock()
	e.es = append(e.es, ev)
	e.mu.Unlock()
	e.ch <- ev
}

// next waits for the next ConfigReload event; it fails the test after a minute.
func (e *events) next(t *testing.T) event.Event {
	t.Helper()
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == event.ConfigReload {
				return ev
			}
		case <-time.After(time.Minute):
			t.Fatal("no config_reload event within a minute")
		}
	}
}

// failing is an HTTP server on 127.0.0.1 that answers every request 503 and counts them.
func failing(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func get(t *testing.T, c *http.Client, url string) error {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Body.Close()
}

const payments = `
stacks:
  payments:
    breaker: {consecutive_failures: %FAILURES%, open_timeout: 1m}
    retry: {attempts: %ATTEMPTS%, strategy: none, base: 1ms}
http:
  default: payments
`

func paymentsFile(failures, attempts string) string {
	return strings.NewReplacer("%FAILURES%", failures, "%ATTEMPTS%", attempts).Replace(payments)
}

// TestLoader_ReloadKeepsBreakerOpen: on a real server, the payments breaker opens;
// a reload that changes the retry keeps the breaker (the same object, open, its
// counts), and a reload that changes the breaker's threshold builds a new one that
// stays open until the old one would have let probes through.
func TestLoader_ReloadKeepsBreakerOpen(t *testing.T) {
	srv, hits := failing(t)
	path := filepath.Join(t.TempDir(), "backstop.yaml")
	writeFile(t, path, paymentsFile("2", "1"))
	evs := newEvents()
	reg := prometheus.NewRegistry()
	clock := policytest.NewClock(time.Now()).AutoAdvance(true)
	l, err := config.NewLoader(path, config.LoaderOptions{Options: config.Options{Observer: evs, Clock: clock}, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	client := &http.Client{Transport: l.Transport(nil, policyhttpOptions())}

	for range 2 {
		require.NoError(t, get(t, client, srv.URL+"/charge"))
	}
	b := l.Config().Stage("payments", "breaker").(*breaker.Breaker)
	require.Equal(t, breaker.StateOpen, b.State(), "2 failures open the breaker")
	require.ErrorIs(t, get(t, client, srv.URL+"/charge"), breaker.ErrOpen)
	require.EqualValues(t, 2, hits.Load(), "an open breaker sends nothing")

	// The retry changes; the breaker does not: it is kept, open, with its counts.
	writeFile(t, path, paymentsFile("2", "3"))
	changes, err := l.Reload()
	require.NoError(t, err)
	require.Equal(t, []config.Change{{Stack: "payments", Stage: "retry", Reason: config.StageChanged}}, changes)
	kept := l.Config().Stage("payments", "breaker").(*breaker.Breaker)
	require.Same(t, b, kept, "an unchanged breaker is the same object")
	require.Equal(t, breaker.StateOpen, kept.State())
	require.ErrorIs(t, get(t, client, srv.URL+"/charge"), breaker.ErrOpen)
	require.Equal(t, 3, l.Config().Pipeline("payments").Explain().MaxAttempts, "the new retry runs")

	// The breaker's threshold changes: a new breaker, which stays open.
	writeFile(t, path, paymentsFile("5", "3"))
	changes, err = l.Reload()
	require.NoError(t, err)
	require.Equal(t, []config.Change{{Stack: "payments", Stage: "breaker", Reason: config.StageChanged, Kept: "open"}}, changes)
	fresh := l.Config().Stage("payments", "breaker").(*breaker.Breaker)
	require.NotSame(t, b, fresh)
	require.Equal(t, breaker.StateOpen, fresh.State(), "a breaker that was open stays open across its own change")
	require.ErrorIs(t, get(t, client, srv.URL+"/charge"), breaker.ErrOpen)
	require.EqualValues(t, 2, hits.Load(), "no request went out while the breaker was open")

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_config_reloads_total Configuration reloads, by result: applied or refused (the running configuration stayed).
# TYPE backstop_config_reloads_total counter
backstop_config_reloads_total{result="applied"} 2
backstop_config_reloads_total{result="refused"} 0
# HELP backstop_config_stage_resets_total Stages a reload replaced because their settings changed, by stack and stage.
# TYPE backstop_config_stage_resets_total counter
backstop_config_stage_resets_total{stack="payments",stage="breaker"} 1
backstop_config_stage_resets_total{stack="payments",stage="retry"} 1
`), "backstop_config_reloads_total", "backstop_config_stage_resets_total"))
	var resets []string
	evs.mu.Lock()
	for _, e := range evs.es {
		if e.Kind == event.StageReset {
			resets = append(resets, e.Pipeline+"/"+e.Source+":"+e.To)
		}
	}
	evs.mu.Unlock()
	require.Equal(t, []string{"payments/retry:", "payments/breaker:open"}, resets)
}

func policyhttpOptions() policyhttp.Options { return policyhttp.Options{} }

// TestLoader_RefusedReloadKeepsRunningConfig: a file with a problem is refused whole;
// the running configuration stays, and the refusal is reported as an event, a
// metric and a log line.
func TestLoader_RefusedReloadKeepsRunningConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backstop.yaml")
	writeFile(t, path, paymentsFile("2", "3"))
	evs := newEvents()
	reg := prometheus.NewRegistry()
	var log bytes.Buffer
	l, err := config.NewLoader(path, config.LoaderOptions{Options: config.Options{Observer: evs}, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	running := l.Config()

	// Two problems, one of them valid YAML that only the ordering rules refuse.
	writeFile(t, path, strings.Replace(paymentsFile("2", "3"), "\nhttp:", "\n    attempt_timeout: 1s\n    order: [attempt_timeout, retry, breaker]\n    deadline: 5\nhttp:", 1))
	changes, err := l.Reload()
	require.Nil(t, changes)
	require.ErrorIs(t, err, config.ErrInvalid)
	require.Contains(t, err.Error(), "stacks.payments.deadline: is the bare number 5")
	require.Contains(t, err.Error(), "stacks.payments.order[0]: O3: attempt_timeout at position 1 is outside retry at position 2")
	require.Same(t, running, l.Config(), "the running configuration stays")

	ev := evs.next(t)
	require.Equal(t, event.ConfigRefused, ev.Reason)
	require.ErrorIs(t, ev.Err, config.ErrInvalid)
	require.Equal(t, 0.0, testutil.ToFloat64(gauge(t, reg)))
	require.Contains(t, log.String(), "configuration refused")
	require.Contains(t, log.String(), "O3")

	writeFile(t, path, paymentsFile("2", "4"))
	_, err = l.Reload()
	require.NoError(t, err)
	require.Equal(t, event.ConfigApplied, evs.next(t).Reason)
	require.Equal(t, 1.0, testutil.ToFloat64(gauge(t, reg)))
}

func gauge(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "backstop_config_last_reload_successful" {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "copy"})
			g.Set(mf.GetMetric()[0].GetGauge().GetValue())
			return g
		}
	}
	t.Fatal("no backstop_config_last_reload_successful")
	return nil
}

// TestLoader_InFlightCallsFinishOnTheirStack: a call that started before a reload
// makes the attempts of the stack it started on; the next call, the new stack's.
func TestLoader_InFlightCallsFinishOnTheirStack(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "backstop.yaml")
	writeFile(t, path, paymentsFile("100", "3"))
	clock := policytest.NewClock(time.Now()).AutoAdvance(true)
	l, err := config.NewLoader(path, config.LoaderOptions{Options: config.Options{Clock: clock}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	client := &http.Client{Transport: l.Transport(nil, policyhttp.Options{})}

	done := make(chan error)
	go func() { done <- get(t, client, srv.URL+"/") }()
	<-started
	writeFile(t, path, paymentsFile("100", "1"))
	_, err = l.Reload()
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-done)
	require.EqualValues(t, 3, n.Load(), "the call in flight made its old stack's 3 attempts")
	require.NoError(t, get(t, client, srv.URL+"/"))
	require.EqualValues(t, 4, n.Load(), "the next call makes the new stack's 1 attempt")
}

// TestLoader_WatchReloadsOnChange: Watch sees a file renamed over the old one, and a
// refused file after it, and stops with its context. (Each write is one reload: a
// rename's events find the same content the second time.)
func TestLoader_WatchReloadsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backstop.yaml")
	writeFile(t, path, paymentsFile("2", "3"))
	evs := newEvents()
	clock := policytest.NewClock(time.Now()).AutoAdvance(true) // the debounce fires at once
	l, err := config.NewLoader(path, config.LoaderOptions{Options: config.Options{Observer: evs, Clock: clock},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error)
	ready := make(chan struct{})
	go func() { watched <- config.WatchReady(l, ctx, ready) }()
	<-ready
	writeFile(t, path, paymentsFile("2", "4"))
	require.Equal(t, event.ConfigApplied, evs.next(t).Reason)
	require.Equal(t, 4, l.Config().Pipeline("payments").Explain().MaxAttempts)
	writeFile(t, path, "stacks: {payments: {retry: {attempts: zero}}}\n")
	ev := evs.next(t)
	for ev.Reason != event.ConfigRefused { // the last writes' events may come first
		ev = evs.next(t)
	}
	require.Contains(t, ev.Err.Error(), "stacks.payments.retry.attempts")
	require.NotNil(t, l.Config().Pipeline("payments"), "the running configuration stays")
	cancel()
	require.ErrorIs(t, <-watched, context.Canceled)
}

// syncLog is a log safe to read while the watcher writes it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// withoutTime drops the time from log lines, so that tests can match them whole.
func withoutTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestLoader_WatchReportsADeletedFile: a watched file deleted is refused once,
// logged and observed; the running configuration stays. Its return is applied.
func TestLoader_WatchReportsADeletedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backstop.yaml")
	writeFile(t, path, paymentsFile("2", "3"))
	evs := newEvents()
	reg := prometheus.NewRegistry()
	log := &syncLog{}
	clock := policytest.NewClock(time.Now()).AutoAdvance(true) // the debounce fires at once
	l, err := config.NewLoader(path, config.LoaderOptions{Options: config.Options{Observer: evs, Clock: clock}, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{ReplaceAttr: withoutTime}))})
	require.NoError(t, err)
	running := l.Config()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error)
	ready := make(chan struct{})
	go func() { watched <- config.WatchReady(l, ctx, ready) }()
	<-ready

	require.NoError(t, os.Remove(path))
	ev := evs.next(t)
	require.Equal(t, event.ConfigRefused, ev.Reason)
	require.ErrorIs(t, ev.Err, os.ErrNotExist)
	require.Same(t, running, l.Config(), "the running configuration stays")
	require.Equal(t, 0.0, testutil.ToFloat64(gauge(t, reg)))
	refused := `level=ERROR msg="backstop: configuration file unreadable; the running configuration stays" ` +
		"file=" + path + ` err="config: open ` + path + `: no such file or directory"` + "\n"
	require.Equal(t, refused, log.String())

	// The file comes back as it was: it is loaded anew. The events of its
	// temporary file, written first, find it missing still: no second refusal.
	writeFile(t, path, paymentsFile("2", "3"))
	require.Equal(t, event.ConfigApplied, evs.next(t).Reason)
	require.Equal(t, 1.0, testutil.ToFloat64(gauge(t, reg)))
	require.Equal(t, refused+`level=INFO msg="backstop: configuration reloaded" file=`+path+" stages_replaced=0\n", log.String())
	cancel()
	require.ErrorIs(t, <-watched, context.Canceled)
}

// TestLoader_GRPCRoutesFollowReloads: on a real gRPC server on 127.0.0.1, a method's
// route makes the attempts of the running configuration's stack.
func TestLoader_GRPCRoutesFollowReloads(t *testing.T) {
	var calls atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(g, &unavailable{calls: &calls})
	go g.Serve(ln) //nolint:errcheck // ends with Stop
	t.Cleanup(g.Stop)

	path := filepath.Join(t.TempDir(), "backstop.yaml")
	src := "stacks:\n  s: {retry: {attempts: %d, strategy: none, base: 1ms, grpc_codes: [UNAVAILABLE]}}\n  other: {retry: {attempts: 1}}\ngrpc:\n  default: other\n  routes:\n    - {name: grpc.testing.TestService/EmptyCall, stack: s}\n"
	writeFile(t, path, strings.Replace(src, "%d", "3", 1))
	clock := policytest.NewClock(time.Now()).AutoAdvance(true)
	l, err := config.NewLoader(path, config.LoaderOptions{Options: config.Options{Clock: clock}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	conn, err := grpc.NewClient(ln.Addr().String(), append(l.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	defer conn.Close()
	c := testgrpc.NewTestServiceClient(conn)

	_, err = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.EqualValues(t, 3, calls.Load(), "EmptyCall: stack s, 3 attempts")
	_, err = c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.EqualValues(t, 4, calls.Load(), "UnaryCall: the default stack, 1 attempt")

	writeFile(t, path, strings.Replace(src, "%d", "2", 1))
	_, err = l.Reload()
	require.NoError(t, err)
	_, err = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.EqualValues(t, 6, calls.Load(), "after the reload, stack s makes 2 attempts")
}

type unavailable struct {
	testgrpc.UnimplementedTestServiceServer
	calls *atomic.Int64
}

func (u *unavailable) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	u.calls.Add(1)
	return nil, status.Error(codes.Unavailable, "down")
}

func (u *unavailable) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	u.calls.Add(1)
	return nil, status.Error(codes.Unavailable, "down")
}

// TestLoader_ReloadReportsAddedAndRemovedStages: a stage added to a stack, or removed
// from it, is a change too; a budget left alone keeps its tokens.
func TestLoader_ReloadReportsAddedAndRemovedStages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backstop.yaml")
	writeFile(t, path, "stacks:\n  s:\n    budget: {token_bucket: {max_tokens: 10, token_ratio: 0.1}}\n    retry: {attempts: 3}\n    breaker: {}\n")
	l, err := config.NewLoader(path, config.LoaderOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	b := l.Config().Stage("s", "budget").(*budget.TokenBucket)
	b.OnFailure() // tokens 9 = 10 − 1 failure
	writeFile(t, path, "stacks:\n  s:\n    budget: {token_bucket: {max_tokens: 10, token_ratio: 0.1}}\n    retry: {attempts: 3}\n    deadline: 1s\n")
	changes, err := l.Reload()
	require.NoError(t, err)
	require.Equal(t, []config.Change{
		{Stack: "s", Stage: "deadline", Reason: config.StageAdded},
		{Stack: "s", Stage: "breaker", Reason: config.StageRemoved},
	}, changes)
	require.Same(t, b, l.Config().Stage("s", "budget"), "the budget is kept")
	require.Equal(t, 9.0, b.Tokens(), "with its tokens")
}

// TestLoader_OneRetryOwnerPerCallPath: a handler behind policyhttp.Middleware, called
// by a retry owner upstream, calls through a route whose stack retries 3 times: it
// makes one attempt, since the owner upstream retries the call path.
func TestLoader_OneRetryOwnerPerCallPath(t *testing.T) {
	backend, hits := failing(t)
	path := filepath.Join(t.TempDir(), "backstop.yaml")
	writeFile(t, path, "stacks:\n  s: {retry: {attempts: 3, strategy: none, base: 1ms}}\nhttp: {default: s}\n")
	l, err := config.NewLoader(path, config.LoaderOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	client := &http.Client{Transport: l.Transport(nil, policyhttp.Options{})}
	front := httptest.NewServer(policyhttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, backend.URL, nil)
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
		}
		w.WriteHeader(http.StatusBadGateway)
	})))
	t.Cleanup(front.Close)

	req, _ := http.NewRequest(http.MethodGet, front.URL, nil)
	req.Header.Set(callpath.HeaderAttempt, "1") // a retry owner upstream
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.EqualValues(t, 1, hits.Load(), "under an owner upstream the route's retry makes one attempt")
	require.NoError(t, get(t, client, backend.URL))
	require.EqualValues(t, 4, hits.Load(), "on its own the route's retry makes 3")
}
