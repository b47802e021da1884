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

	"github.com/backstop-go/backstop/jitter"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
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

// ErrInvalid is matched by every error of [Parse] and [ParseWith]: a [*ConfigError],
// or several joined.
var ErrInvalid = errors.New("policyenvoy: invalid route config")

// Route is one Envoy route's retry behaviour as Backstop pipeline and classifier.
type Route struct {
	// Name is the route's name, or its match ("prefix /api"), or "route N"; "route"
	// for a Route without match or a bare RouteAction.
	Name string
	// Timeout is the route's timeout (0: none); PerTryTimeout each attempt's (0: none).
	// A per_try_timeout not below the route's timeout is ignored, as Envoy does ("this
	// timeout must be less than the global route timeout … or it is ignored"):
	// PerTryTimeout is then 0 and IgnoredPerTryTimeout holds it.
	Timeout, PerTryTimeout time.Duration
	IgnoredPerTryTimeout   time.Duration
	// DefaultTimeout reports that the route gives no timeout, so that Timeout is
	// Envoy's DefaultRouteTimeout.
	DefaultTimeout bool
	// NumRetries is how many retries may follow the first attempt.
	NumRetries int
	// RetryOn are the retry_on conditions, as written.
	RetryOn []string
	// BaseInterval and MaxInterval are the backoff's.
	BaseInterval, MaxInterval time.Duration
	// ResetHeaders are rate_limited_retry_back_off's reset headers, in the order they
	// are tried, each as "name (format)"; ResetMaxInterval is its max_interval (Envoy's
	// default DefaultRateLimitedMaxInterval). Both are zero without one.
	ResetHeaders     []string
	ResetMaxInterval time.Duration
	// Retrying reports whether the route retries at all (a retry_policy with
	// num_retries ≥ 1 and a condition).
	Retrying bool
	// Unsupported names each field or condition set on the route that Backstop cannot
	// honour, e.g. "retry_policy.retriable_headers".
	Unsupported []string
	// UnknownRetryOn are the retry_on conditions that are not Envoy's (a typo such as
	// "5xxx"): Envoy never retries on them. See [RetryOnConditions].
	UnknownRetryOn []string
	// RetriableStatusCodes are retry_policy.retriable_status_codes, as written.
	RetriableStatusCodes []int
	// Match is how the route picks requests, as its RouteMatch says it.
	Match Match
	// Domains are the route's virtual host's domains, as written; nil for a Route or a
	// RouteAction read alone.
	Domains []string
	// Pipeline runs a request as Envoy would: deadline, retry, per-attempt timeout.
	Pipeline *policy.Pipeline
	// Classifier judges responses as retry_on says, for policyhttp.Options.Classifier.
	Classifier policyhttp.Classifier

	src      *source    // the input, for Position
	action   []pathElem // the route's RouteAction in the input
	policyAt []pathElem // its retry_policy: the route's, or its virtual host's
}

// Match is a route's RouteMatch: the path it matches by, and the names of the other
// matchers it sets, which no path pattern can say. The zero value matches every path.
type Match struct {
	// Prefix, Path and PathSeparatedPrefix are the path specifier, at most one of them
	// set; Regex is safe_regex's regex. All are "" for a Route without match.
	Prefix, Path, PathSeparatedPrefix, Regex string
	// Others names each other matcher the RouteMatch sets, as Envoy spells it
	// ("headers", "query_parameters", "case_sensitive", "grpc", …), in field order.
	Others []string
}

// matchOf reads m; a nil m matches every path.
func matchOf(m *routev3.RouteMatch) Match {
	out := Match{Prefix: m.GetPrefix(), Path: m.GetPath(), PathSeparatedPrefix: m.GetPathSeparatedPrefix(),
		Regex: m.GetSafeRegex().GetRegex()}
	if m == nil {
		return out
	}
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if fd.ContainingOneof() == nil || fd.ContainingOneof().Name() != "path_specifier" {
			out.Others = append(out.Others, string(fd.Name()))
		}
		return true
	})
	sort.Slice(out.Others, func(i, j int) bool {
		return fieldNumber(m, out.Others[i]) < fieldNumber(m, out.Others[j])
	})
	return out
}

