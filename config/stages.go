package config

import (
	"fmt"
	"sync"
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/throttle"
)

// Stage names, as a stack's fields and Order name them, in the canonical order.
const (
	StageRateLimit      = "rate_limit"
	StageDeadline       = "deadline"
	StageBulkhead       = "bulkhead"
	StageThrottle       = "throttle"
	StageBreaker        = "breaker"
	StageBudget         = "budget"
	StageRetry          = "retry"
	StageHedge          = "hedge"
	StageAttemptTimeout = "attempt_timeout"
)

// Stack is one pipeline's stages. A stage left out is inherited from the defaults;
// a stage with enabled: false (a deadline or attempt timeout of "off") is not in
// the stack even if the defaults have it.
type Stack struct {
	// Order lists the stages outermost first, by their field names ("deadline",
	// "breaker", …). Without it they stand in the canonical order, which obeys every
	// ordering rule: rate_limit, deadline, bulkhead, throttle, breaker, budget,
	// retry, hedge, attempt_timeout. A stage listed must be configured; a configured
	// stage missing from the list is an error.
	Order []string `yaml:"order" json:"order"`
	// Deadline is the overall deadline of a call, sleeps included (deadline.New).
	Deadline *Duration `yaml:"deadline" json:"deadline"`
	// AttemptTimeout bounds each attempt (deadline.NewPerAttempt); it needs a retry
	// or hedge outside it (rule O3).
	AttemptTimeout *Duration  `yaml:"attempt_timeout" json:"attempt_timeout"`
	Breaker        *Breaker   `yaml:"breaker" json:"breaker"`
	Budget         *Budget    `yaml:"budget" json:"budget"`
	Retry          *Retry     `yaml:"retry" json:"retry"`
	Hedge          *Hedge     `yaml:"hedge" json:"hedge"`
	Throttle       *Throttle  `yaml:"throttle" json:"throttle"`
	Bulkhead       *Bulkhead  `yaml:"bulkhead" json:"bulkhead"`
	RateLimit      *RateLimit `yaml:"rate_limit" json:"rate_limit"`
}

// Breaker configures a circuit breaker (breaker.New), named after its stack. Zero
// fields take breaker's defaults: 5 consecutive failures, then 1 probe every 800 to
// 825 ms until one succeeds.
type Breaker struct {
	Enabled *bool `yaml:"enabled" json:"enabled"`
	// ConsecutiveFailures trips it after this many failures in a row
	// (default breaker.DefaultConsecutiveFailures, 5).
	ConsecutiveFailures *int `yaml:"consecutive_failures" json:"consecutive_failures"`
	// FailureRatio, in (0, 1], trips it on the share of failures over Window instead.
	FailureRatio *float64 `yaml:"failure_ratio" json:"failure_ratio"`
	// MinRequests is the calls Window needs before the ratio can trip (default 20).
	MinRequests *int `yaml:"min_requests" json:"min_requests"`
	// Window is ratio mode's rolling window (default 10s).
	Window *Duration `yaml:"window" json:"window"`
	// OpenTimeout is how long it stays open when it trips, and the probe interval
	// (default 750ms).
	OpenTimeout *Duration `yaml:"open_timeout" json:"open_timeout"`
	// MaxOpenTimeout bounds the probe interval as failed probes double it (default:
	// OpenTimeout, no doubling).
	MaxOpenTimeout *Duration `yaml:"max_open_timeout" json:"max_open_timeout"`
	// HalfOpenProbes is how many calls the breaker lets through each probe interval
	// (default 1).
	HalfOpenProbes *int `yaml:"half_open_probes" json:"half_open_probes"`
	// SlowCall counts a success slower than this as a failure (default off).
	SlowCall *Duration `yaml:"slow_call" json:"slow_call"`
	// SlowStart ramps the traffic up over this long after the breaker closes
	// (default off).
	SlowStart *Duration `yaml:"slow_start" json:"slow_start"`
}

// Budget configures a retry budget: exactly one of TokenBucket or Ratio.
type Budget struct {
	Enabled     *bool        `yaml:"enabled" json:"enabled"`
	TokenBucket *TokenBucket `yaml:"token_bucket" json:"token_bucket"`
	Ratio       *Ratio       `yaml:"ratio" json:"ratio"`
}

