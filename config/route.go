package config

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyhttp"
)

// statusClassifier is policyhttp.DefaultClassifier with the statuses retried replaced
// by set: a status in it is retried (Retry-After still honoured), one outside it is
// not. A Backstop server's refusal (callpath.HeaderRefused) is retried after its
// Retry-After whatever the set says: the server asked to be called again.
func statusClassifier(set map[int]bool) policyhttp.Classifier {
	return func(res *http.Response, now time.Time) error {
		err := policyhttp.DefaultClassifier(res, now)
		m := fault.Of(err)
		if err == nil || m.Refused {
			return err
		}
		retryable := m.Retryable
		switch {
		case set[res.StatusCode] && !retryable:
			return fault.Retryable(err)
		case !set[res.StatusCode] && retryable:
			return fault.Permanent(err)
		}
		return err
	}
}

func (b *builder) stackOf(ref *string, path string) *stack {
	if ref == nil {
		return nil
	}
	c := b.current
	if st, ok := c.byName[*ref]; ok {
		return st
	}
	pos := b.d.pos[path]
	names := make([]string, 0, len(c.stacks))
	for _, s := range c.stacks {
		names = append(names, s.name)
	}
	fix := fmt.Sprintf("add a stack %q under stacks:", *ref)
	if len(names) > 0 {
		fix = oneOf(*ref, names)
	}
	b.d.probs = append(b.d.probs, Problem{Pos: pos, Path: path, Msg: fmt.Sprintf("names no stack %q", *ref), Fix: fix})
	return nil
}

func (b *builder) httpRoutes(c *Config, h *HTTPRoutes) {
	if h == nil {
		return
	}
	var routes []policyhttp.Route
	if st := b.stackOf(h.Default, "http.default"); st != nil {
		routes = append(routes, policyhttp.Route{Name: st.name, Pipeline: st.pipeline, Classifier: st.classify})
		c.httpRoutes = append(c.httpRoutes, routeInfo{Stack: st.name, Pos: b.d.pos["http.default"]})
	}
	for i, r := range h.Routes {
		path := fmt.Sprintf("http.routes[%d]", i)
		st := b.routeStack(path, "match", r.Match != nil && *r.Match != "",
			"add match: an http.ServeMux pattern such as \"GET /v1/\" (http.default is the default route)", r.Stack)
		if st == nil {
			continue
		}
		// Each pattern is checked alone first, so that every bad one is reported.
		if _, err := policyhttp.NewRoutes(policyhttp.Route{Pattern: *r.Match}); err != nil {
			b.d.probs = append(b.d.probs, Problem{Pos: b.d.pos[path+".match"], Path: path + ".match", Msg: tableMsg(err, policyhttp.ErrInvalidRoute),
				Fix: `want an http.ServeMux pattern, "[METHOD ][HOST]/[PATH]", such as "GET /v1/items/{id}"`, Err: err})
			continue
		}
		routes = append(routes, policyhttp.Route{Pattern: *r.Match, Name: st.name, Pipeline: st.pipeline, Classifier: st.classify})
		c.httpRoutes = append(c.httpRoutes, routeInfo{Match: *r.Match, Stack: st.name, Pos: b.d.pos[path+".match"]})
	}
	rt, err := policyhttp.NewRoutes(routes...)
	if err != nil {
		// Two patterns that conflict: place it at the later one.
		at := "http"
		var n int
		if _, e := fmt.Sscanf(strings.TrimPrefix(err.Error(), policyhttp.ErrInvalidRoute.Error()+": "), "route %d:", &n); e == nil && n >= 1 && n <= len(c.httpRoutes) {
			ri := c.httpRoutes[n-1]
			for i, r := range h.Routes {
				if r.Match != nil && *r.Match == ri.Match {
					at = fmt.Sprintf("http.routes[%d].match", i)
				}
			}
		}
		b.d.probs = append(b.d.probs, Problem{Pos: b.d.pos[at], Path: at, Msg: tableMsg(err, policyhttp.ErrInvalidRoute),
			Fix: "make one of the two patterns more specific, or remove one", Err: err})
		return
	}
	c.http = rt
}

// routeStack checks route path's match (its field, given when present; add says
// how to add it) and stack reference, and returns the stack, or nil after
// recording what is missing or wrong.
func (b *builder) routeStack(path, field string, present bool, add string, ref *string) *stack {
	switch {
	case !present:
		b.d.probs = append(b.d.probs, Problem{Pos: b.d.pos[path], Path: path + "." + field, Msg: "is missing", Fix: add})
		return nil
	case ref == nil:
		b.d.probs = append(b.d.probs, Problem{Pos: b.d.pos[path], Path: path + ".stack", Msg: "is missing",
			Fix: "add stack: one of " + strings.Join(b.current.Stacks(), ", ")})
		return nil
	}
	return b.stackOf(ref, path+".stack")
}

// tableMsg is a routing table's error (sentinel: its ErrInvalidRoute) as a problem's
// message: without the sentinel's words or the route's number, which the problem's
// place says, nor a fix, which the problem's own Fix says.
func tableMsg(err, sentinel error) string {
	msg := strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "route ") {
		msg = msg[i+2:]
	}
	msg, _, _ = strings.Cut(msg, "; want ")
	return msg
}