func fieldNumber(m *routev3.RouteMatch, name string) protoreflect.FieldNumber {
	return m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name)).Number()
}

// Position returns the 1-based line and column in the parsed input of one of the
// route's fields, named as Envoy spells it under the RouteAction — "timeout",
// "retry_policy.num_retries", "retry_policy.retriable_status_codes[0]"; a retry_policy
// field is looked up where the route's retry_policy is, its own or its virtual
// host's, and "match", "match.prefix", … in the Route, beside its RouteAction. A
// field the input leaves out gives the position of the deepest field above it that
// the input has, "" the RouteAction's own; 0, 0 when the input gives no positions.
func (r *Route) Position(field string) (line, col int) {
	if r.src == nil || r.src.root == nil {
		return 0, 0
	}
	base := r.action
	switch {
	case field == "retry_policy" || strings.HasPrefix(field, "retry_policy."):
		base, field = r.policyAt, strings.TrimPrefix(strings.TrimPrefix(field, "retry_policy"), ".")
	case (field == "match" || strings.HasPrefix(field, "match.")) && len(base) > 0 && base[len(base)-1].key == "route":
		base = base[:len(base)-1] // the Route's match, beside its RouteAction
	}
	path := append([]pathElem(nil), base...)
	path = append(path, parseFieldPath(field)...)
	e := r.src.errAt(path, "")
	return e.Line, e.Column
}