// TokenBucket is gRFC A6's retryThrottling (budget.NewTokenBucket); both fields are
// required.
type TokenBucket struct {
	MaxTokens  *float64 `yaml:"max_tokens" json:"max_tokens"`
	TokenRatio *float64 `yaml:"token_ratio" json:"token_ratio"`
}

// Ratio caps retries at a share of recent calls (budget.NewRatio): defaults ratio
// 0.1, min_per_second 10, window 10s.
type Ratio struct {
	Ratio        *float64  `yaml:"ratio" json:"ratio"`
	MinPerSecond *float64  `yaml:"min_per_second" json:"min_per_second"`
	Window       *Duration `yaml:"window" json:"window"`
}

// Retry configures the retry (retry.New). Defaults: 3 attempts, strategy full,
// base 100ms, cap 5s, max_hint 30s; HTTP retries policyhttp.DefaultClassifier's
// statuses (408, 429, 502, 503, 504), gRPC retries UNAVAILABLE.
type Retry struct {
	Enabled *bool `yaml:"enabled" json:"enabled"`
	// Attempts counts every attempt, the first included.
	Attempts *int `yaml:"attempts" json:"attempts"`
	// Strategy is the backoff: full, equal, decorrelated, none, grpc or envoy (Envoy's
	// retry_back_off: retry N waits a random time in [0, (2^N − 1) × base], at most cap).
	Strategy *string `yaml:"strategy" json:"strategy"`
	// Base is the first backoff window; Cap bounds it.
	Base *Duration `yaml:"base" json:"base"`
	Cap  *Duration `yaml:"cap" json:"cap"`
	// Multiplier is strategy grpc's growth per retry (default 1.6).
	Multiplier *float64 `yaml:"multiplier" json:"multiplier"`
	// MaxHint is the longest server hint (Retry-After, pushback) waited for; "off"
	// waits for none: the back-off applies whatever a server asks, as an Envoy route
	// without rate_limited_retry_back_off does.
	MaxHint *Duration `yaml:"max_hint" json:"max_hint"`
	// HTTPStatuses are the response statuses retried through the HTTP transport,
	// replacing the default classification's.
	HTTPStatuses []int `yaml:"http_statuses" json:"http_statuses"`
	// GRPCCodes are the status codes retried through the gRPC interceptors
	// ("UNAVAILABLE", …).
	GRPCCodes []string `yaml:"grpc_codes" json:"grpc_codes"`
}

// Hedge configures hedged attempts (retry.NewHedge): defaults 2 attempts, delay 2s.
// For the ordering rules a hedge is a retry: a stack has a retry or a hedge (O2).
type Hedge struct {
	Enabled  *bool     `yaml:"enabled" json:"enabled"`
	Attempts *int      `yaml:"attempts" json:"attempts"`
	Delay    *Duration `yaml:"delay" json:"delay"`
	// GRPCCodes are the status codes after which the gRPC interceptors go on
	// hedging (a service config's nonFatalStatusCodes); default UNAVAILABLE.
	GRPCCodes []string `yaml:"grpc_codes" json:"grpc_codes"`
}

// Throttle configures client-side adaptive throttling (throttle.New): defaults k 2,
// window 2m.
type Throttle struct {
	Enabled *bool     `yaml:"enabled" json:"enabled"`
	K       *float64  `yaml:"k" json:"k"`
	Window  *Duration `yaml:"window" json:"window"`
}

// Bulkhead caps concurrent calls (bulkhead.New): defaults max_concurrent 10, no
// queue, max_wait as long as the deadline allows.
type Bulkhead struct {
	Enabled       *bool     `yaml:"enabled" json:"enabled"`
	MaxConcurrent *int      `yaml:"max_concurrent" json:"max_concurrent"`
	MaxQueue      *int      `yaml:"max_queue" json:"max_queue"`
	MaxWait       *Duration `yaml:"max_wait" json:"max_wait"`
}

// RateLimit configures a client-side rate limiter (ratelimit.New): rate is
// required; burst defaults to one second's worth, mode to wait.
type RateLimit struct {
	Enabled *bool     `yaml:"enabled" json:"enabled"`
	Rate    *float64  `yaml:"rate" json:"rate"`
	Burst   *int      `yaml:"burst" json:"burst"`
	Mode    *string   `yaml:"mode" json:"mode"`
	MaxWait *Duration `yaml:"max_wait" json:"max_wait"`
}

