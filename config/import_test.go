package config_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
)

// attemptTimeoutOf returns the limit of an explanation's per-attempt timeout; 0 if
// it has none.
func attemptTimeoutOf(e policy.Explanation) any {
	for _, st := range e.Stack {
		if st.Kind == deadline.KindAttempt {
			return st.Limit
		}
	}
	return nil
}

// envoyFiles are the Envoy configs the round trip is tried on: the seed as pasted,
// the CLI's example routes, and every lint example that Envoy accepts.
func envoyFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../cmd/backstop/testdata/seed-envoy-route.yaml", "../cmd/backstop/testdata/route.yaml", "../policyenvoy/testdata/route.yaml"}
	more, err := os.ReadDir("../cmd/backstop/testdata/lint")
	require.NoError(t, err)
	for _, f := range more {
		if strings.HasSuffix(f.Name(), ".yaml") && !strings.HasSuffix(f.Name(), ".backstop.yaml") {
			files = append(files, "../cmd/backstop/testdata/lint/"+f.Name())
		}
	}
	return files
}

// TestImportEnvoy_ExplainsAsTheRoute: an Envoy route imported into the model, and
// written and read back, builds a stack that does what policyenvoy's own pipeline
// does — the same retry owner, attempts, back-off, per-try timeout and worst case.
func TestImportEnvoy_ExplainsAsTheRoute(t *testing.T) {
	for _, path := range envoyFiles(t) {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		routes, err := policyenvoy.Parse(data)
		if err != nil {
			continue // a lint example of a config Envoy refuses
		}
		im := config.ImportEnvoy(path, routes)
		c, err := im.Build(config.Options{})
		require.NoError(t, err, "%s", path)
		yml, err := config.Encode(im.File)
		require.NoError(t, err)
		back, err := config.Parse("converted.yaml", yml, config.Options{})
		require.NoError(t, err, "%s converted:\n%s", path, yml)
		for i, r := range routes {
			stack := c.Stacks()[i]
			o, ok := c.Origin(stack)
			require.True(t, ok, "%s: stack %s has no origin", path, stack)
			require.Same(t, r, o.Route)
			want := r.Explain()
			for _, got := range []policy.Explanation{c.Pipeline(stack).Explain(), back.Pipeline(stack).Explain()} {
				require.Equal(t, want.MaxAttempts, got.MaxAttempts, "%s %s: attempts", path, r.Name)
				require.Equal(t, want.MaxAttemptsPerCallPath, got.MaxAttemptsPerCallPath, "%s %s: the retry owner's", path, r.Name)
				require.Equal(t, want.WorstCase, got.WorstCase, "%s %s: the worst case", path, r.Name)
				require.Equal(t, want.WorstCaseFrom, got.WorstCaseFrom, "%s %s: what bounds it", path, r.Name)
				require.Equal(t, attemptTimeoutOf(want), attemptTimeoutOf(got), "%s %s: the per-try timeout", path, r.Name)
				require.Equal(t, sleepsOf(want.Stack), sleepsOf(got.Stack), "%s %s: the back-off", path, r.Name)
			}
		}
	}
}

// TestImportEnvoy_RoutesAsEnvoy: each route's match and domains become the patterns
// that send a request to its stack.
func TestImportEnvoy_RoutesAsEnvoy(t *testing.T) {
	routes, err := policyenvoy.Parse([]byte(`virtual_hosts:
- name: api
  domains: [api.example.com]
  routes:
  - match: {prefix: /v1/}
    route: {cluster: a, retry_policy: {retry_on: 5xx, num_retries: 2}}
  - match: {path: /health}
    route: {cluster: a}
  - match: {prefix: /orders}
    route: {cluster: a}
  - match: {safe_regex: {regex: "/v[0-9]+/x"}}
    route: {cluster: a}
`))
	require.NoError(t, err)
	im := config.ImportEnvoy("routes.yaml", routes)
	c, err := im.Build(config.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"prefix_v1", "path_health", "prefix_orders", "regex_v_0-9_x"}, c.Stacks())
	for _, tt := range []struct{ url, stack string }{
		{"http://api.example.com/v1/charges", "prefix_v1"},
		{"http://api.example.com/health", "path_health"},
		{"http://api.example.com/orders", "prefix_orders"},
		{"http://api.example.com/orders/7", "prefix_orders"},
		{"http://other.example.com/v1/charges", ""},
	} {
		got := ""
		if r := c.HTTP().Match(mustRequest(t, tt.url)); r != nil {
			got = r.Name
		}
		require.Equal(t, tt.stack, got, "%s", tt.url)
	}
	var reasons []string
	for _, n := range im.Notes {
		reasons = append(reasons, n.Reason+" "+n.Field)
	}
	require.Contains(t, reasons, "differs match.prefix")         // /orders also matches /ordersx in Envoy
	require.Contains(t, reasons, "not-carried match.safe_regex") // no pattern says a regex
}

