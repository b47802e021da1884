package policyhttp_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// recorder keeps the events it observes.
type recorder struct {
	mu     sync.Mutex
	events []event.Event
}

func (r *recorder) Observe(e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// lines gives the events of kinds as "kind stage attempt reason".
func (r *recorder) lines(kinds ...event.Kind) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		for _, k := range kinds {
			if e.Kind == k {
				out = append(out, strings.TrimSpace(e.Kind.String()+" "+e.Stage+" "+strconv.Itoa(e.Attempt)+" "+e.Reason))
			}
		}
	}
	return out
}

func fetchVia(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.NoError(t, res.Body.Close())
	return res
}

func retryingN(n int) *policy.Pipeline {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	return policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: n, Clock: clock, Strategy: retry.None{}}))))
}

// TestTransport_TellsEnvoyNotToRetryBeneathTheOwner: every attempt made under a
// retry owner carries x-envoy-max-retries: 0 by default; a call under no owner, and
// every call with MeshNone, carries none.
func TestTransport_TellsEnvoyNotToRetryBeneathTheOwner(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	owned := &http.Client{Transport: policyhttp.NewTransport(nil, retryingN(3), policyhttp.Options{})}
	fetchVia(t, owned, s.URL) // 503, then 200
	bare := &http.Client{Transport: policyhttp.NewTransport(nil, policy.NoProtection(), policyhttp.Options{})}
	fetchVia(t, bare, s.URL)
	none := &http.Client{Transport: policyhttp.NewTransport(nil, retryingN(3), policyhttp.Options{Mesh: callpath.MeshNone})}
	fetchVia(t, none, s.URL)
	require.Equal(t, []string{"0", "0", "", ""}, s.header(callpath.HeaderEnvoyMaxRetries),
		"two owned attempts, then a call under no owner, then one with MeshNone")
	require.Equal(t, []string{"1", "2", "", "1"}, s.header(callpath.HeaderAttempt))
}

// TestTransport_MeshOwnsOneAttemptCountedThrice: with MeshEnvoyOwns the pipeline
// makes one attempt, sends no x-envoy-max-retries, and counts the three attempts the
// mesh says it made in its events, its metrics and its budget.
func TestTransport_MeshOwnsOneAttemptCountedThrice(t *testing.T) {
	s := newServer(t, status(http.StatusServiceUnavailable, callpath.HeaderEnvoyAttempt, "3"))
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	reg := prometheus.NewRegistry()
	m := policy.Must(metrics.New(reg, metrics.Options{}))
	rec := &recorder{}
	obs := event.Observers(m, rec)
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock})),
		policy.Name("orders"), policy.Observe(obs)))
	// MeshBudget and MeshObserver are left nil: the pipeline's own are charged and told.
	c := &http.Client{Transport: policyhttp.NewTransport(nil, p, policyhttp.Options{Mesh: callpath.MeshEnvoyOwns})}

	res := fetchVia(t, c, s.URL)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "the mesh's last answer")
	require.Equal(t, 1, s.count(), "the pipeline made one attempt; the mesh retried")
	require.Equal(t, []string{""}, s.header(callpath.HeaderEnvoyMaxRetries), "the mesh may retry")
	require.Equal(t, []string{"1"}, s.header(callpath.HeaderAttempt), "the server below sees the call as owned")
	require.Equal(t, []string{
		"attempt_end mesh 1", "retry_scheduled mesh 2 mesh",
		"attempt_end mesh 2", "retry_scheduled mesh 3 mesh",
		"attempt_end retry 1", // the pipeline's one attempt: the mesh's third
	}, rec.lines(event.AttemptEnd, event.RetryScheduled))
	require.Equal(t, []string{"retry_suppressed retry 1 owner"}, rec.lines(event.RetrySuppressed))
	// tokens 7 = 10 − 2 (the mesh's failed attempts 1, 2) − 1 (its attempt 3, the pipeline's)
	require.InDelta(t, 7, b.Tokens(), 1e-9)
	require.InDelta(t, 3, testutil.ToFloat64(metricVec(t, reg, "backstop_attempts_total", "orders", "failure")), 0)
	require.InDelta(t, 2, testutil.ToFloat64(metricVec(t, reg, "backstop_retries_total", "orders", "mesh")), 0)
}

