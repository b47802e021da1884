package policygrpc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// ErrServiceConfig is matched by every error of [ParseServiceConfig].
var ErrServiceConfig = errors.New("policygrpc: invalid service config")

// MaxServiceConfigAttempts is the most attempts a retryPolicy may make under the
// default client bound: larger maxAttempts are treated as 5, as gRFC A6 says.
// [ParseOptions].MaxCallAttempts changes the bound.
const MaxServiceConfigAttempts = 5

// ServiceConfig is a gRPC service config's retry settings made into pipelines: one per
// methodConfig entry, each Wrap(deadline for timeout, the channel's retryThrottling
// bucket, retry with the GRPC strategy), chosen per call by gRPC's precedence.
//
// A ServiceConfig is immutable and safe for concurrent use. Build it with
// [ParseServiceConfig].
type ServiceConfig struct {
	methods  map[string]*methodPolicy // "service/method"
	services map[string]*methodPolicy // "service"
	fallback *methodPolicy            // the default entry; nil if none
	bucket   *budget.TokenBucket      // retryThrottling; nil if none
	throttle Throttling
	entries  []Entry
	ix       *jsonIndex
}

// Throttling is a service config's retryThrottling as written.
type Throttling struct {
	MaxTokens, TokenRatio float64
}

// Throttling returns the config's retryThrottling, and false if it has none.
func (c *ServiceConfig) Throttling() (Throttling, bool) { return c.throttle, c.bucket != nil }

// Position returns the 1-based line and column in the parsed input of a field named by
// its path, as [ServiceConfigError.Path] and [Entry.Field] name them
// ("methodConfig[0].retryPolicy.maxAttempts"), or of the deepest field of the path
// that the input has; 0, 0 if none.
func (c *ServiceConfig) Position(path string) (line, col int) {
	if c == nil || c.ix == nil {
		return 0, 0
	}
	return c.ix.Position(path)
}

// Entry is one methodConfig entry of a service config, as read, for tools that
// explain or lint a config.
type Entry struct {
	// Field is the entry's place in the config, "methodConfig[i]", for
	// [ServiceConfig.Position].
	Field string
	// Names are the entry's names as paths: "/pkg.Service/Method", "/pkg.Service/", or
	// "/" for the default entry.
	Names []string
	// Pipeline runs the entry's calls.
	Pipeline *policy.Pipeline
	// Timeout is the entry's timeout; 0 if none.
	Timeout time.Duration
	// Retrying reports whether the entry has a retryPolicy.
	Retrying bool
	// MaxAttempts is the retryPolicy's maxAttempts as written, before the cap of 5.
	MaxAttempts int
	// RetryableCodes are the retryPolicy's retryableStatusCodes, or the
	// hedgingPolicy's nonFatalStatusCodes.
	RetryableCodes []codes.Code
	// Hedging reports whether the entry has a hedgingPolicy; MaxAttempts is then its
	// maxAttempts, and HedgingDelay its hedgingDelay.
	Hedging      bool
	HedgingDelay time.Duration
	// InitialBackoff, MaxBackoff and BackoffMultiplier are the retryPolicy's, as
	// written; zero without one.
	InitialBackoff, MaxBackoff time.Duration
	BackoffMultiplier          float64
}

// Backoff returns the retry backoff of a retryPolicy entry in Backstop's terms — the
// retry's Base and Cap and its strategy — the one mapping the service config's own
// retry, config.ImportServiceConfig and `backstop sim -grpc` share. A6's backoff is
// min(initialBackoff·backoffMultiplier^(n−1), maxBackoff) · random(0.8, 1.2), and A6
// asks only that each be > 0: retry.GRPC computes exactly that from Base =
// initialBackoff and Cap = maxBackoff, a maxBackoff below initialBackoff included.
func (e Entry) Backoff() (base, ceiling time.Duration, strategy retry.GRPC) {
	return e.InitialBackoff, e.MaxBackoff, retry.GRPC{Multiplier: e.BackoffMultiplier}
}

// Entries returns the config's methodConfig entries, in order.
func (c *ServiceConfig) Entries() []Entry { return append([]Entry(nil), c.entries...) }

