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
// balancing, message sizes, waitForReady) are accepted and left to grpc-go.
type (
	scJSON struct {
		MethodConfig    []methodConfigJSON `json:"methodConfig"`
		RetryThrottling json.RawMessage    `json:"retryThrottling"`
	}
	methodConfigJSON struct {
		Name          *[]nameJSON        `json:"name"`
		Timeout       *string            `json:"timeout"`
		RetryPolicy   *retryPolicyJSON   `json:"retryPolicy"`
		HedgingPolicy *hedgingPolicyJSON `json:"hedgingPolicy"`
	}
	hedgingPolicyJSON struct {
		MaxAttempts         *int              `json:"maxAttempts"`
		HedgingDelay        *string           `json:"hedgingDelay"`
		NonFatalStatusCodes []json.RawMessage `json:"nonFatalStatusCodes"`
	}
	nameJSON struct {
		Service *string `json:"service"`
		Method  *string `json:"method"`
	}
	retryPolicyJSON struct {
		MaxAttempts          *int              `json:"maxAttempts"`
		InitialBackoff       *string           `json:"initialBackoff"`
		MaxBackoff           *string           `json:"maxBackoff"`
		BackoffMultiplier    *float64          `json:"backoffMultiplier"`
		RetryableStatusCodes []json.RawMessage `json:"retryableStatusCodes"`
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
// grpc-go ignores them. An error is a [*ServiceConfigError]
// matching ErrServiceConfig that names the line and column in data and the JSON
// field, e.g. "line 3, column 7: methodConfig[0].retryPolicy.maxAttempts is 1; want
// > 1".
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
	c := &ServiceConfig{methods: map[string]*methodPolicy{}, services: map[string]*methodPolicy{}, ix: ix}
	if len(sc.RetryThrottling) > 0 && string(sc.RetryThrottling) != "null" {
		t, b, err := throttling(sc.RetryThrottling)
		if err != nil {
			return nil, ix.errAt("retryThrottling", nil, "is refused: %s", strings.TrimPrefix(err.Error(), budget.ErrInvalidOptions.Error()+": "))
		}
		c.bucket, c.throttle = b, t
	}
	seen := map[string]string{}
	for i, mc := range sc.MethodConfig {
		if mc.Name == nil {
			// An entry without names applies to no method: grpc-go skips it
			// unread, and so does Backstop.
			continue
		}
		field := fmt.Sprintf("methodConfig[%d]", i)
		m, entry, err := c.method(ix, field, mc, o)
		if err != nil {
			return nil, err
		}
		if len(*mc.Name) == 0 {
			continue // validated, as grpc-go does, but it names no method
		}
		for j, n := range *mc.Name {
			nf := fmt.Sprintf("%s.name[%d]", field, j)
			svc, meth := deref(n.Service), deref(n.Method)
			key := svc + "/" + meth
			if prev, dup := seen[key]; dup {
				return nil, ix.errAt(nf, nil, "names %q again (first at %s); want each name once", key, prev)
			}
			seen[key] = nf
			switch {
			case svc == "" && meth != "":
				return nil, ix.errAt(nf, nil, "has method %q but no service; want a service with a method", meth)
			case svc == "":
				c.fallback = m
				entry.Names = append(entry.Names, "/")
			case meth == "":
				c.services[svc] = m
				entry.Names = append(entry.Names, "/"+svc+"/")
			default:
				c.methods[svc+"/"+meth] = m
				entry.Names = append(entry.Names, "/"+svc+"/"+meth)
			}
		}
		entry.Pipeline = m.p.With(policy.Name(strings.Join(entry.Names, ", ")))
		c.entries = append(c.entries, entry)
	}
	return c, nil
}

// throttling reads a retryThrottling object as grpc-go does, with encoding/json:
// field names match in any case, the last of a name wins, and unknown fields are
// ignored. Both fields are required; the bucket checks their values (gRFC A6).
func throttling(raw json.RawMessage) (Throttling, *budget.TokenBucket, error) {
	var v struct{ MaxTokens, TokenRatio *float64 }
	if err := json.Unmarshal(raw, &v); err != nil {
		return Throttling{}, nil, err
	}
	switch {
	case v.MaxTokens == nil:
		return Throttling{}, nil, errors.New("maxTokens is missing")
	case v.TokenRatio == nil:
		return Throttling{}, nil, errors.New("tokenRatio is missing")
	}
	b, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: *v.MaxTokens, TokenRatio: *v.TokenRatio})
	return Throttling{MaxTokens: *v.MaxTokens, TokenRatio: *v.TokenRatio}, b, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// method builds the pipeline of one methodConfig entry, and its Entry without names.