// parseFieldPath reads "a.b[2].c" as path steps.
func parseFieldPath(f string) []pathElem {
	var out []pathElem
	for _, part := range strings.Split(f, ".") {
		if part == "" {
			continue
		}
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, pathElem{key: name})
		}
		for rest != "" {
			num, after, _ := strings.Cut(rest, "]")
			n, err := strconv.Atoi(num)
			if err != nil {
				break
			}
			out = append(out, pathElem{index: n})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

// RetryOnConditions are the retry_on conditions Envoy knows, for HTTP routes and for
// gRPC ones, in the order Envoy documents them.
func RetryOnConditions() []string {
	return []string{"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "envoy-ratelimited",
		"retriable-4xx", "refused-stream", "retriable-status-codes", "retriable-headers", "http3-post-connect-failure",
		"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}
}

// Explain says what the route's pipeline will do, under the route's name.
func (r *Route) Explain() policy.Explanation {
	return r.Pipeline.With(policy.Name(r.Name)).Explain()
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

func build(name string, ra *routev3.RouteAction, vh *routev3.VirtualHost, o Options) (*Route, error) {
	r := &Route{Name: name, Timeout: DefaultRouteTimeout, DefaultTimeout: ra.Timeout == nil}
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
		stack = append(stack, policy.Must(deadline.New(deadline.Options{Timeout: r.Timeout})))
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
				r.Unsupported = append(r.Unsupported, "retry_policy.retry_on "+c+" (a gRPC condition: Backstop reads gRPC retries from the service config)")
			case c == "retriable-headers", c == "http3-post-connect-failure":
				r.Unsupported = append(r.Unsupported, "retry_policy.retry_on "+c)
			default:
				r.UnknownRetryOn = append(r.UnknownRetryOn, c)
			}
		}
		r.Unsupported = append(r.Unsupported, unsupportedFields(rp)...)
		if rp.GetPerTryTimeout() != nil {
			r.PerTryTimeout = rp.GetPerTryTimeout().AsDuration()
			if r.Timeout > 0 && r.PerTryTimeout >= r.Timeout {
				r.IgnoredPerTryTimeout, r.PerTryTimeout = r.PerTryTimeout, 0
			}
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
		if r.MaxInterval < r.BaseInterval {
			return nil, &ConfigError{Path: "retry_policy.retry_back_off.max_interval", Msg: fmt.Sprintf(
				"max_interval %v is below base_interval %v; Envoy refuses it: want max_interval ≥ base_interval",
				r.MaxInterval, r.BaseInterval)}
		}
	}
	r.Retrying = r.NumRetries > 0 && len(cond) > 0
	c := &classifier{cond: cond, codes: map[int]bool{}, rand: jitter.Or(o.Rand)}
	if rp != nil {
		for _, code := range rp.GetRetriableStatusCodes() {
			c.codes[int(code)] = true
			r.RetriableStatusCodes = append(r.RetriableStatusCodes, int(code))
		}
		if rl := rp.GetRateLimitedRetryBackOff(); rl != nil {
			c.reset = &resetBackOff{headers: rl.GetResetHeaders(), max: DefaultRateLimitedMaxInterval}
			if rl.GetMaxInterval() != nil {
				c.reset.max = rl.GetMaxInterval().AsDuration()
			}
			r.ResetHeaders = c.reset.names()
			r.ResetMaxInterval = c.reset.max
		}
	}
	r.Classifier = c.classify
	if r.Retrying {
		ro := retry.Options{
			MaxAttempts: r.NumRetries + 1,
			Base:        r.BaseInterval,
			Cap:         r.MaxInterval,
			Strategy:    Backoff{},
			ShouldRetry: c.shouldRetry,
			Clock:       o.Clock,
			Rand:        o.Rand,
		}
		if c.reset != nil && c.reset.max > 0 {
			// The classifier never hints more than this: the retry must never end a
			// call for a hint it gave.
			ro.MaxHintDelay = c.reset.maxDelay()
		}
		rt, err := retry.New(ro)
		if err != nil {
			return nil, &ConfigError{Msg: fmt.Sprintf("route %s: %v", name, err)}
		}
		stack = append(stack, &routeRetry{Retry: rt, route: r, reset: c.reset})
		if r.PerTryTimeout > 0 {
			stack = append(stack, policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: r.PerTryTimeout})))
		}
	} else if r.PerTryTimeout > 0 {
		// One attempt: its per-try timeout is the call's deadline.
		stack = []policy.Policy{policy.Must(deadline.New(deadline.Options{Timeout: r.PerTryTimeout}))}
	}
	p, err := policy.Wrap(stack...)
	if err != nil {
		return nil, &ConfigError{Msg: fmt.Sprintf("route %s: %v", name, err)}
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
func (Backoff) Delay(n int, _, base, cap time.Duration, r jitter.Rand) time.Duration {
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
	cond  map[string]bool
	codes map[int]bool
	reset *resetBackOff // nil: no rate_limited_retry_back_off
	rand  jitter.Rand
}

func (c *classifier) classify(res *http.Response, now time.Time) error {
	code := res.StatusCode
	if code < 400 {
		return nil
	}
	err := &policyhttp.StatusError{StatusCode: code, Status: res.Status}
	var marked error = err
	if code < 500 {
		marked = fault.Client(err) // a 4xx says nothing about the upstream's health
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
		return marked
	}
	if d, ok := c.reset.interval(res.Header, now); ok {
		// Envoy's rate-limited back-off: exactly random(interval, 1.5 × interval), in
		// place of the route's back-off.
		return fault.Pushback(marked, d+time.Duration(c.rand.Float64()*float64(d/2)))
	}
	return fault.Retryable(marked)
}

// shouldRetry is the retry's classifier: responses as classify marked them, network
// failures by retry_on.
func (c *classifier) shouldRetry(err error) bool {
	var se *policyhttp.StatusError
	if errors.As(err, &se) {
		return retry.DefaultShouldRetry(err)
	}
	connect := isConnectFailure(err)
	refused := !connect && refusedStream(err)
	reset := !connect && (refused || isReset(err))
	timeout := errors.Is(err, deadline.ErrAttemptTimeout)
	switch {
	case connect:
		// Nothing reached the upstream: reset-before-request's case too.
		return c.cond["connect-failure"] || c.cond["5xx"] || c.cond["gateway-error"] || c.cond["reset"] ||
			c.cond["reset-before-request"]
	case reset:
		// Envoy counts an upstream reset as a 5xx under gateway-error too; refused-stream
		// is an HTTP/2 REFUSED_STREAM only. A reset on a connection that was made may come
		// after the request was sent, so reset-before-request does not retry it.
		return c.cond["reset"] || c.cond["5xx"] || c.cond["gateway-error"] || c.cond["refused-stream"] && refused
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

// refusedStream reports whether err is an HTTP/2 stream reset with REFUSED_STREAM:
// the server did not process the request. net/http's HTTP/2 transport names the code
// in its error and exports no type for it.
func refusedStream(err error) bool {
	return strings.Contains(err.Error(), "REFUSED_STREAM")
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNABORTED)
}