type methodPolicy struct {
	p  *policy.Pipeline // unary calls
	sp *policy.Pipeline // streams: p, but without a hedge
	c  *classifier
}

// Budget returns the channel's retryThrottling token bucket, or nil if the config has
// none. It is shared by every method's pipeline, and the config's interceptors count
// every RPC of the channel into it, as A6 says ("regardless of service or method"):
// each success refills tokenRatio, and each failure with a code its method retries
// (or a hedge's non-fatal code), or with a pushback that says not to retry, costs a
// token — for methods without a retryPolicy, and for calls whose retries an owner in
// another process makes, too. A call under a retry owner in this process (an outer
// pipeline with a retry) is counted by that owner, in the budget its pipeline holds:
// give it this bucket to count those calls once per failed attempt.
func (c *ServiceConfig) Budget() *budget.TokenBucket { return c.bucket }

// Pipeline returns the pipeline for a full method name ("/pkg.Service/Method"): the
// entry naming the service and method, else the one naming the service, else the
// default entry; nil if none applies (the call then runs without a policy).
func (c *ServiceConfig) Pipeline(fullMethod string) *policy.Pipeline {
	if m := c.lookup(fullMethod); m != nil {
		return m.p
	}
	return nil
}

func (c *ServiceConfig) lookup(fullMethod string) *methodPolicy {
	name := strings.TrimPrefix(fullMethod, "/")
	if m, ok := c.methods[name]; ok {
		return m
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		if m, ok := c.services[name[:i]]; ok {
			return m
		}
	}
	return c.fallback
}

// UnaryClientInterceptor runs every unary RPC through the pipeline of its method
// ([ServiceConfig.Pipeline]), retrying the retryableStatusCodes of that method's
// retryPolicy; it is [UnaryClientInterceptor] with the config's pipelines.
func (c *ServiceConfig) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	none := c.unconfigured()
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		m := c.lookup(method)
		p, cl := (*policy.Pipeline)(nil), none
		if m != nil {
			p, cl = m.p, m.c
		}
		return unary(ctx, p, cl, method, req, reply, cc, invoker, opts)
	}
}

// StreamClientInterceptor runs every stream through the pipeline of its method, as
// [RetryStreamClientInterceptor] does, with the default replay buffer.
func (c *ServiceConfig) StreamClientInterceptor() grpc.StreamClientInterceptor {
	none := c.unconfigured()
	limit := replayLimit(0)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		m := c.lookup(method)
		if m == nil {
			return newRetryStream(ctx, nil, none, limit, desc, cc, method, streamer, opts)
		}
		return newRetryStream(ctx, m.sp, m.c, limit, desc, cc, method, streamer, opts)
	}
}

// unconfigured is the classifier of the methods no entry names: nothing is retried,
// and the RPCs still count into the channel's bucket.
func (c *ServiceConfig) unconfigured() *classifier {
	none := newClassifier(Options{RetryableCodes: []codes.Code{}})
	none.bucket = c.bucket
	return none
}

// DialOptions returns the dial options of a channel whose retries Backstop owns with
// this config: its unary and stream interceptors, and grpc.WithDisableRetry() so that
// grpc-go does not apply the same retryPolicy again.
func (c *ServiceConfig) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(c.StreamClientInterceptor()),
		grpc.WithDisableRetry(),
	}
}

