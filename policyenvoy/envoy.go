// Package policyenvoy reads an Envoy route's retry policy — from YAML or JSON, into
// Envoy's own types (go-control-plane) and through Envoy's own validation — and builds
// the Backstop pipeline and policyhttp classifier that do the same, so that a retry
// policy can move between the mesh and the application, and [Route.Explain] can say
// what it will do before production finds out.
//
// # What is honoured
//
// The route's timeout (Envoy's default 15 s; 0 turns it off) becomes an overall
// deadline; retry_policy.num_retries (default 1) the attempts; per_try_timeout a
// per-attempt timeout; retry_back_off Envoy's fully jittered backoff (base 25 ms, max
// 10 × base); retry_on the conditions 5xx, gateway-error, reset, connect-failure,
// retriable-4xx, refused-stream and retriable-status-codes (with
// retriable_status_codes); rate_limited_retry_back_off's reset headers (seconds or a
// Unix timestamp, capped at max_interval) the delay of a rate-limited retry; and a
// response carrying x-envoy-ratelimited is retried only under envoy-ratelimited, as
// in Envoy.
//
// A field or condition Backstop cannot honour — retriable_headers,
// retriable_request_headers, retry_priority, retry_host_predicate,
// host_selection_retry_max_attempts, retry_options_predicates, per_try_idle_timeout,
// hedge_policy, and gRPC's retry conditions on an HTTP route — is listed by name in
// [Route.Unsupported], never silently dropped.
package policyenvoy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// Envoy's defaults, for fields a route leaves out.
const (
	DefaultRouteTimeout = 15 * time.Second
	DefaultNumRetries   = 1
	DefaultBaseInterval = 25 * time.Millisecond
	// The default max_interval is 10 × base_interval.
	defaultMaxIntervalFactor = 10
)

// ErrInvalid is matched by every error of [Parse].
var ErrInvalid = errors.New("policyenvoy: invalid route config")

// Route is one Envoy route's retry behaviour as Backstop pipeline and classifier.
type Route struct {
	// Name is the route's name, or its match ("prefix /api"), or "route N".
	Name string
	// Timeout is the route's timeout (0: none); PerTryTimeout each attempt's (0: none).
	Timeout, PerTryTimeout time.Duration
	// NumRetries is how many retries may follow the first attempt.
	NumRetries int
	// RetryOn are the retry_on conditions, as written.
	RetryOn []string
	// BaseInterval and MaxInterval are the backoff's.
	BaseInterval, MaxInterval time.Duration
	// Retrying reports whether the route retries at all (a retry_policy with
	// num_retries ≥ 1 and a condition).
	Retrying bool
	// Unsupported names each field or condition set on the route that Backstop cannot
	// honour, e.g. "retry_policy.retriable_headers".
	Unsupported []string
	// Pipeline runs a request as Envoy would: deadline, retry, per-attempt timeout.
	Pipeline *policy.Pipeline
	// Classifier judges responses as retry_on says, for policyhttp.WithClassifier.
	Classifier policyhttp.Classifier
}

// Explain says what the route's pipeline will do, under the route's name.
func (r *Route) Explain() policy.Explanation {
	return r.Pipeline.With(policy.Name(r.Name)).Explain()
}

// Parse reads Envoy route configuration from YAML or JSON: a RouteConfiguration
// (virtual_hosts), a VirtualHost (routes), a Route (match and route), or a RouteAction
// (cluster, timeout, retry_policy). It decodes into go-control-plane's types with
// protojson, runs Envoy's validation, and returns each route that forwards to a
// cluster, with its virtual host's retry_policy where the route has none.
func Parse(data []byte) ([]*Route, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var probe map[string]any
	if err := yaml.Unmarshal(js, &probe); err != nil || probe == nil {
		return nil, fmt.Errorf("%w: want an object (a RouteConfiguration, VirtualHost, Route or RouteAction)", ErrInvalid)
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := probe[k]; ok {
				return true
			}
		}
		return false
	}
	var vhosts []*routev3.VirtualHost
	switch {
	case has("virtual_hosts", "virtualHosts"):
		rc := &routev3.RouteConfiguration{}
		if err := decode(js, rc, "RouteConfiguration"); err != nil {
			return nil, err
		}
		vhosts = rc.GetVirtualHosts()
	case has("routes", "domains"):
		vh := &routev3.VirtualHost{}
		if err := decode(js, vh, "VirtualHost"); err != nil {
			return nil, err
		}
		vhosts = []*routev3.VirtualHost{vh}
	case has("match"):
		rt := &routev3.Route{}
		if err := decode(js, rt, "Route"); err != nil {
			return nil, err
		}
		vhosts = []*routev3.VirtualHost{{Routes: []*routev3.Route{rt}}}
	default:
		ra := &routev3.RouteAction{}
		if err := decode(js, ra, "RouteAction"); err != nil {
			return nil, err
		}
		vhosts = []*routev3.VirtualHost{{Routes: []*routev3.Route{{Name: "route", Action: &routev3.Route_Route{Route: ra}}}}}
	}
	var out []*Route
	for _, vh := range vhosts {
		for i, rt := range vh.GetRoutes() {
			ra := rt.GetRoute()
			if ra == nil {
				continue // a redirect or direct response: no upstream, no retry
			}
			r, err := build(routeName(rt, i), ra, vh)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no route forwards to a cluster", ErrInvalid)
	}
	return out, nil
}