func (c *ServiceConfig) method(ix *jsonIndex, field string, mc methodConfigJSON, o ParseOptions) (*methodPolicy, Entry, error) {
	entry := Entry{Field: field, Retrying: mc.RetryPolicy != nil, Hedging: mc.HedgingPolicy != nil}
	bad := func(path string, rule error, format string, args ...any) (*methodPolicy, Entry, error) {
		return nil, entry, ix.errAt(field+path, rule, format, args...)
	}
	if mc.RetryPolicy != nil && mc.HedgingPolicy != nil {
		return bad(".hedgingPolicy", nil, "is set with retryPolicy; want one of them (gRFC A6)")
	}
	var stack []policy.Policy
	if mc.Timeout != nil {
		d, err := parseDuration(*mc.Timeout)
		switch {
		case err == nil && d < 0:
			return bad(".timeout", ErrNegativeDuration, "is %q; want a positive duration such as \"1.5s\"", *mc.Timeout)
		case err != nil || d == 0:
			return bad(".timeout", nil, "is %q; want a positive duration such as \"1.5s\"", *mc.Timeout)
		}
		entry.Timeout = d
		stack = append(stack, policy.Must(deadline.New(deadline.Options{Timeout: d})))
	}
	m := &methodPolicy{c: newClassifier(Options{RetryableCodes: []codes.Code{}})}
	// The entry's retry owner, a retry or a hedge, and the codes it tries again on.
	var owner policy.Policy
	var again []codes.Code
	switch {
	case mc.RetryPolicy != nil:
		r, cs, err := retryPolicy(ix, field+".retryPolicy", mc.RetryPolicy, &entry, o)
		if err != nil {
			return nil, entry, err
		}
		owner, again = r, cs
	case mc.HedgingPolicy != nil:
		h, cs, err := hedgingPolicy(ix, field+".hedgingPolicy", mc.HedgingPolicy, &entry, o)
		if err != nil {
			return nil, entry, err
		}
		owner, again = h, cs
		// Streams are not hedged: a stream's attempts replay its messages one after
		// another. They get the entry's timeout alone.
		sp, err := policy.Wrap(stack...)
		if err != nil {
			return bad("", nil, "is refused: %v", err)
		}
		m.sp = sp
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
		return bad("", nil, "is refused: %v", err)
	}
	m.p = p
	if m.sp == nil {
		m.sp = p
	}
	entry.Pipeline = p
	return m, entry, nil
}