// The JSON of the parts of a service config that Backstop reads; other fields (load
// balancing, message sizes, waitForReady) are accepted and left to grpc-go. Each
// field is read on its own, so that a value of the wrong type is one problem and
// the rest is still read.
type (
	scJSON struct {
		MethodConfig    json.RawMessage `json:"methodConfig"`
		RetryThrottling json.RawMessage `json:"retryThrottling"`
	}
	methodConfigJSON struct {
		Name          json.RawMessage `json:"name"`
		Timeout       json.RawMessage `json:"timeout"`
		RetryPolicy   json.RawMessage `json:"retryPolicy"`
		HedgingPolicy json.RawMessage `json:"hedgingPolicy"`
	}
	hedgingPolicyJSON struct {
		MaxAttempts         json.RawMessage `json:"maxAttempts"`
		HedgingDelay        json.RawMessage `json:"hedgingDelay"`
		NonFatalStatusCodes json.RawMessage `json:"nonFatalStatusCodes"`
	}
	nameJSON struct {
		Service json.RawMessage `json:"service"`
		Method  json.RawMessage `json:"method"`
	}
	retryPolicyJSON struct {
		MaxAttempts          json.RawMessage `json:"maxAttempts"`
		InitialBackoff       json.RawMessage `json:"initialBackoff"`
		MaxBackoff           json.RawMessage `json:"maxBackoff"`
		BackoffMultiplier    json.RawMessage `json:"backoffMultiplier"`
		RetryableStatusCodes json.RawMessage `json:"retryableStatusCodes"`
	}
)

// ParseServiceConfig reads the JSON of a gRPC service config (gRFC A2, A6): each
// methodConfig entry's timeout becomes an overall deadline and its retryPolicy a retry
// with the GRPC strategy (maxAttempts, capped at 5 unless [ParseServiceConfigWith]
// says otherwise; initialBackoff, maxBackoff,
// backoffMultiplier; retryableStatusCodes by name or number); retryThrottling becomes
// one token bucket shared by every method of the channel. Names follow gRPC's
// precedence: service and method, then service, then the default entry (an empty name,
// or an empty service). An entry without name applies to no method and is skipped
// unread, as grpc-go skips it.
//
// A hedgingPolicy becomes a retry.NewHedge for unary calls: maxAttempts (capped at 5)
// in flight, the next after hedgingDelay (none: all at once), nonFatalStatusCodes
// (optional: none means every failure is fatal) starting the next at once; an entry has a retryPolicy or a hedgingPolicy, not both.
// The unary interceptor gives each hedged attempt a reply, header, trailer and peer of
// its own and copies the winner's to the caller's. Streams are not hedged: they get
// the entry's timeout alone.
//
// The config is validated as gRFC A6 says. Unknown fields are ignored everywhere, as
// grpc-go ignores them. Every problem is reported, not only the first: a
// [*ServiceConfigError] for one, several joined with errors.Join, in the order of
// the input. Each matches ErrServiceConfig and names the line and column in data
// and the JSON field. It says what to write instead, e.g. "line 3, column 7:
// methodConfig[0].retryPolicy.maxAttempts is 1; want > 1". A value of the wrong
// type is one problem, and the rules that read it are not checked. Malformed JSON
// stops the reading.
func ParseServiceConfig(data []byte) (*ServiceConfig, error) {
	return ParseServiceConfigWith(data, ParseOptions{})
}

// DefaultMaxCallAttempts is the client's own bound on a call's attempts when
// ParseOptions.MaxCallAttempts is not set: 5, grpc-go's default and gRFC A6's.
const DefaultMaxCallAttempts = MaxServiceConfigAttempts

// ParseOptions configure [ParseServiceConfigWith]. The zero value is valid: it is
// what [ParseServiceConfig] uses.
type ParseOptions struct {
	// MaxCallAttempts is the client's bound on the attempts of any call: a
	// retryPolicy's or hedgingPolicy's maxAttempts above it counts as it (gRFC A6:
	// the limit "can be changed by the client through the use of channel
	// arguments"). It is grpc.WithMaxCallAttempts for Backstop: that dial option
	// is not visible to interceptors, so a channel that sets it should set this to
	// the same value. Below 2 (0 included) means DefaultMaxCallAttempts, as in
	// grpc-go. It may exceed 5, as grpc-go's may.
	MaxCallAttempts int
	// Clock times the retries' sleeps and the hedges' delays, and Rand draws the
	// retries' jitter; nil means the system's. They are seams for tests and
	// simulations.
	Clock clock.Clock
	Rand  jitter.Rand
}