// A stageDef is one stage a stack may hold: how the loader finds its settings in a
// stack, builds it, and places a constructor's error at the field it names.
type stageDef struct {
	name string
	// settings returns the stage's settings in s, nil if s has none; they are the
	// stage's fingerprint across a reload.
	settings func(s Stack) any
	// on reports whether s holds the stage: configured, and not disabled.
	on func(s Stack) bool
	// build builds the stage from s. It reports a problem of its own with
	// b.problem and returns nil, nil after one.
	build func(b *builder, name string, s Stack) (policy.Policy, error)
	// example is a stack holding the stage with the least settings it needs; the
	// stage's placement is read from a stage built from it.
	example Stack
	// stateful is set for a stage that keeps state across calls, and so across a
	// reload that leaves its settings alone.
	stateful bool
	// unstreamed is set for a stage gRPC streams cannot use: their pipeline leaves
	// it out.
	unstreamed bool
	// classes returns the HTTP statuses and gRPC codes the stage retries, for the
	// stack's classification; nil for a stage that retries nothing.
	classes func(s Stack) (statuses []int, codes []string)
	// fields are the stage's fields: the option names the constructor's errors use,
	// to place a refused value at the field that set it, and examples for fixes.
	fields []stageField
	// zeros are the fields whose 0 the library reads as "the default": written in a
	// file, 0 is refused, since leaving the field out says that.
	zeros map[string]func(s Stack) any
}

// stageField is one field of a stage, for problems and their fixes.
type stageField struct {
	name    string // in the stage: "attempts", "ratio.ratio"; "" for a stage that is a value
	goName  string // the constructor's option name; "" for none
	example string // a value to suggest, as a file writes it
	item    string // for a list, an item to suggest
}

// stages is the one table of the stages a stack may hold, in the canonical order: it
// obeys every ordering rule. The loader knows no stage but through this table. It is
// set in init, since the builders' fixes read examples from it.
var stages []*stageDef