// metricVec finds the value of one series of name with label values vs, as a Collector.
func metricVec(t *testing.T, reg *prometheus.Registry, name string, vs ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			got := map[string]bool{}
			for _, l := range m.GetLabel() {
				got[l.GetValue()] = true
			}
			for _, v := range vs {
				if !got[v] {
					continue metric
				}
			}
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(m.GetCounter().GetValue())
			return g
		}
	}
	t.Fatalf("no series %s%v", name, vs)
	return nil
}

// TestTransport_ASpentBudgetTellsTheMeshToStop: once the budget refuses a retry the
// mesh made, the calls the mesh owns tell it not to retry, until the budget allows
// a retry again.
func TestTransport_ASpentBudgetTellsTheMeshToStop(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.Header().Set(callpath.HeaderEnvoyAttempt, "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set(callpath.HeaderEnvoyAttempt, "1")
	})
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 4, TokenRatio: 4}))
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 3}))))
	c := &http.Client{Transport: policyhttp.NewTransport(nil, p, policyhttp.Options{Mesh: callpath.MeshEnvoyOwns, MeshBudget: b})}

	fetchVia(t, c, s.URL) // tokens 4 → 3 (mesh attempt 1; retry allowed, 3 > 2) → 2 (attempt 2; retry refused, 2 ≯ 2) → 1 (attempt 3)
	fetchVia(t, c, s.URL) // the budget still refuses (1 ≯ 2): the mesh is told not to retry; a success refills to 4
	fetchVia(t, c, s.URL) // the budget allows a retry again (4 > 2): the mesh may retry
	require.Equal(t, []string{"", "0", ""}, s.header(callpath.HeaderEnvoyMaxRetries))
}

// TestTransport_CountsAMeshThatRetriedBeneathTheOwner: an Envoy that did not honour
// x-envoy-max-retries (an external downstream, say) and retried anyway is counted.
func TestTransport_CountsAMeshThatRetriedBeneathTheOwner(t *testing.T) {
	s := newServer(t, status(http.StatusOK, callpath.HeaderEnvoyAttempt, "2"))
	rec := &recorder{}
	c := &http.Client{Transport: policyhttp.NewTransport(nil, retryingN(3), policyhttp.Options{MeshObserver: rec})}
	fetchVia(t, c, s.URL)
	require.Equal(t, []string{"0"}, s.header(callpath.HeaderEnvoyMaxRetries))
	require.Equal(t, []string{"attempt_end mesh 1", "retry_scheduled mesh 2 mesh"}, rec.lines(event.AttemptEnd, event.RetryScheduled))

	none := &http.Client{Transport: policyhttp.NewTransport(nil, retryingN(3), policyhttp.Options{Mesh: callpath.MeshNone, MeshObserver: rec})}
	fetchVia(t, none, s.URL)
	require.Len(t, rec.lines(event.AttemptEnd), 1, "MeshNone reads no Envoy header")
}

// TestTransport_AndMiddlewareAgreeOnTheOwner: what a Backstop client sends, a
// Backstop server reads as a call owned upstream, whoever owns it: the client's
// retry, or the mesh beneath it.
func TestTransport_AndMiddlewareAgreeOnTheOwner(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	h := policyhttp.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		n, upstream, ok := callpath.Attempt(r.Context())
		mu.Lock()
		seen = append(seen, strconv.Itoa(n)+" "+strconv.FormatBool(upstream && ok))
		mu.Unlock()
	}))
	url := newServerHandler(t, h)
	for _, mesh := range []callpath.Mesh{callpath.MeshBackstopOwns, callpath.MeshEnvoyOwns, callpath.MeshNone} {
		c := &http.Client{Transport: policyhttp.NewTransport(nil, retryingN(3), policyhttp.Options{Mesh: mesh})}
		fetchVia(t, c, url)
	}
	require.Equal(t, []string{"1 true", "1 true", "1 true"}, seen)
}
