package policygrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/backstop-go/backstop/policy"
)

// ErrInvalidRoute is matched by every error of [NewRoutes].
var ErrInvalidRoute = errors.New("policygrpc: invalid route")

// Route is one entry of a gRPC routing table: the RPCs it names run through a
// pipeline. Routes are matched as a service config's methodConfig names are: a route
// naming the method wins over one naming its service, which wins over the default.
type Route struct {
	// Name is "pkg.Service/Method" (one method), "pkg.Service" (every method of the
	// service without a route of its own), or "" (the default, for every RPC no
	// other route names). A leading "/" is allowed, as in a full method name.
	Name string
	// Stack names the route in explanations (a config's stack name); "" means Name.
	Stack string
	// Pipeline runs the route's unary RPCs; nil sends them with no pipeline.
	Pipeline *policy.Pipeline
	// StreamPipeline runs the route's streams; nil means Pipeline. A pipeline with a
	// hedge needs one without it here: streams are retried, never hedged.
	StreamPipeline *policy.Pipeline
	// RetryableCodes are the status codes retried; nil means {DefaultRetryableCode}.
	RetryableCodes []codes.Code

	c *classifier // built by NewRoutes
}

// A Router chooses the route of each RPC by its full method name
// ("/pkg.Service/Method"), for [RouterDialOptions]. Match must be safe for
// concurrent use; it returns nil when no route applies (the RPC is then sent with no
// pipeline, its attempt metadata still carried).
type Router interface {
	Match(fullMethod string) *Route
}

// Routes is a gRPC routing table. It is immutable and safe for concurrent use. Build
// it with [NewRoutes]; the zero value matches nothing.
type Routes struct {
	methods  map[string]*Route // "pkg.Service/Method"
	services map[string]*Route // "pkg.Service"
	def      *Route
	routes   []Route
}

// NewRoutes returns the routing table of routes, or an error matching ErrInvalidRoute
// naming the first bad route: a name that is not "pkg.Service/Method",
// "pkg.Service" or "", or a name given twice.
func NewRoutes(routes ...Route) (*Routes, error) {
	rt := &Routes{methods: make(map[string]*Route), services: make(map[string]*Route), routes: append([]Route(nil), routes...)}
	for i := range rt.routes {
		r := &rt.routes[i]
		r.c = newClassifier(Options{RetryableCodes: r.RetryableCodes})
		name := strings.TrimPrefix(r.Name, "/")
		service, method, hasMethod := strings.Cut(name, "/")
		var m map[string]*Route
		switch {
		case name == "":
			if rt.def != nil {
				return nil, fmt.Errorf("%w: routes %d and %d are both the default (Name \"\"); keep one", ErrInvalidRoute, index(rt.routes, rt.def)+1, i+1)
			}
			rt.def = r
			continue
		case service == "" || strings.ContainsAny(name, " \t\n") || (hasMethod && (method == "" || strings.Contains(method, "/"))):
			return nil, fmt.Errorf("%w: route %d: name %q; want \"pkg.Service/Method\", \"pkg.Service\" or \"\" for the default", ErrInvalidRoute, i+1, r.Name)
		case hasMethod:
			m = rt.methods
		default:
			m = rt.services
		}
		if prev, ok := m[name]; ok {
			return nil, fmt.Errorf("%w: routes %d and %d both name %q; keep one", ErrInvalidRoute, index(rt.routes, prev)+1, i+1, name)
		}
		m[name] = r
	}
	return rt, nil
}

func index(rs []Route, r *Route) int {
	for i := range rs {
		if &rs[i] == r {
			return i
		}
	}
	return -1
}

// Match returns the route of fullMethod ("/pkg.Service/Method"): the route naming
// the method, else the one naming its service, else the default; nil if none.
func (rt *Routes) Match(fullMethod string) *Route {
	if rt == nil {
		return nil
	}
	name := strings.TrimPrefix(fullMethod, "/")
	if r, ok := rt.methods[name]; ok {
		return r
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		if r, ok := rt.services[name[:i]]; ok {
			return r
		}
	}
	return rt.def
}

// Routes returns the table's routes in the order given.
func (rt *Routes) Routes() []Route {
	if rt == nil {
		return nil
	}
	return append([]Route(nil), rt.routes...)
}

// classifierOf returns the route's classifier: NewRoutes builds one per route; a
// route made elsewhere gets one per call.
func (r *Route) classifierOf() *classifier {
	if r.c != nil {
		return r.c
	}
	return newClassifier(Options{RetryableCodes: r.RetryableCodes})
}

// RouterUnaryClientInterceptor is [UnaryClientInterceptor] with a pipeline chosen per
// RPC by r. r may change its answers over time (a configuration reloaded): an RPC
// runs to its end on the route it was matched to when it started. One retry owner per
// call path holds as with one pipeline: a route's retry owns the attempts it makes,
// and an RPC made under an owner fails fast whatever its route says.
func RouterUnaryClientInterceptor(r Router) grpc.UnaryClientInterceptor {
	none := newClassifier(Options{})
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		rt := r.Match(method)
		if rt == nil {
			return unary(ctx, nil, none, method, req, reply, cc, invoker, opts)
		}
		return unary(ctx, rt.Pipeline, rt.classifierOf(), method, req, reply, cc, invoker, opts)
	}
}

// RouterStreamClientInterceptor is [RetryStreamClientInterceptor] with a pipeline
// chosen per stream by r (the route's StreamPipeline, else its Pipeline), with the
// default replay buffer.
func RouterStreamClientInterceptor(r Router) grpc.StreamClientInterceptor {
	none := newClassifier(Options{})
	limit := replayLimit(0)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		rt := r.Match(method)
		if rt == nil {
			return newRetryStream(ctx, nil, none, limit, desc, cc, method, streamer, opts)
		}
		p := rt.StreamPipeline
		if p == nil {
			p = rt.Pipeline
		}
		return newRetryStream(ctx, p, rt.classifierOf(), limit, desc, cc, method, streamer, opts)
	}
}

// RouterDialOptions returns the dial options of a channel whose RPCs r routes: the
// unary and stream interceptors, and grpc.WithDisableRetry() so that grpc-go does not
// retry under Backstop's retries.
func RouterDialOptions(r Router) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(RouterUnaryClientInterceptor(r)),
		grpc.WithChainStreamInterceptor(RouterStreamClientInterceptor(r)),
		grpc.WithDisableRetry(),
	}
}