// decode unmarshals js into m with protojson and validates it as Envoy does.
func decode(js []byte, m interface {
	proto.Message
	ValidateAll() error
}, what string) error {
	if err := protojson.Unmarshal(js, m); err != nil {
		return fmt.Errorf("%w: as an Envoy %s: %v", ErrInvalid, what, err)
	}
	if err := m.ValidateAll(); err != nil {
		return fmt.Errorf("%w: Envoy's validation of the %s: %v", ErrInvalid, what, err)
	}
	return nil
}

func routeName(rt *routev3.Route, i int) string {
	if rt.GetName() != "" {
		return rt.GetName()
	}
	m := rt.GetMatch()
	switch {
	case m.GetPrefix() != "":
		return "prefix " + m.GetPrefix()
	case m.GetPath() != "":
		return "path " + m.GetPath()
	case m.GetSafeRegex() != nil:
		return "regex " + m.GetSafeRegex().GetRegex()
	}
	return fmt.Sprintf("route %d", i+1)
}

// conditions Backstop honours, and those it reads but cannot honour on HTTP.
var (
	honoured = map[string]bool{
		"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true, "connect-failure": true,
		"retriable-4xx": true, "refused-stream": true, "retriable-status-codes": true, "envoy-ratelimited": true,
	}
	grpcOnly = map[string]bool{"cancelled": true, "deadline-exceeded": true, "internal": true,
		"resource-exhausted": true, "unavailable": true}
)