// ParseServiceConfigWith is [ParseServiceConfig] with options: the client's bound on
// attempts.
func ParseServiceConfigWith(data []byte, o ParseOptions) (*ServiceConfig, error) {
	if o.MaxCallAttempts < 2 {
		o.MaxCallAttempts = DefaultMaxCallAttempts
	}
	ix := newJSONIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	var sc scJSON
	if err := dec.Decode(&sc); err != nil {
		return nil, ix.decodeError(err)
	}
	if dec.More() {
		line, col := position(data, skipSeparators(data, int(dec.InputOffset())))
		return nil, &ServiceConfigError{Line: line, Column: col, Msg: "data after the object"}
	}
	ps := &problems{ix: ix}
	c := &ServiceConfig{methods: map[string]*methodPolicy{}, services: map[string]*methodPolicy{}, ix: ix}
	if len(sc.RetryThrottling) > 0 && string(sc.RetryThrottling) != "null" {
		c.throttle, c.bucket = throttling(ps, sc.RetryThrottling)
	}
	var mcs []json.RawMessage
	ps.read("methodConfig", sc.MethodConfig, &mcs)
	seen := map[string]string{}
	for i, raw := range mcs {
		field := fmt.Sprintf("methodConfig[%d]", i)
		var mc methodConfigJSON
		var names *[]json.RawMessage
		if !ps.read(field, raw, &mc) {
			continue
		}
		if ps.read(field+".name", mc.Name, &names) && names == nil {
			// An entry without names applies to no method: grpc-go skips it
			// unread, and so does Backstop.
			continue
		}
		m, entry, ok := c.method(ps, field, mc, o)
		if names == nil {
			continue // names of the wrong type, reported
		}
		for j, raw := range *names {
			nf := fmt.Sprintf("%s.name[%d]", field, j)
			var n nameJSON
			var svc, meth *string
			readName := ps.read(nf, raw, &n) // if not, n is empty: the next two read nothing
			readService := ps.read(nf+".service", n.Service, &svc)
			readMethod := ps.read(nf+".method", n.Method, &meth)
			if !readName || !readService || !readMethod {
				ok = false
				continue
			}
			key := deref(svc) + "/" + deref(meth)
			if prev, dup := seen[key]; dup {
				ps.add(nf, nil, "names %q again (first at %s); want each name once", key, prev)
				continue
			}
			seen[key] = nf
			if deref(svc) == "" && deref(meth) != "" {
				ps.add(nf, nil, "has method %q but no service; want a service with a method", deref(meth))
				continue
			}
			if !ok {
				continue
			}
			switch {
			case deref(svc) == "":
				c.fallback = m
				entry.Names = append(entry.Names, "/")
			case deref(meth) == "":
				c.services[deref(svc)] = m
				entry.Names = append(entry.Names, "/"+deref(svc)+"/")
			default:
				c.methods[key] = m
				entry.Names = append(entry.Names, "/"+key)
			}
		}
		if !ok || len(*names) == 0 {
			// A problem, reported; or an empty list of names, validated as
			// grpc-go does but naming no method.
			continue
		}
		entry.Pipeline = m.p.With(policy.Name(strings.Join(entry.Names, ", ")))
		c.entries = append(c.entries, entry)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// throttling reads a retryThrottling object as grpc-go does, with encoding/json:
// field names match in any case, the last of a name wins, and unknown fields are
// ignored. Both fields are required; the bucket checks their values (gRFC A6). It
// returns a nil bucket after reporting a problem.
func throttling(ps *problems, raw json.RawMessage) (Throttling, *budget.TokenBucket) {
	var v struct{ MaxTokens, TokenRatio json.RawMessage }
	if !ps.read("retryThrottling", raw, &v) {
		return Throttling{}, nil
	}
	var maxTokens, ratio *float64
	n := len(ps.errs)
	if ps.read("retryThrottling.maxTokens", v.MaxTokens, &maxTokens) && maxTokens == nil {
		ps.add("retryThrottling", nil, "has no maxTokens; want a number in (0, 1000], such as 10")
	}
	if ps.read("retryThrottling.tokenRatio", v.TokenRatio, &ratio) && ratio == nil {
		ps.add("retryThrottling", nil, "has no tokenRatio; want a number > 0, such as 0.1")
	}
	if len(ps.errs) > n {
		return Throttling{}, nil
	}
	t := Throttling{MaxTokens: *maxTokens, TokenRatio: *ratio}
	b, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: t.MaxTokens, TokenRatio: t.TokenRatio})
	if err == nil {
		return t, b
	}
	// The bucket names its first bad value. Each is checked beside a good one, so
	// that both are reported.
	for _, f := range []struct {
		field string
		o     budget.TokenBucketOptions
	}{{"maxTokens", budget.TokenBucketOptions{MaxTokens: t.MaxTokens, TokenRatio: 1}},
		{"tokenRatio", budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: t.TokenRatio}}} {
		if _, ferr := budget.NewTokenBucket(f.o); ferr != nil {
			err = nil
			ps.add("retryThrottling."+f.field, nil, "is refused: %s", strings.TrimPrefix(ferr.Error(), budget.ErrInvalidOptions.Error()+": "))
		}
	}
	if err != nil {
		ps.add("retryThrottling", nil, "is refused: %s", strings.TrimPrefix(err.Error(), budget.ErrInvalidOptions.Error()+": "))
	}
	return Throttling{}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// method builds the pipeline of one methodConfig entry, and its Entry without names.