// TestImportEnvoy_APathWithoutASlashMatchesNothing: every request's path begins with
// "/", so an Envoy match that does not matches nothing. It becomes no pattern — as a
// pattern "  /" is "/" to ServeMux, every path, and conflicted with the next route's
// "/" (found by FuzzImportEnvoy) — and a note says so; the configuration builds.
func TestImportEnvoy_APathWithoutASlashMatchesNothing(t *testing.T) {
	routes, err := policyenvoy.Parse([]byte(`virtual_hosts:
- name: a
  domains: ["*"]
  routes:
  - {match: {prefix: "  "}, route: {cluster: a}}
  - {match: {path: "x"}, route: {cluster: a}}
  - {match: {prefix: ""}, route: {cluster: a}}
`))
	require.NoError(t, err)
	im := config.ImportEnvoy("routes.yaml", routes)
	c, err := im.Build(config.Options{})
	require.NoError(t, err)
	require.Len(t, c.Stacks(), 3)
	var notes []string
	for _, n := range im.Notes {
		if n.Reason == config.NoteNotCarried {
			notes = append(notes, n.Field+" "+n.Value)
		}
	}
	require.Equal(t, []string{"match.prefix   ", "match.path x"}, notes)
	r := c.HTTP().Match(mustRequest(t, "http://h/anything"))
	require.NotNil(t, r)
	require.Equal(t, c.Stacks()[2], r.Name, "every path goes to the route that matches it in Envoy")
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// TestRetry_MaxHintOffWaitsNoHint: with max_hint off a retry waits its back-off
// whatever the server asks, and its explanation counts no hint in the worst case.
func TestRetry_MaxHintOffWaitsNoHint(t *testing.T) {
	c, err := config.Parse("b.yaml", []byte("stacks: {a: {retry: {attempts: 2, base: 1ms, cap: 1ms, max_hint: off}, attempt_timeout: 100ms}}"), config.Options{})
	require.NoError(t, err)
	calls := 0
	start := time.Now()
	err = c.Pipeline("a").Do(context.Background(), func(context.Context) error {
		calls++
		if calls == 1 {
			return fault.After(errors.New("busy"), 10*time.Second) // Retry-After: 10
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.Less(t, time.Since(start), 5*time.Second, "the retry waited the server's 10s")
	e := c.Pipeline("a").Explain()
	require.Equal(t, 200*time.Millisecond+time.Millisecond, e.WorstCase, "two attempts of 100ms and a wait of at most 1ms")
	require.Contains(t, e.Stack[0].Summary, "waits no server hint (max_hint off)")
}

// TestHedge_GRPCCodesAreItsNonFatalCodes: a hedge's grpc_codes are read and checked as
// a retry's are.
func TestHedge_GRPCCodesAreItsNonFatalCodes(t *testing.T) {
	_, err := config.Parse("b.yaml", []byte("stacks: {a: {hedge: {attempts: 2, delay: 10ms, grpc_codes: [UNAVAILABLE, NOPE]}}}"), config.Options{})
	require.ErrorContains(t, err, `b.yaml:1:74: stacks.a.hedge.grpc_codes[1]: is "NOPE"`)
}
