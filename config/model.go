package config

import "time"

// File is a configuration file as written: the stacks it names, the defaults they
// inherit, and the routes that choose a stack per request. Every field is optional;
// a field left out is inherited from Defaults, else the library's default applies
// (each field's doc names it).
type File struct {
	// Defaults is the stack every stack inherits from, field by field.
	Defaults Stack `yaml:"defaults" json:"defaults"`
	// Stacks are the named stacks, one per dependency.
	Stacks []NamedStack `yaml:"stacks" json:"stacks"`
	// HTTP routes requests made through the HTTP transport to stacks.
	HTTP *HTTPRoutes `yaml:"http" json:"http"`
	// GRPC routes RPCs made through the gRPC interceptors to stacks.
	GRPC *GRPCRoutes `yaml:"grpc" json:"grpc"`
}

// NamedStack is one entry of File.Stacks.
type NamedStack struct {
	Name  string
	Stack Stack
}

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
	// AttemptTimeout bounds each attempt (deadline.PerAttempt); it needs a retry
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

// HTTPRoutes choose a stack per HTTP request.
type HTTPRoutes struct {
	// Default is the stack of requests no route matches; without one they are sent
	// with no pipeline.
	Default *string `yaml:"default" json:"default"`
	// Routes are matched as http.ServeMux matches patterns: the most specific wins,
	// whatever the order.
	Routes []HTTPRoute `yaml:"routes" json:"routes"`
}

// HTTPRoute is one HTTP route.
type HTTPRoute struct {
	// Match is a Go 1.22 http.ServeMux pattern: "[METHOD ][HOST]/[PATH]", e.g.
	// "POST api.example.com/v1/charges/{id}" or "GET /v1/".
	Match *string `yaml:"match" json:"match"`
	Stack *string `yaml:"stack" json:"stack"`
}

// GRPCRoutes choose a stack per RPC, as a gRPC service config's name entries do.
type GRPCRoutes struct {
	Default *string     `yaml:"default" json:"default"`
	Routes  []GRPCRoute `yaml:"routes" json:"routes"`
}

// GRPCRoute is one gRPC route: Name is "pkg.Service/Method" or "pkg.Service"
// (every method of it). A method's own route wins over its service's.
type GRPCRoute struct {
	Name  *string `yaml:"name" json:"name"`
	Stack *string `yaml:"stack" json:"stack"`
}

// Duration is a duration written as a Go duration string ("250ms", "1m30s"); a bare
// number is refused, its unit being unclear. Off is set by "off", which only a
// deadline, an attempt timeout and a retry's max_hint accept.
type Duration struct {
	D   time.Duration
	Off bool
}

// String returns the duration as written in a file.
func (d Duration) String() string {
	if d.Off {
		return "off"
	}
	return d.D.String()
}

// MarshalText writes the duration as a string, for fingerprints and JSON.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