// It reports every problem of the entry to ps, and false if there is one.
func (c *ServiceConfig) method(ps *problems, field string, mc methodConfigJSON, o ParseOptions) (*methodPolicy, Entry, bool) {
	n := len(ps.errs)
	var timeout *string
	var rp *retryPolicyJSON
	var hp *hedgingPolicyJSON
	ps.read(field+".timeout", mc.Timeout, &timeout)
	ps.read(field+".retryPolicy", mc.RetryPolicy, &rp)
	ps.read(field+".hedgingPolicy", mc.HedgingPolicy, &hp)
	entry := Entry{Field: field, Retrying: rp != nil, Hedging: hp != nil}
	if rp != nil && hp != nil {
		ps.add(field+".hedgingPolicy", nil, "is set with retryPolicy; want one of them (gRFC A6)")
	}
	var stack []policy.Policy
	if timeout != nil {
		d, err := parseDuration(*timeout)
		switch {
		case err == nil && d < 0:
			ps.add(field+".timeout", ErrNegativeDuration, "is %q; want a positive duration such as \"1.5s\"", *timeout)
		case err != nil || d == 0:
			ps.add(field+".timeout", nil, "is %q; want a positive duration such as \"1.5s\"", *timeout)
		default:
			entry.Timeout = d
			stack = append(stack, policy.Must(deadline.New(deadline.Options{Timeout: d})))
		}
	}
	m := &methodPolicy{c: newClassifier(Options{RetryableCodes: []codes.Code{}})}
	// The entry's retry owner, a retry or a hedge, and the codes it tries again on.
	var owner policy.Policy
	var again []codes.Code
	if rp != nil {
		if r, cs := retryPolicy(ps, field+".retryPolicy", rp, &entry, o); r != nil {
			owner, again = r, cs
		}
	}
	if hp != nil {
		if h, cs := hedgingPolicy(ps, field+".hedgingPolicy", hp, &entry, o); h != nil && rp == nil {
			owner, again = h, cs
			// Streams are not hedged: a stream's attempts replay its messages one
			// after another. They get the entry's timeout alone.
			sp, err := policy.Wrap(stack...)
			if err != nil {
				ps.add(field, nil, "is refused: %v", err)
			}
			m.sp = sp
		}
	}
	if len(ps.errs) > n {
		return nil, entry, false
	}
	if owner != nil {
		if c.bucket != nil {
			stack = append(stack, channelBudget{c.bucket})
		}
		stack = append(stack, owner)
		m.c = newClassifier(Options{RetryableCodes: again})
	}
	m.c.bucket = c.bucket
	p, err := policy.Wrap(stack...)
	if err != nil {
		ps.add(field, nil, "is refused: %v", err)
		return nil, entry, false
	}
	m.p = p
	if m.sp == nil {
		m.sp = p
	}
	entry.Pipeline = p
	return m, entry, true
}