func (b *builder) grpcRoutes(c *Config, g *GRPCRoutes) {
	if g == nil {
		return
	}
	var routes []policygrpc.Route
	add := func(name string, st *stack, pos Pos) {
		routes = append(routes, policygrpc.Route{Name: name, Stack: st.name, Pipeline: st.pipeline, StreamPipeline: st.stream, RetryableCodes: st.codes})
		c.grpcRoutes = append(c.grpcRoutes, routeInfo{Match: name, Stack: st.name, Pos: pos})
	}
	if st := b.stackOf(g.Default, "grpc.default"); st != nil {
		add("", st, b.d.pos["grpc.default"])
	}
	seen := make(map[string]string)
	for i, r := range g.Routes {
		path := fmt.Sprintf("grpc.routes[%d]", i)
		st := b.routeStack(path, "name", r.Name != nil && strings.Trim(*r.Name, "/") != "",
			"add name: \"pkg.Service/Method\" or \"pkg.Service\" (grpc.default is the default route)", r.Stack)
		if st == nil {
			continue
		}
		if _, err := policygrpc.NewRoutes(policygrpc.Route{Name: *r.Name}); err != nil {
			b.d.probs = append(b.d.probs, Problem{Pos: b.d.pos[path+".name"], Path: path + ".name", Msg: tableMsg(err, policygrpc.ErrInvalidRoute),
				Fix: `want "pkg.Service/Method" or "pkg.Service", such as "payments.v1.Payments/Charge"`, Err: err})
			continue
		}
		key := strings.TrimPrefix(*r.Name, "/")
		if prev, ok := seen[key]; ok {
			b.d.probs = append(b.d.probs, Problem{Pos: b.d.pos[path+".name"], Path: path + ".name",
				Msg: fmt.Sprintf("%q is routed already, at %s", key, prev), Fix: "keep one of the two routes"})
			continue
		}
		seen[key] = path
		add(*r.Name, st, b.d.pos[path+".name"])
	}
	rt, err := policygrpc.NewRoutes(routes...)
	if err != nil {
		b.d.probs = append(b.d.probs, Problem{Pos: b.d.pos["grpc"], Path: "grpc", Msg: tableMsg(err, policygrpc.ErrInvalidRoute),
			Fix: "give each route a name of its own", Err: err})
		return
	}
	c.grpc = rt
}

// GRPC returns the configuration's gRPC routing table, a policygrpc.Router (see
// policygrpc.RouterDialOptions); nil, which matches nothing, if the file has no grpc
// section.
func (c *Config) GRPC() *policygrpc.Routes { return c.grpc }

// HTTP returns the configuration's HTTP routing table, a policyhttp.Router (see
// policyhttp.NewRouterTransport); nil, which matches nothing, if the file has no http
// section.
func (c *Config) HTTP() *policyhttp.Routes { return c.http }

// Pipeline returns the pipeline of the stack named name. A name the configuration
// does not hold — a typo, a stack removed from the file — gets a pipeline that runs
// nothing and fails every call with an error matching [ErrNoStack] that names the
// stacks there are: a typo must not run calls bare, without the protection the
// stack was meant to give. [Config.Lookup] tells it at start-up instead.
func (c *Config) Pipeline(name string) *policy.Pipeline {
	p, err := c.Lookup(name)
	if err != nil {
		return policy.Must(policy.Wrap(noStack{err}, policy.Name(name)))
	}
	return p
}

// ErrNoStack is matched by the error of a stack name the configuration does not hold.
var ErrNoStack = errors.New("config: no such stack")

// Lookup returns the pipeline of the stack named name, or an error matching
// [ErrNoStack] that names the stacks there are.
func (c *Config) Lookup(name string) (*policy.Pipeline, error) {
	if st, ok := c.byName[name]; ok {
		return st.pipeline, nil
	}
	names := c.Stacks()
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: %q: the configuration holds no stack", ErrNoStack, name)
	}
	return nil, fmt.Errorf("%w: %q; the stacks are %s", ErrNoStack, name, strings.Join(names, ", "))
}

// Classifier returns the classifier the stack named name judges HTTP responses with
// (its retry's http_statuses, or policyhttp.DefaultClassifier's), as its HTTP routes
// use it; nil, meaning policyhttp.DefaultClassifier, for a stack the configuration
// does not hold or one that names no statuses.
func (c *Config) Classifier(name string) policyhttp.Classifier {
	if st, ok := c.byName[name]; ok {
		return st.classify
	}
	return nil
}

// noStack is the one stage of the pipeline of a stack name the configuration does
// not hold: every call fails with err, and nothing runs.
type noStack struct{ err error }

func (noStack) Placement() policy.Placement { return policy.Placement{Kind: "no_stack", Free: true} }

func (n noStack) Bind(policy.Runner, policy.Env) policy.Runner {
	return policy.RunnerFunc(func(context.Context, policy.Func) error { return n.err })
}

// Stacks returns the names of the configuration's stacks, in file order.
func (c *Config) Stacks() []string {
	names := make([]string, len(c.stacks))
	for i, s := range c.stacks {
		names[i] = s.name
	}
	return names
}

// Stage returns the policy object of a stack's stage (a *breaker.Breaker for
// "breaker", …), for inspection; nil if the stack has no such stage. A retry is a
// *retry.Retry, except that with max_hint off it is a policy wrapping one (which
// takes the servers' hints off its attempts' errors).
func (c *Config) Stage(stack, stage string) policy.Policy {
	if st, ok := c.byName[stack]; ok {
		return st.stages[stage]
	}
	return nil
}

// Order returns a stack's stages, outermost first.
func (c *Config) Order(stack string) []string {
	if st, ok := c.byName[stack]; ok {
		return append([]string(nil), st.order...)
	}
	return nil
}