func init() {
	stages = []*stageDef{
		{
			name:     StageRateLimit,
			settings: func(s Stack) any { return s.RateLimit },
			on:       func(s Stack) bool { return s.RateLimit != nil && enabled(s.RateLimit.Enabled) },
			build:    (*builder).rateLimit,
			example:  Stack{RateLimit: &RateLimit{Rate: ptr(1.0)}},
			stateful: true,
			fields: []stageField{{"rate", "Rate", "100", ""}, {"burst", "Burst", "10", ""}, {"mode", "", "wait", ""},
				{"max_wait", "MaxWait", "50ms", ""}},
			zeros: map[string]func(s Stack) any{"rate_limit.burst": func(s Stack) any { return s.RateLimit.Burst }},
		},
		{
			name:     StageDeadline,
			settings: func(s Stack) any { return s.Deadline },
			on:       func(s Stack) bool { return s.Deadline != nil && !s.Deadline.Off },
			build: func(_ *builder, _ string, s Stack) (policy.Policy, error) {
				return deadline.New(deadline.Options{Timeout: s.Deadline.D})
			},
			example: Stack{Deadline: &Duration{D: time.Second}},
			fields:  []stageField{{"", "Timeout", "2s", ""}},
		},
		{
			name:     StageBulkhead,
			settings: func(s Stack) any { return s.Bulkhead },
			on:       func(s Stack) bool { return s.Bulkhead != nil && enabled(s.Bulkhead.Enabled) },
			build:    (*builder).bulkhead,
			example:  Stack{Bulkhead: &Bulkhead{}},
			stateful: true,
			fields: []stageField{{"max_concurrent", "MaxConcurrent", "10", ""}, {"max_queue", "MaxQueue", "5", ""},
				{"max_wait", "MaxWait", "100ms", ""}},
			zeros: map[string]func(s Stack) any{"bulkhead.max_concurrent": func(s Stack) any { return s.Bulkhead.MaxConcurrent }},
		},
		{
			name:     StageThrottle,
			settings: func(s Stack) any { return s.Throttle },
			on:       func(s Stack) bool { return s.Throttle != nil && enabled(s.Throttle.Enabled) },
			build: func(b *builder, name string, s Stack) (policy.Policy, error) {
				c := s.Throttle
				return throttle.New(throttle.Options{Name: name, K: floatp(c.K), Window: durp(c.Window), Clock: b.o.Clock, Rand: b.o.Rand})
			},
			example:  Stack{Throttle: &Throttle{}},
			stateful: true,
			fields:   []stageField{{"k", "K", "2", ""}, {"window", "Window", "2m", ""}},
			zeros:    map[string]func(s Stack) any{"throttle.k": func(s Stack) any { return s.Throttle.K }},
		},
		{
			name:     StageBreaker,
			settings: func(s Stack) any { return s.Breaker },
			on:       func(s Stack) bool { return s.Breaker != nil && enabled(s.Breaker.Enabled) },
			build:    (*builder).breaker,
			example:  Stack{Breaker: &Breaker{}},
			stateful: true,
			fields: []stageField{{"consecutive_failures", "ConsecutiveFailures", "5", ""}, {"failure_ratio", "FailureRatio", "0.5", ""},
				{"min_requests", "MinRequests", "20", ""}, {"window", "Window", "10s", ""}, {"open_timeout", "OpenTimeout", "750ms", ""},
				{"max_open_timeout", "MaxOpenTimeout", "30s", ""}, {"half_open_probes", "HalfOpenProbes", "1", ""},
				{"slow_call", "SlowCall", "2s", ""}, {"slow_start", "SlowStart", "10s", ""}},
		},
		{
			name:     StageBudget,
			settings: func(s Stack) any { return s.Budget },
			on:       func(s Stack) bool { return s.Budget != nil && enabled(s.Budget.Enabled) },
			build:    (*builder).budget,
			example:  Stack{Budget: &Budget{Ratio: &Ratio{}}},
			stateful: true,
			fields: []stageField{{"token_bucket", "", "{max_tokens: 10, token_ratio: 0.1}", ""},
				{"token_bucket.max_tokens", "MaxTokens", "10", ""}, {"token_bucket.token_ratio", "TokenRatio", "0.1", ""},
				{"ratio", "", "{ratio: 0.1}", ""}, {"ratio.ratio", "Ratio", "0.1", ""},
				{"ratio.min_per_second", "MinPerSecond", "10", ""}, {"ratio.window", "Window", "10s", ""}},
			zeros: map[string]func(s Stack) any{
				"budget.ratio.ratio": func(s Stack) any {
					if s.Budget.Ratio == nil {
						return (*float64)(nil)
					}
					return s.Budget.Ratio.Ratio
				},
				"budget.ratio.min_per_second": func(s Stack) any {
					if s.Budget.Ratio == nil {
						return (*float64)(nil)
					}
					return s.Budget.Ratio.MinPerSecond
				},
			},
		},
		{
			name:     StageRetry,
			settings: func(s Stack) any { return s.Retry },
			on:       func(s Stack) bool { return s.Retry != nil && enabled(s.Retry.Enabled) },
			build:    (*builder).retry,
			example:  Stack{Retry: &Retry{}},
			classes:  func(s Stack) ([]int, []string) { return s.Retry.HTTPStatuses, s.Retry.GRPCCodes },
			fields: []stageField{{"attempts", "MaxAttempts", "3", ""}, {"strategy", "", "full", ""},
				{"base", "Base", "100ms", ""}, {"cap", "Cap", "5s", ""}, {"multiplier", "Multiplier", "1.6", ""},
				{"max_hint", "MaxHintDelay", "30s", ""}, {"http_statuses", "", "[429, 502, 503, 504]", "503"},
				{"grpc_codes", "", "[UNAVAILABLE]", "UNAVAILABLE"}},
			zeros: map[string]func(s Stack) any{"retry.multiplier": func(s Stack) any { return s.Retry.Multiplier }},
		},
		{
			name:     StageHedge,
			settings: func(s Stack) any { return s.Hedge },
			on:       func(s Stack) bool { return s.Hedge != nil && enabled(s.Hedge.Enabled) },
			build: func(b *builder, _ string, s Stack) (policy.Policy, error) {
				c := s.Hedge
				return retry.NewHedge(retry.HedgeOptions{MaxAttempts: intp(c.Attempts), Delay: durp(c.Delay), Clock: b.o.Clock})
			},
			example:    Stack{Hedge: &Hedge{}},
			unstreamed: true, // streams are retried, never hedged
			classes:    func(s Stack) ([]int, []string) { return nil, s.Hedge.GRPCCodes },
			fields: []stageField{{"attempts", "MaxAttempts", "2", ""}, {"delay", "Delay", "150ms", ""},
				{"grpc_codes", "", "[UNAVAILABLE]", "UNAVAILABLE"}},
			zeros: map[string]func(s Stack) any{"hedge.attempts": func(s Stack) any { return s.Hedge.Attempts }},
		},
		{
			name:     StageAttemptTimeout,
			settings: func(s Stack) any { return s.AttemptTimeout },
			on:       func(s Stack) bool { return s.AttemptTimeout != nil && !s.AttemptTimeout.Off },
			build: func(_ *builder, _ string, s Stack) (policy.Policy, error) {
				return deadline.NewPerAttempt(deadline.Options{Timeout: s.AttemptTimeout.D})
			},
			example: Stack{AttemptTimeout: &Duration{D: time.Second}},
			fields:  []stageField{{"", "Timeout", "500ms", ""}},
		},
	}
}

