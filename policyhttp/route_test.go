package policyhttp_test

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// TestRoutes_MatchesAsServeMux: the most specific pattern wins whatever the order,
// host patterns win over hostless ones, and what matches nothing (or what a ServeMux
// would redirect) gets the default.
func TestRoutes_MatchesAsServeMux(t *testing.T) {
	rt := policy.Must(policyhttp.NewRoutes(
		policyhttp.Route{Pattern: "/", Name: "root"},
		policyhttp.Route{Pattern: "", Name: "default"},
		policyhttp.Route{Pattern: "GET /v1/", Name: "v1-reads"},
		policyhttp.Route{Pattern: "POST /v1/charges/{id}", Name: "charge"},
		policyhttp.Route{Pattern: "api.example.com/v1/", Name: "api-host"},
		policyhttp.Route{Pattern: "/v2/items/", Name: "v2"},
	))
	for _, c := range []struct {
		method, url, host, want string
	}{
		{"GET", "http://svc/v1/users", "", "v1-reads"},
		{"HEAD", "http://svc/v1/users", "", "v1-reads"},             // GET patterns match HEAD, as ServeMux does
		{"POST", "http://svc/v1/charges/42", "", "charge"},          // a wildcard segment
		{"POST", "http://svc/v1/other", "", "root"},                 // no POST /v1/: "/" matches
		{"GET", "http://api.example.com:8443/v1/x", "", "api-host"}, // the host, without its port, wins
		{"GET", "http://10.0.0.1/v1/x", "api.example.com", "api-host"},
		{"GET", "http://svc/v2/items", "", "default"},        // ServeMux would redirect to /v2/items/
		{"GET", "http://svc/v1/../v2/items/", "", "default"}, // not clean: ServeMux would redirect
	} {
		req, err := http.NewRequest(c.method, c.url, nil)
		require.NoError(t, err)
		if c.host != "" {
			req.Host = c.host
		}
		got := "<nil>"
		if r := rt.Match(req); r != nil {
			got = r.Name
		}
		if got != c.want {
			t.Errorf("Match(%s %s, Host %q) = %s, want %s", c.method, c.url, c.host, got, c.want)
		}
	}
	// An outgoing request built by hand may leave Host empty: the URL's host is used.
	req := &http.Request{Method: "GET", URL: mustURL(t, "http://api.example.com/v1/x"), Header: http.Header{}}
	require.Equal(t, "api-host", rt.Match(req).Name)
	require.Empty(t, req.Host, "Match must not modify the request")

	var none *policyhttp.Routes
	require.Nil(t, none.Match(req), "a nil table matches nothing")
	require.Nil(t, policy.Must(policyhttp.NewRoutes(policyhttp.Route{Pattern: "/x/"})).Match(req), "no default: nil")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestNewRoutes_RefusesBadTables names the route at fault and says why.
func TestNewRoutes_RefusesBadTables(t *testing.T) {
	for _, c := range []struct {
		routes []policyhttp.Route
		want   string
	}{
		{[]policyhttp.Route{{Pattern: "GET"}}, "route 1: "},
		{[]policyhttp.Route{{Pattern: "/a/{x"}}, "route 1: "},
		{[]policyhttp.Route{{Pattern: "/a/"}, {Pattern: "/a/{x}"}, {Pattern: "/a/{y}"}}, "route 3: "},
		{[]policyhttp.Route{{Pattern: "GET /{x}/b"}, {Pattern: "GET /a/{y}"}}, `route 2: pattern "GET /a/{y}" conflicts with pattern "GET /{x}/b": GET /a/{y} and GET /{x}/b both match some paths`},
		{[]policyhttp.Route{{Pattern: "GET"}}, `route 1: parsing "GET": at offset 0: host/path missing /`},
		{[]policyhttp.Route{{}, {Pattern: "/"}, {}}, "routes 1 and 3 are both the default"},
	} {
		_, err := policyhttp.NewRoutes(c.routes...)
		if !errors.Is(err, policyhttp.ErrInvalidRoute) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRoutes(%v) = %v, want ErrInvalidRoute containing %q", c.routes, err, c.want)
		}
	}
}

// TestRouterTransport_PipelinePerRoute: on a real server, a route with a retry makes
// three attempts, a route without one a single attempt, and the default its own.
func TestRouterTransport_PipelinePerRoute(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	clock := policytest.NewClock(t0).AutoAdvance(true)
	retrying := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: zeroRand{}}))))
	twice := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2, Clock: clock, Rand: zeroRand{}}))))
	rt := policy.Must(policyhttp.NewRoutes(
		policyhttp.Route{Pattern: "GET /reads/", Pipeline: retrying},
		policyhttp.Route{Pattern: "GET /once/", Pipeline: policy.NoProtection()}, // one attempt
		policyhttp.Route{Pipeline: twice},
		policyhttp.Route{Pattern: "GET /ok/", Pipeline: retrying, Classifier: func(*http.Response, time.Time) error { return nil }},
	))
	client := &http.Client{Transport: policyhttp.NewRouterTransport(nil, rt, policyhttp.Options{})}
	for _, c := range []struct {
		path string
		want int // requests the server sees
	}{
		{"/reads/a", 3},
		{"/once/a", 1},
		{"/elsewhere", 2}, // the default
		{"/ok/a", 1},      // the route's classifier takes every 503 for a success
	} {
		before := srv.count()
		res, err := client.Get(srv.URL + c.path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if got := srv.count() - before; got != c.want {
			t.Errorf("GET %s: the server saw %d requests, want %d", c.path, got, c.want)
		}
	}
}
