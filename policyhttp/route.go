package policyhttp

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/backstop-go/backstop/policy"
)

// ErrInvalidRoute is matched by every error of [NewRoutes].
var ErrInvalidRoute = errors.New("policyhttp: invalid route")

// Route is one entry of a routing table. The requests a pattern matches run through a
// pipeline.
type Route struct {
	// Pattern is an http.ServeMux pattern (Go 1.22 syntax): "[METHOD ][HOST]/[PATH]".
	// Examples are "POST api.example.com/v1/charges/{id}", "GET /v1/" and "/". An empty
	// Pattern makes the route the table's default, for requests no pattern matches.
	Pattern string
	// Name names the route in explanations (a config's stack name); "" means Pattern.
	Name string
	// Pipeline runs the route's requests. A nil Pipeline fails them with
	// policy.ErrNoPipeline; policy.NoProtection() sends them bare on purpose.
	Pipeline *policy.Pipeline
	// Classifier judges the route's responses; nil means the transport's
	// (Options.Classifier, else DefaultClassifier).
	Classifier Classifier
}

// A Router chooses the route of each request, for [NewRouterTransport]. Match must be
// safe for concurrent use and must not modify req. It returns nil when no route
// applies; the request then fails with policy.ErrNoPipeline.
type Router interface {
	Match(req *http.Request) *Route
}

// Routes is a routing table matched as http.ServeMux matches. The most specific pattern
// wins, whatever the order the routes are given in. A host-specific pattern wins over
// one without a host. A request no pattern matches gets the default route. The matching
// is net/http's own: an internal http.ServeMux, used only to match, never to serve. Two
// differences follow from matching outgoing requests:
//   - The host is the request's Host, else its URL's host, with no port.
//   - Where a ServeMux would answer with a redirect (a path that is not clean, or
//     "/v1" when only "/v1/" is registered) or a 405, the request gets the default
//     route.
//
// A Routes is immutable and safe for concurrent use. Build it with [NewRoutes]; the
// zero value matches nothing.
type Routes struct {
	mux    *http.ServeMux
	routes []Route
	def    *Route
}

// routeHandler marks a match in the internal ServeMux: ServeMux answers the route's
// handler, whose index tells the route.
type routeHandler int

func (routeHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// NewRoutes returns the routing table of routes. If a route is bad, it returns an error
// matching ErrInvalidRoute that names the first bad one. A route is bad if
// http.ServeMux refuses its pattern (its message explains). It is bad if its pattern
// conflicts with another: both match some request and neither is more specific. A
// second default is bad too.
func NewRoutes(routes ...Route) (rt *Routes, err error) {
	rt = &Routes{mux: http.NewServeMux(), routes: append([]Route(nil), routes...)}
	for i := range rt.routes {
		r := &rt.routes[i]
		if r.Pattern == "" {
			if rt.def != nil {
				return nil, fmt.Errorf("%w: routes %d and %d are both the default (Pattern \"\"); keep one", ErrInvalidRoute, rt.index(rt.def)+1, i+1)
			}
			rt.def = r
			continue
		}
		if err := register(rt.mux, r.Pattern, routeHandler(i)); err != nil {
			return nil, fmt.Errorf("%w: route %d: %v", ErrInvalidRoute, i+1, err)
		}
	}
	return rt, nil
}

func (rt *Routes) index(r *Route) int {
	for i := range rt.routes {
		if &rt.routes[i] == r {
			return i
		}
	}
	return -1
}

// register adds a pattern to mux, turning ServeMux's panic on a bad or conflicting
// pattern into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			// ServeMux says where each pattern was registered: here, which tells the
			// caller nothing. The rest of its message explains.
			msg := registeredAt.ReplaceAllString(fmt.Sprint(v), "")
			err = errors.New(strings.ReplaceAll(strings.ReplaceAll(msg, ":\n", ": "), "\n", " "))
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

var registeredAt = regexp.MustCompile(` \(registered at [^)]*\)`)

// Match returns the route of req: the most specific pattern that matches it, else the
// default route. It returns nil if neither applies.
func (rt *Routes) Match(req *http.Request) *Route {
	if rt == nil || rt.mux == nil {
		return nil
	}
	probe := req
	if req.Host == "" && req.URL != nil && req.URL.Host != "" {
		r := *req // ServeMux matches on Host, which an outgoing request may leave to URL.Host
		r.Host = req.URL.Host
		probe = &r
	}
	if h, _ := rt.mux.Handler(probe); h != nil {
		if i, ok := h.(routeHandler); ok {
			return &rt.routes[i]
		}
	}
	return rt.def
}

// Routes returns the table's routes in the order given, the default among them.
func (rt *Routes) Routes() []Route {
	if rt == nil {
		return nil
	}
	return append([]Route(nil), rt.routes...)
}

// NewRouterTransport is [NewTransport] with a pipeline chosen per request. Each request
// runs through the pipeline of the route r.Match returns. It is judged by that route's
// Classifier if it has one. Over time r may change its answers, as when a configuration
// is reloaded. A request runs to its end on the route it was matched to when RoundTrip
// began: every attempt, and the reading of its body.
//
// Under one retry owner per call path nothing changes. A route's retry owns the
// requests it sends. A request made under an owner, in this process or another, fails
// fast whatever its route says.
func NewRouterTransport(next http.RoundTripper, r Router, o Options) http.RoundTripper {
	t := NewTransport(next, nil, o).(*transport)
	t.router = r
	return t
}