// stageNamed returns the table's entry for a stage name; nil if there is none.
func stageNamed(name string) *stageDef {
	for _, d := range stages {
		if d.name == name {
			return d
		}
	}
	return nil
}

// stageNames returns the names of the table's stages, in the canonical order.
func stageNames() []string {
	names := make([]string, len(stages))
	for i, d := range stages {
		names[i] = d.name
	}
	return names
}

// enabled reads an enabled field: left out, a stage is on.
func enabled(e *bool) bool { return e == nil || *e }

// place returns the stage's placement. A placement does not hang on settings, so the
// loader checks a stack's order before it builds the stack, and even when the file's
// settings are refused; policy.Wrap checks again with the stages built.
func (d *stageDef) place() policy.Placement { return placements()[d.name] }

// placements reads every stage's placement once, from a stage built from its example.
var placements = sync.OnceValue(func() map[string]policy.Placement {
	m := make(map[string]policy.Placement, len(stages))
	for _, d := range stages {
		b := &builder{d: &decoder{pos: make(map[string]Pos)}}
		p, err := d.build(b, d.name, d.example)
		if err != nil || p == nil || len(b.d.probs) > 0 {
			panic(fmt.Sprintf("config: stage %s does not build from its example: %v %v", d.name, err, b.d.probs))
		}
		m[d.name] = p.Placement()
	}
	return m
})

func (b *builder) breaker(name string, s Stack) (policy.Policy, error) {
	c := s.Breaker
	o := breaker.Options{
		ConsecutiveFailures: b.count(name, "breaker.consecutive_failures", c.ConsecutiveFailures),
		FailureRatio:        floatp(c.FailureRatio),
		MinRequests:         b.count(name, "breaker.min_requests", c.MinRequests),
		Window:              durp(c.Window),
		OpenTimeout:         durp(c.OpenTimeout),
		MaxOpenTimeout:      durp(c.MaxOpenTimeout),
		HalfOpenProbes:      b.count(name, "breaker.half_open_probes", c.HalfOpenProbes),
		SlowCall:            durp(c.SlowCall),
		SlowStart:           durp(c.SlowStart),
		Rand:                b.o.Rand,
	}
	if c.FailureRatio != nil && *c.FailureRatio <= 0 {
		b.problem(name, "breaker.failure_ratio", nil, fmt.Sprintf("is %v", *c.FailureRatio), "want a ratio in (0, 1]"+suchRel("breaker.failure_ratio"))
		return nil, nil
	}
	if c.FailureRatio == nil && (c.MinRequests != nil || c.Window != nil) {
		field := "breaker.min_requests"
		if c.Window != nil {
			field = "breaker.window"
		}
		b.problem(name, field, nil, "applies to ratio mode only", "set failure_ratio, such as failure_ratio: 0.5, or remove it")
		return nil, nil
	}
	o.Name = name
	return breaker.New(o)
}