// statusCodes reads the list of status codes at field, by name or number, refusing
// OK. It reports each bad code, and false if there is one.
func statusCodes(ps *problems, field string, raw json.RawMessage) ([]codes.Code, bool) {
	var list []json.RawMessage
	if !ps.read(field, raw, &list) {
		return nil, false
	}
	out := make([]codes.Code, 0, len(list))
	ok := true
	for i, r := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		var c codes.Code
		if err := c.UnmarshalJSON(r); err != nil || c > codes.Unauthenticated {
			ok = false
			var upper codes.Code
			if u := bytes.ToUpper(bytes.TrimSpace(r)); !bytes.Equal(u, bytes.TrimSpace(r)) && upper.UnmarshalJSON(u) == nil {
				ps.add(f, ErrStatusCode, "is %s; gRPC's Go implementation reads status names in upper case only: write %s", bytes.TrimSpace(r), u)
				continue
			}
			ps.add(f, ErrStatusCode, "is %s; want a gRPC status code: a name such as \"UNAVAILABLE\", or its number 1–16", bytes.TrimSpace(r))
			continue
		}
		if c == codes.OK {
			ok = false
			ps.add(f, ErrStatusCode, "is OK; want a status code other than OK: OK is a success, never retried")
			continue
		}
		out = append(out, c)
	}
	return out, ok
}