// statusCodes reads a list of status codes, by name or number, refusing OK.
func statusCodes(ix *jsonIndex, field string, raw []json.RawMessage) ([]codes.Code, error) {
	out := make([]codes.Code, 0, len(raw))
	for i, r := range raw {
		f := fmt.Sprintf("%s[%d]", field, i)
		var c codes.Code
		if err := c.UnmarshalJSON(r); err != nil || c > codes.Unauthenticated {
			var upper codes.Code
			if u := bytes.ToUpper(bytes.TrimSpace(r)); !bytes.Equal(u, bytes.TrimSpace(r)) && upper.UnmarshalJSON(u) == nil {
				return nil, ix.errAt(f, ErrStatusCode, "is %s; gRPC's Go implementation reads status names in upper case only: write %s", bytes.TrimSpace(r), u)
			}
			return nil, ix.errAt(f, ErrStatusCode, "is %s; want a gRPC status code: a name such as \"UNAVAILABLE\", or its number 1–16", bytes.TrimSpace(r))
		}
		if c == codes.OK {
			return nil, ix.errAt(f, ErrStatusCode, "is OK; want a status code other than OK: OK is a success, never retried")
		}
		out = append(out, c)
	}
	return out, nil
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

// duration reads a positive duration field.
func duration(ix *jsonIndex, field, value, example string) (time.Duration, error) {
	d, err := parseDuration(value)
	switch {
	case err == nil && d < 0:
		return 0, ix.errAt(field, ErrNegativeDuration, "is %q; want a duration > 0 such as %q", value, example)
	case err != nil || d == 0:
		return 0, ix.errAt(field, nil, "is %q; want a duration > 0 such as %q", value, example)
	}
	return d, nil
}

func retryPolicy(ix *jsonIndex, field string, rp *retryPolicyJSON, e *Entry, o ParseOptions) (*retry.Retry, []codes.Code, error) {
	bad := func(path string, format string, args ...any) (*retry.Retry, []codes.Code, error) {
		return nil, nil, ix.errAt(field+path, nil, format, args...)
	}
	switch {
	case rp.MaxAttempts == nil:
		return bad(".maxAttempts", "is missing; want an integer > 1")
	case *rp.MaxAttempts <= 1:
		return bad(".maxAttempts", "is %d; want > 1", *rp.MaxAttempts)
	case rp.InitialBackoff == nil:
		return bad(".initialBackoff", "is missing; want a duration > 0 such as \"0.1s\"")
	case rp.MaxBackoff == nil:
		return bad(".maxBackoff", "is missing; want a duration > 0 such as \"1s\"")
	case rp.BackoffMultiplier == nil:
		return bad(".backoffMultiplier", "is missing; want a number > 0")
	case !(*rp.BackoffMultiplier > 0) || math.IsInf(*rp.BackoffMultiplier, 0):
		return bad(".backoffMultiplier", "is %v; want a finite number > 0", *rp.BackoffMultiplier)
	case len(rp.RetryableStatusCodes) == 0:
		return bad(".retryableStatusCodes", "is empty; want at least one code, e.g. [\"UNAVAILABLE\"]")
	}
	initial, err := duration(ix, field+".initialBackoff", *rp.InitialBackoff, "0.1s")
	if err != nil {
		return nil, nil, err
	}
	maxB, err := duration(ix, field+".maxBackoff", *rp.MaxBackoff, "1s")
	if err != nil {
		return nil, nil, err
	}
	cs, err := statusCodes(ix, field+".retryableStatusCodes", rp.RetryableStatusCodes)
	if err != nil {
		return nil, nil, err
	}
	e.InitialBackoff, e.MaxBackoff, e.BackoffMultiplier = initial, maxB, *rp.BackoffMultiplier
	base, ceiling, strategy := e.Backoff()
	r, err := retry.New(retry.Options{
		MaxAttempts: min(*rp.MaxAttempts, o.MaxCallAttempts),
		Base:        base,
		Cap:         ceiling,
		Strategy:    strategy,
		Clock:       o.Clock,
		Rand:        o.Rand,
	})
	if err != nil {
		return bad("", "is refused: %v", err)
	}
	e.MaxAttempts, e.RetryableCodes = *rp.MaxAttempts, cs
	return r, cs, nil
}

// hedgingPolicy builds the hedge of a methodConfig entry's hedgingPolicy.
func hedgingPolicy(ix *jsonIndex, field string, hp *hedgingPolicyJSON, e *Entry, o ParseOptions) (*retry.Hedge, []codes.Code, error) {
	bad := func(path string, format string, args ...any) (*retry.Hedge, []codes.Code, error) {
		return nil, nil, ix.errAt(field+path, nil, format, args...)
	}
	switch {
	case hp.MaxAttempts == nil:
		return bad(".maxAttempts", "is missing; want an integer > 1")
	case *hp.MaxAttempts <= 1:
		return bad(".maxAttempts", "is %d; want > 1", *hp.MaxAttempts)
	}
	// nonFatalStatusCodes may be absent or empty: every failure is then fatal. A6
	// as amended makes the field optional, and grpc-java reads it so.
	delay := time.Duration(-1) // A6's default: no delay, every attempt at once
	if hp.HedgingDelay != nil {
		d, err := parseDuration(*hp.HedgingDelay)
		switch {
		case err == nil && d < 0:
			return nil, nil, ix.errAt(field+".hedgingDelay", ErrNegativeDuration, "is %q; want a duration ≥ 0 such as \"0.05s\"", *hp.HedgingDelay)
		case err != nil:
			return bad(".hedgingDelay", "is %q; want a duration ≥ 0 such as \"0.05s\"", *hp.HedgingDelay)
		}
		e.HedgingDelay = d
		if d > 0 {
			delay = d
		}
	}
	nonFatal, err := statusCodes(ix, field+".nonFatalStatusCodes", hp.NonFatalStatusCodes)
	if err != nil {
		return nil, nil, err
	}
	h, err := retry.NewHedge(retry.HedgeOptions{MaxAttempts: min(*hp.MaxAttempts, o.MaxCallAttempts, retry.HedgeMaxAttemptsLimit),
		Delay: delay, Clock: o.Clock})
	if err != nil {
		return bad("", "is refused: %v", err)
	}
	e.MaxAttempts, e.RetryableCodes = *hp.MaxAttempts, nonFatal
	return h, nonFatal, nil
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