func (b *builder) budget(name string, s Stack) (policy.Policy, error) {
	c := s.Budget
	switch {
	case c.TokenBucket != nil && c.Ratio != nil:
		b.problem(name, "budget", nil, "has both token_bucket and ratio", "keep one of the two")
		return nil, nil
	case c.TokenBucket == nil && c.Ratio == nil:
		b.problem(name, "budget", nil, "has neither token_bucket nor ratio",
			"add one, such as token_bucket: {max_tokens: 10, token_ratio: 0.1} or ratio: {ratio: 0.1}")
		return nil, nil
	case c.TokenBucket != nil:
		tb := c.TokenBucket
		if tb.MaxTokens == nil || tb.TokenRatio == nil {
			field := "max_tokens"
			if tb.MaxTokens != nil {
				field = "token_ratio"
			}
			b.problem(name, "budget.token_bucket", nil, field+" is missing", "add it"+suchRel("budget.token_bucket."+field)+"; a token bucket needs both")
			return nil, nil
		}
		return budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: *tb.MaxTokens, TokenRatio: *tb.TokenRatio})
	}
	r := c.Ratio
	return budget.NewRatio(budget.RatioOptions{Ratio: floatp(r.Ratio), MinPerSecond: floatp(r.MinPerSecond), Window: durp(r.Window), Clock: b.o.Clock})
}

func (b *builder) retry(name string, s Stack) (policy.Policy, error) {
	c := s.Retry
	strat, ok := b.strategy(name, c)
	if c.Attempts != nil && *c.Attempts < 1 {
		b.problem(name, "retry.attempts", nil, fmt.Sprintf("is %d", *c.Attempts), "want ≥ 1"+suchRel("retry.attempts")+" (1 never retries)")
		ok = false
	}
	if !ok {
		return nil, nil
	}
	rt, err := retry.New(retry.Options{MaxAttempts: intp(c.Attempts), Base: durp(c.Base), Cap: durp(c.Cap),
		Strategy: strat, MaxHintDelay: durp(c.MaxHint), Clock: b.o.Clock, Rand: b.o.Rand})
	if err != nil {
		return nil, err
	}
	if c.MaxHint != nil && c.MaxHint.Off {
		return &hintless{rt}, nil
	}
	return rt, nil
}

// Strategy names, as retry.strategy takes them.
var strategies = []string{"full", "equal", "decorrelated", "none", "grpc", "envoy"}

func (b *builder) strategy(name string, c *Retry) (retry.Strategy, bool) {
	s := "full"
	if c.Strategy != nil {
		s = *c.Strategy
	}
	if c.Multiplier != nil && s != "grpc" {
		b.problem(name, "retry.multiplier", nil, fmt.Sprintf("applies to strategy grpc only (strategy is %s)", s), "set strategy: grpc, or remove multiplier")
		return nil, false
	}
	switch s {
	case "full":
		return retry.Full{}, true
	case "equal":
		return retry.Equal{}, true
	case "decorrelated":
		return retry.Decorrelated{}, true
	case "none":
		return retry.None{}, true
	case "grpc":
		return retry.GRPC{Multiplier: floatp(c.Multiplier)}, true // retry.New checks it
	case "envoy":
		return policyenvoy.Backoff{}, true
	}
	b.problem(name, "retry.strategy", nil, fmt.Sprintf("is %q", s), oneOf(s, strategies))
	return nil, false
}

func (b *builder) bulkhead(name string, s Stack) (policy.Policy, error) {
	c := s.Bulkhead
	if c.MaxQueue != nil && *c.MaxQueue < 0 {
		b.problem(name, "bulkhead.max_queue", nil, fmt.Sprintf("is %d", *c.MaxQueue), "want ≥ 0"+suchRel("bulkhead.max_queue")+" (0: no call waits)")
		return nil, nil
	}
	return bulkhead.New(bulkhead.Options{Name: name, MaxConcurrent: intp(c.MaxConcurrent), MaxQueue: intp(c.MaxQueue), MaxWait: durp(c.MaxWait), Clock: b.o.Clock})
}

func (b *builder) rateLimit(name string, s Stack) (policy.Policy, error) {
	c := s.RateLimit
	if c.Rate == nil {
		b.problem(name, "rate_limit", nil, "rate is missing", "add rate, in calls per second"+suchRel("rate_limit.rate"))
		return nil, nil
	}
	mode := ratelimit.Wait
	if c.Mode != nil {
		switch *c.Mode {
		case "wait":
		case "refuse":
			mode = ratelimit.Refuse
		default:
			b.problem(name, "rate_limit.mode", nil, fmt.Sprintf("is %q", *c.Mode), oneOf(*c.Mode, []string{"wait", "refuse"}))
			return nil, nil
		}
	}
	return ratelimit.New(ratelimit.Options{Name: name, Rate: *c.Rate, Burst: intp(c.Burst), Mode: mode, MaxWait: durp(c.MaxWait), Clock: b.o.Clock})
}