// StatusCodeName spells c as a service config does, the name statusCodes reads back:
// codes.Unavailable → "UNAVAILABLE", codes.DeadlineExceeded → "DEADLINE_EXCEEDED",
// codes.Canceled → "CANCELLED" (gRPC's spelling; grpc-go's String says "Canceled").
func StatusCodeName(c codes.Code) string {
	if c == codes.Canceled {
		return "CANCELLED"
	}
	s := c.String() // "DeadlineExceeded"
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// duration reads the positive duration at field, which must be given; false after
// reporting a problem.
func duration(ps *problems, field string, raw json.RawMessage, example string) (time.Duration, bool) {
	var v *string
	if !ps.read(field, raw, &v) {
		return 0, false
	}
	if v == nil {
		ps.add(field, nil, "is missing; want a duration > 0 such as %q", example)
		return 0, false
	}
	d, err := parseDuration(*v)
	switch {
	case err == nil && d < 0:
		ps.add(field, ErrNegativeDuration, "is %q; want a duration > 0 such as %q", *v, example)
	case err != nil || d == 0:
		ps.add(field, nil, "is %q; want a duration > 0 such as %q", *v, example)
	default:
		return d, true
	}
	return 0, false
}

// maxAttempts reads the maxAttempts at field, which must be given and above 1.
func maxAttempts(ps *problems, field string, raw json.RawMessage) (int, bool) {
	var n *int
	switch {
	case !ps.read(field, raw, &n):
	case n == nil:
		ps.add(field, nil, "is missing; want an integer > 1")
	case *n <= 1:
		ps.add(field, nil, "is %d; want > 1", *n)
	default:
		return *n, true
	}
	return 0, false
}

// retryPolicy builds the retry of a methodConfig entry's retryPolicy, at field. It
// reports every problem of the policy, and returns a nil retry if there is one.
func retryPolicy(ps *problems, field string, rp *retryPolicyJSON, e *Entry, o ParseOptions) (*retry.Retry, []codes.Code) {
	n := len(ps.errs)
	attempts, _ := maxAttempts(ps, field+".maxAttempts", rp.MaxAttempts)
	initial, _ := duration(ps, field+".initialBackoff", rp.InitialBackoff, "0.1s")
	maxB, _ := duration(ps, field+".maxBackoff", rp.MaxBackoff, "1s")
	var mult *float64
	switch {
	case !ps.read(field+".backoffMultiplier", rp.BackoffMultiplier, &mult):
	case mult == nil:
		ps.add(field+".backoffMultiplier", nil, "is missing; want a number > 0")
	case !(*mult > 0) || math.IsInf(*mult, 0):
		ps.add(field+".backoffMultiplier", nil, "is %v; want a finite number > 0", *mult)
	}
	cs, ok := statusCodes(ps, field+".retryableStatusCodes", rp.RetryableStatusCodes)
	if ok && len(cs) == 0 {
		ps.add(field+".retryableStatusCodes", nil, "is empty; want at least one code, e.g. [\"UNAVAILABLE\"]")
	}
	if len(ps.errs) > n {
		return nil, nil
	}
	e.InitialBackoff, e.MaxBackoff, e.BackoffMultiplier = initial, maxB, *mult
	base, ceiling, strategy := e.Backoff()
	r, err := retry.New(retry.Options{
		MaxAttempts: min(attempts, o.MaxCallAttempts),
		Base:        base,
		Cap:         ceiling,
		Strategy:    strategy,
		Clock:       o.Clock,
		Rand:        o.Rand,
	})
	if err != nil {
		ps.add(field, nil, "is refused: %v", err)
		return nil, nil
	}
	e.MaxAttempts, e.RetryableCodes = attempts, cs
	return r, cs
}

// hedgingPolicy builds the hedge of a methodConfig entry's hedgingPolicy, at field.
// It reports every problem of the policy, and returns a nil hedge if there is one.
func hedgingPolicy(ps *problems, field string, hp *hedgingPolicyJSON, e *Entry, o ParseOptions) (*retry.Hedge, []codes.Code) {
	n := len(ps.errs)
	attempts, _ := maxAttempts(ps, field+".maxAttempts", hp.MaxAttempts)
	// nonFatalStatusCodes may be absent or empty: every failure is then fatal. A6
	// as amended makes the field optional, and grpc-java reads it so.
	delay := time.Duration(-1) // A6's default: no delay, every attempt at once
	var hd *string
	if ps.read(field+".hedgingDelay", hp.HedgingDelay, &hd) && hd != nil {
		d, err := parseDuration(*hd)
		switch {
		case err == nil && d < 0:
			ps.add(field+".hedgingDelay", ErrNegativeDuration, "is %q; want a duration ≥ 0 such as \"0.05s\"", *hd)
		case err != nil:
			ps.add(field+".hedgingDelay", nil, "is %q; want a duration ≥ 0 such as \"0.05s\"", *hd)
		default:
			e.HedgingDelay = d
			if d > 0 {
				delay = d
			}
		}
	}
	nonFatal, _ := statusCodes(ps, field+".nonFatalStatusCodes", hp.NonFatalStatusCodes)
	if len(ps.errs) > n {
		return nil, nil
	}
	h, err := retry.NewHedge(retry.HedgeOptions{MaxAttempts: min(attempts, o.MaxCallAttempts, retry.HedgeMaxAttemptsLimit),
		Delay: delay, Clock: o.Clock})
	if err != nil {
		ps.add(field, nil, "is refused: %v", err)
		return nil, nil
	}
	e.MaxAttempts, e.RetryableCodes = attempts, nonFatal
	return h, nonFatal
}

// protoDuration is the JSON form of google.protobuf.Duration: seconds with up to nine
// decimals and an "s". The whole seconds and the fraction are each optional, but not
// both: gRFC A6's own examples write ".1s", and grpc-go reads "1.s".
var protoDuration = regexp.MustCompile(`^(-?)([0-9]*)(?:\.([0-9]{0,9}))?s$`)

// parseDuration reads a google.protobuf.Duration in its JSON form ("1.5s", ".1s").
func parseDuration(s string) (time.Duration, error) {
	m := protoDuration.FindStringSubmatch(s)
	if m == nil || m[2] == "" && m[3] == "" {
		return 0, fmt.Errorf("%q is not a duration like \"1.5s\"", s)
	}
	secs, err := strconv.ParseInt(cmp.Or(m[2], "0"), 10, 64)
	if err != nil || secs > math.MaxInt64/int64(time.Second)-1 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	d := time.Duration(secs) * time.Second
	if m[3] != "" {
		frac := m[3] + strings.Repeat("0", 9-len(m[3]))
		ns, _ := strconv.ParseInt(frac, 10, 64)
		d += time.Duration(ns)
	}
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}