func build(name string, ra *routev3.RouteAction, vh *routev3.VirtualHost) (*Route, error) {
	r := &Route{Name: name, Timeout: DefaultRouteTimeout}
	if ra.Timeout != nil {
		r.Timeout = ra.GetTimeout().AsDuration()
	}
	if ra.GetHedgePolicy() != nil || vh.GetHedgePolicy() != nil {
		r.Unsupported = append(r.Unsupported, "hedge_policy")
	}
	rp := ra.GetRetryPolicy()
	if rp == nil {
		rp = vh.GetRetryPolicy()
	}
	var stack []policy.Policy
	if r.Timeout > 0 {
		stack = append(stack, deadline.MustNew(r.Timeout))
	}
	cond := map[string]bool{}
	if rp != nil {
		r.NumRetries = DefaultNumRetries
		if rp.NumRetries != nil {
			r.NumRetries = int(rp.GetNumRetries().GetValue())
		}
		for _, c := range strings.Split(rp.GetRetryOn(), ",") {
			c = strings.TrimSpace(c)
			if c == "" {
				continue
			}
			r.RetryOn = append(r.RetryOn, c)
			switch {
			case honoured[c]:
				cond[c] = true
			case grpcOnly[c]:
				r.Unsupported = append(r.Unsupported, "retry_policy.retry_on "+c+" (a gRPC condition: use policygrpc on gRPC routes)")
			case c == "retriable-headers":
				r.Unsupported = append(r.Unsupported, "retry_policy.retry_on retriable-headers")
			default:
				r.Unsupported = append(r.Unsupported, "retry_policy.retry_on "+c)
			}
		}
		r.Unsupported = append(r.Unsupported, unsupportedFields(rp)...)
		if rp.GetPerTryTimeout() != nil {
			r.PerTryTimeout = rp.GetPerTryTimeout().AsDuration()
		}
		r.BaseInterval = DefaultBaseInterval
		if b := rp.GetRetryBackOff(); b != nil {
			r.BaseInterval = b.GetBaseInterval().AsDuration()
			if b.GetMaxInterval() != nil {
				r.MaxInterval = b.GetMaxInterval().AsDuration()
			}
		}
		if r.MaxInterval == 0 {
			r.MaxInterval = defaultMaxIntervalFactor * r.BaseInterval
		}
	}
	r.Retrying = r.NumRetries > 0 && len(cond) > 0
	c := &classifier{cond: cond, codes: map[int]bool{}}
	if rp != nil {
		for _, code := range rp.GetRetriableStatusCodes() {
			c.codes[int(code)] = true
		}
		if rl := rp.GetRateLimitedRetryBackOff(); rl != nil {
			c.resetHeaders = rl.GetResetHeaders()
			c.maxReset = rl.GetMaxInterval().AsDuration()
		}
	}
	r.Classifier = c.classify
	if r.Retrying {
		maxHint := c.maxReset // only rate_limited_retry_back_off gives hints
		if maxHint <= 0 {
			maxHint = retry.DefaultMaxHintDelay
		}
		rt, err := retry.New(retry.Options{
			MaxAttempts:  r.NumRetries + 1,
			Base:         r.BaseInterval,
			Cap:          r.MaxInterval,
			Strategy:     Backoff{},
			ShouldRetry:  c.shouldRetry,
			MaxHintDelay: maxHint,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: route %s: %v", ErrInvalid, name, err)
		}
		stack = append(stack, rt)
		if r.PerTryTimeout > 0 {
			stack = append(stack, deadline.MustPerAttempt(r.PerTryTimeout))
		}
	} else if r.PerTryTimeout > 0 && (r.Timeout == 0 || r.PerTryTimeout < r.Timeout) {
		// One attempt: its per-try timeout is the call's deadline.
		stack = []policy.Policy{deadline.MustNew(r.PerTryTimeout)}
	}
	p, err := policy.Wrap(stack...)
	if err != nil {
		return nil, fmt.Errorf("%w: route %s: %v", ErrInvalid, name, err)
	}
	r.Pipeline = p.With(policy.Name(name))
	sort.Strings(r.Unsupported)
	return r, nil
}

// unsupportedFields names the fields of rp set that Backstop cannot honour.
func unsupportedFields(rp *routev3.RetryPolicy) []string {
	var out []string
	add := func(set bool, field string) {
		if set {
			out = append(out, "retry_policy."+field)
		}
	}
	add(len(rp.GetRetriableHeaders()) > 0, "retriable_headers")
	add(len(rp.GetRetriableRequestHeaders()) > 0, "retriable_request_headers")
	add(rp.GetRetryPriority() != nil, "retry_priority")
	add(len(rp.GetRetryHostPredicate()) > 0, "retry_host_predicate")
	add(rp.GetHostSelectionRetryMaxAttempts() != 0, "host_selection_retry_max_attempts")
	add(len(rp.GetRetryOptionsPredicates()) > 0, "retry_options_predicates")
	add(rp.GetPerTryIdleTimeout() != nil, "per_try_idle_timeout")
	return out
}

// Backoff is Envoy's retry back-off: retry n waits a uniform random time in
// [0, (2^n − 1) · base], at most the cap (max_interval).
type Backoff struct{}

// Delay implements retry.Strategy.
func (Backoff) Delay(n int, _, base, cap time.Duration, r policy.Rand) time.Duration {
	if n < 1 {
		n = 1
	}
	w := cap
	if n < 62 {
		if f := float64(base) * float64(int64(1)<<n-1); f < float64(cap) {
			w = time.Duration(f)
		}
	}
	return min(time.Duration(r.Float64()*float64(w)), cap)
}

// classifier judges responses and errors as a route's retry_on says.
type classifier struct {
	cond         map[string]bool
	codes        map[int]bool
	resetHeaders []*routev3.RetryPolicy_ResetHeader
	maxReset     time.Duration
}

func (c *classifier) classify(res *http.Response, now time.Time) error {
	code := res.StatusCode
	if code < 400 {
		return nil
	}
	err := &policyhttp.StatusError{StatusCode: code, Status: res.Status}
	var fault error = err
	if code < 500 {
		fault = breaker.ClientFault(err) // a 4xx says nothing about the upstream's health
	}
	limited := res.Header.Get("X-Envoy-Ratelimited") != ""
	retryable := false
	switch {
	case limited:
		retryable = c.cond["envoy-ratelimited"]
	case c.cond["5xx"] && code >= 500, c.cond["gateway-error"] && (code == 502 || code == 503 || code == 504),
		c.cond["retriable-4xx"] && code == http.StatusConflict, c.cond["retriable-status-codes"] && c.codes[code]:
		retryable = true
	}
	if !retryable {
		return fault
	}
	if d, ok := c.reset(res, now); ok {
		return retry.Pushback(fault, d)
	}
	return retry.Retryable(fault)
}

// reset reads the first rate_limited_retry_back_off reset header present.
func (c *classifier) reset(res *http.Response, now time.Time) (time.Duration, bool) {
	for _, h := range c.resetHeaders {
		v := strings.TrimSpace(res.Header.Get(h.GetName()))
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			continue
		}
		var d time.Duration
		switch h.GetFormat() {
		case routev3.RetryPolicy_UNIX_TIMESTAMP:
			d = time.Unix(n, 0).Sub(now)
		default:
			if n > int64(c.maxReset/time.Second)+1 {
				n = int64(c.maxReset/time.Second) + 1
			}
			d = time.Duration(n) * time.Second
		}
		return min(max(d, 0), c.maxReset), true
	}
	return 0, false
}

// shouldRetry is the retry's classifier: responses as classify marked them, network
// failures by retry_on.
func (c *classifier) shouldRetry(err error) bool {
	var se *policyhttp.StatusError
	if errors.As(err, &se) {
		return retry.DefaultShouldRetry(err)
	}
	connect := isConnectFailure(err)
	reset := !connect && isReset(err)
	timeout := errors.Is(err, deadline.ErrAttemptTimeout)
	switch {
	case connect:
		return c.cond["connect-failure"] || c.cond["5xx"] || c.cond["gateway-error"] || c.cond["reset"]
	case reset:
		return c.cond["reset"] || c.cond["5xx"] || c.cond["refused-stream"] || c.cond["reset-before-request"]
	case timeout:
		return c.cond["5xx"] || c.cond["gateway-error"] || c.cond["reset"]
	}
	return false
}

func isConnectFailure(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNABORTED)
}
