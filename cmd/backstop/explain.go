package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
)

// wait is one back-off wait, in seconds, for -json.
type wait struct {
	BeforeAttempt int     `json:"before_attempt"`
	MinSeconds    float64 `json:"min_seconds"`
	MeanSeconds   float64 `json:"mean_seconds"`
	MaxSeconds    float64 `json:"max_seconds"`
}

// routeView is an Envoy route explained in Envoy's words.
type routeView struct {
	Config string `json:"config"` // "envoy-route"
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	Name   string `json:"route"`

	TimeoutSeconds       *float64 `json:"timeout_seconds"` // null: timeout 0s, none
	TimeoutIsDefault     bool     `json:"timeout_is_envoys_default"`
	PerTryTimeoutSeconds *float64 `json:"per_try_timeout_seconds"` // null: none

	Retries              bool     `json:"retries"`
	NumRetries           int      `json:"num_retries"`
	AttemptsAtMost       int      `json:"attempts_at_most"` // the first try and num_retries
	RetryOn              []string `json:"retry_on"`
	RetriableStatusCodes []int    `json:"retriable_status_codes"`

	BaseIntervalSeconds float64 `json:"base_interval_seconds,omitempty"`
	MaxIntervalSeconds  float64 `json:"max_interval_seconds,omitempty"`
	BackOff             string  `json:"back_off,omitempty"`
	Waits               []wait  `json:"back_off_waits,omitempty"`

	RateLimitedResetHeaders []string `json:"rate_limited_reset_headers,omitempty"`
	RetryAfterHonoured      bool     `json:"retry_after_honoured"`
	RetryAfter              string   `json:"retry_after"`

	WorstCaseSeconds *float64 `json:"worst_case_seconds"` // null: unbounded
	WorstCaseBoundBy string   `json:"worst_case_bound_by"`

	UnknownRetryOn        []string `json:"unknown_retry_on,omitempty"`
	NotHonouredByBackstop []string `json:"not_honoured_by_backstop,omitempty"`
	// BackstopDiffers says where the route's stack in Backstop's model does otherwise
	// than Envoy, or cannot say what it says: its match, its routing.
	BackstopDiffers []string `json:"backstop_differs,omitempty"`
}

// methodView is a gRPC methodConfig entry explained in gRPC's words.
type methodView struct {
	Config string   `json:"config"` // "grpc-method-config"
	File   string   `json:"file"`
	Line   int      `json:"line"`
	Column int      `json:"column"`
	Field  string   `json:"field"` // methodConfig[i]
	Names  []string `json:"names"`

	TimeoutSeconds *float64 `json:"timeout_seconds"` // null: none

	Policy               string   `json:"policy"` // retryPolicy, hedgingPolicy or none
	MaxAttemptsAsWritten int      `json:"max_attempts_as_written,omitempty"`
	AttemptsAtMost       int      `json:"attempts_at_most"` // after gRPC's cap of 5
	StatusCodes          []string `json:"status_codes,omitempty"`
	StatusCodesField     string   `json:"status_codes_field,omitempty"`

	InitialBackoffSeconds float64 `json:"initial_backoff_seconds,omitempty"`
	MaxBackoffSeconds     float64 `json:"max_backoff_seconds,omitempty"`
	BackoffMultiplier     float64 `json:"backoff_multiplier,omitempty"`
	Backoff               string  `json:"backoff,omitempty"`
	Waits                 []wait  `json:"backoff_waits,omitempty"`
	HedgingDelaySeconds   float64 `json:"hedging_delay_seconds,omitempty"`

	RetryThrottling *throttlingView `json:"retry_throttling"` // null: none
	ServerPushback  string          `json:"server_pushback,omitempty"`

	WorstCaseSeconds *float64 `json:"worst_case_seconds"` // null: unbounded
	WorstCaseBoundBy string   `json:"worst_case_bound_by"`

	BackstopDiffers []string `json:"backstop_differs,omitempty"`
}

type throttlingView struct {
	MaxTokens  float64 `json:"max_tokens"`
	TokenRatio float64 `json:"token_ratio"`
	Says       string  `json:"says"`
}

func seconds(d time.Duration) *float64 {
	v := d.Seconds()
	return &v
}

// waitsOf reads the retry stage's sleeps.
func waitsOf(e policy.Explanation) []wait {
	var out []wait
	for _, st := range e.Stack {
		if !st.Place.OwnsRetries {
			continue
		}
		for i, s := range st.Sleeps {
			out = append(out, wait{BeforeAttempt: i + 2, MinSeconds: s.Min.Seconds(), MeanSeconds: s.Mean.Seconds(), MaxSeconds: s.Max.Seconds()})
		}
	}
	return out
}

// viewsOf explains a configuration: a Backstop file as its routing tables and
// stacks; an imported one stack by stack, each in its original's words.
func viewsOf(c *config.Config) []any {
	e := c.Explain()
	var views []any
	for _, se := range e.Stacks {
		o, ok := c.Origin(se.Name)
		if !ok {
			return []any{configView{e}}
		}
		s, _ := c.Settings(se.Name)
		var differs []string
		for _, n := range c.Notes() {
			if n.Stack == se.Name && (n.Reason == config.NoteDiffers || n.Reason == config.NoteNotCarried && !isRetryField(n.Field)) {
				differs = append(differs, n.Field+": "+n.Msg)
			}
		}
		switch o.Format {
		case config.FormatEnvoy:
			views = append(views, explainRoute(o, se, s, differs))
		case config.FormatGRPC:
			views = append(views, explainMethod(o, se, s, differs))
		}
	}
	return views
}

// isRetryField reports whether an Envoy field is one of a route's retry settings,
// which the route's view lists as not honoured, rather than of its match.
func isRetryField(field string) bool {
	return strings.HasPrefix(field, "retry_policy") || field == "hedge_policy"
}

// explainRoute explains an Envoy route from its stack in the model: the attempts,
// back-off and worst case are the stack's, the words Envoy's.
func explainRoute(o config.Origin, se config.StackExplanation, s config.Stack, differs []string) routeView {
	r, e := o.Route, se.Explanation
	_, pos := o.Field("")
	v := routeView{Config: "envoy-route", File: pos.File, Line: max(pos.Line, 1), Column: max(pos.Column, 1), Name: r.Name,
		Retries: e.MaxAttempts > 1, NumRetries: r.NumRetries, RetryOn: r.RetryOn, RetriableStatusCodes: r.RetriableStatusCodes,
		UnknownRetryOn: r.UnknownRetryOn, NotHonouredByBackstop: r.Unsupported, AttemptsAtMost: e.MaxAttempts, BackstopDiffers: differs}
	if v.RetryOn == nil {
		v.RetryOn = []string{}
	}
	if v.RetriableStatusCodes == nil {
		v.RetriableStatusCodes = []int{}
	}
	if r.Timeout > 0 {
		v.TimeoutSeconds = seconds(r.Timeout)
	}
	v.TimeoutIsDefault = r.DefaultTimeout
	if r.PerTryTimeout > 0 {
		v.PerTryTimeoutSeconds = seconds(r.PerTryTimeout)
	}
	if s.AttemptTimeout != nil && !s.AttemptTimeout.Off {
		v.PerTryTimeoutSeconds = seconds(s.AttemptTimeout.D)
	}
	if v.Retries {
		v.NumRetries = e.MaxAttempts - 1
		base, maxInterval := s.Retry.Base.D, s.Retry.Cap.D
		v.BaseIntervalSeconds, v.MaxIntervalSeconds = base.Seconds(), maxInterval.Seconds()
		v.BackOff = fmt.Sprintf("Envoy's fully jittered exponential back-off: retry N waits a random time in "+
			"[0, (2^N − 1) × %v] (base_interval), at most %v (max_interval)", base, maxInterval)
		v.Waits = waitsOf(e)
	}
	v.RateLimitedResetHeaders = r.ResetHeaders
	v.RetryAfterHonoured, v.RetryAfter = retryAfter(r, v.Retries)
	if e.WorstCaseFrom != "" {
		v.WorstCaseSeconds = seconds(e.WorstCase)
	}
	switch {
	case e.WorstCaseFrom == "deadline" && r.Timeout > 0:
		v.WorstCaseBoundBy = "timeout"
	case e.WorstCaseFrom == "deadline":
		v.WorstCaseBoundBy = "per_try_timeout" // one try: its timeout is the request's
	case e.WorstCaseFrom == "attempts":
		v.WorstCaseBoundBy = "per_try_timeout × attempts, with the longest back-off waits"
	default:
		v.WorstCaseBoundBy = "nothing: timeout 0s and no per_try_timeout"
	}
	return v
}

// retryAfter says whether the route honours a server's Retry-After: Envoy does only
// with rate_limited_retry_back_off naming it among its reset_headers.
func retryAfter(r *policyenvoy.Route, retrying bool) (bool, string) {
	if !retrying {
		return false, "not honoured: the route does not retry"
	}
	var named string
	for _, h := range r.ResetHeaders {
		if strings.HasPrefix(strings.ToLower(h), "retry-after ") {
			named = h
		}
	}
	if len(r.ResetHeaders) == 0 {
		return false, "not honoured: Envoy waits for a server's Retry-After only under rate_limited_retry_back_off, " +
			"with Retry-After among its reset_headers; this route waits its back-off whatever the server says"
	}
	s := fmt.Sprintf("rate_limited_retry_back_off: on a response retry_on retries, the first of %s whose interval is 1s to %v "+
		"sets the wait to random(interval, 1.5 × interval), at most %v; a header missing, unreadable, in the past or above %v "+
		"is passed over for the next, and with none left the back-off above applies",
		strings.Join(r.ResetHeaders, ", "), r.ResetMaxInterval, r.ResetMaxInterval+r.ResetMaxInterval/2, r.ResetMaxInterval)
	if named == "" {
		return false, "not honoured (Retry-After is not among reset_headers); " + s
	}
	return true, "honoured as a reset header; " + s
}

// explainMethod explains a gRPC methodConfig entry from its stack in the model: the
// attempts, back-off and worst case are the stack's, the words gRFC A6's.
func explainMethod(o config.Origin, se config.StackExplanation, s config.Stack, differs []string) methodView {
	sc, en, e := o.ServiceConfig, o.Entry, se.Explanation
	_, pos := o.Field("")
	v := methodView{Config: "grpc-method-config", File: pos.File, Line: max(pos.Line, 1), Column: max(pos.Column, 1), Field: en.Field,
		Names: en.Names, Policy: "none", AttemptsAtMost: e.MaxAttempts, BackstopDiffers: differs}
	if en.Timeout > 0 {
		v.TimeoutSeconds = seconds(en.Timeout)
	}
	switch {
	case en.Retrying:
		v.Policy, v.StatusCodesField = "retryPolicy", "retryableStatusCodes"
		v.InitialBackoffSeconds, v.MaxBackoffSeconds, v.BackoffMultiplier = en.InitialBackoff.Seconds(), en.MaxBackoff.Seconds(), en.BackoffMultiplier
		v.Backoff = fmt.Sprintf("gRFC A6: retry N waits min(initialBackoff %v × backoffMultiplier %v^(N−1), maxBackoff %v), ±20%% at random, at most maxBackoff",
			en.InitialBackoff, en.BackoffMultiplier, en.MaxBackoff)
		if en.MaxBackoff < en.InitialBackoff {
			v.Backoff += "; with maxBackoff below initialBackoff the waits start at maxBackoff"
		}
		v.Waits = waitsOf(e)
		v.ServerPushback = "honoured as gRFC A6 says: a server's grpc-retry-pushback-ms sets the next wait exactly; " +
			"a negative or malformed one stops the retries; a pushback past the timeout ends the call with DEADLINE_EXCEEDED"
	case en.Hedging:
		v.Policy, v.StatusCodesField = "hedgingPolicy", "nonFatalStatusCodes"
		v.HedgingDelaySeconds = en.HedgingDelay.Seconds()
		v.ServerPushback = "honoured as gRFC A6 says: a server's grpc-retry-pushback-ms delays the next hedged request"
	}
	if en.Retrying || en.Hedging {
		v.MaxAttemptsAsWritten = en.MaxAttempts
		for _, c := range en.RetryableCodes {
			v.StatusCodes = append(v.StatusCodes, policygrpc.StatusCodeName(c))
		}
	}
	if t, ok := sc.Throttling(); ok {
		v.RetryThrottling = &throttlingView{MaxTokens: t.MaxTokens, TokenRatio: t.TokenRatio,
			Says: fmt.Sprintf("gRFC A6 retry throttling for the channel: %v tokens; each failure with a retried code costs 1, each success "+
				"gives back %v; retries and hedges stop while tokens are at or below %v", t.MaxTokens, t.TokenRatio, t.MaxTokens/2)}
	}
	if e.WorstCaseFrom != "" {
		v.WorstCaseSeconds = seconds(e.WorstCase)
		v.WorstCaseBoundBy = "timeout"
	} else {
		v.WorstCaseBoundBy = "nothing: no timeout; only the caller's deadline, if it sets one, ends a call"
	}
	return v
}

func secs(p *float64) string {
	if p == nil {
		return ""
	}
	return time.Duration(*p * float64(time.Second)).String()
}

func (v routeView) text(w io.Writer) {
	fmt.Fprintf(w, "%s:%d:%d: Envoy route %q\n", v.File, v.Line, v.Column, v.Name)
	row := rowWriter(w)
	switch {
	case v.TimeoutSeconds == nil:
		row("timeout", "none (timeout 0s): nothing bounds the request as a whole")
	case v.TimeoutIsDefault:
		row("timeout", "%s, Envoy's default, for the whole request: every try and wait", secs(v.TimeoutSeconds))
	default:
		row("timeout", "%s for the whole request: every try and wait", secs(v.TimeoutSeconds))
	}
	if v.PerTryTimeoutSeconds != nil {
		row("per_try_timeout", "%s for each try", secs(v.PerTryTimeoutSeconds))
	}
	if !v.Retries {
		row("retries", "none: one try")
	} else {
		row("tries", "up to %d: the first and num_retries %d", v.AttemptsAtMost, v.NumRetries)
		row("retry_on", "%s", strings.Join(v.RetryOn, ", "))
		if len(v.RetriableStatusCodes) > 0 {
			codes := fmt.Sprint(v.RetriableStatusCodes)
			row("retriable_status_codes", "%s", codes[1:len(codes)-1])
		}
		row("retry_back_off", "%s", v.BackOff)
		for _, s := range v.Waits {
			row("", "before try %d: %v–%v, mean %v", s.BeforeAttempt, dur(s.MinSeconds), dur(s.MaxSeconds), dur(s.MeanSeconds))
		}
	}
	row("Retry-After", "%s", v.RetryAfter)
	if v.WorstCaseSeconds != nil {
		row("worst case", "%s, bound by %s", secs(v.WorstCaseSeconds), v.WorstCaseBoundBy)
	} else {
		row("worst case", "unbounded: %s", strings.TrimPrefix(v.WorstCaseBoundBy, "nothing: "))
	}
	if len(v.UnknownRetryOn) > 0 {
		row("unknown retry_on", "%s: not a condition Envoy knows, never retried", strings.Join(v.UnknownRetryOn, ", "))
	}
	for _, u := range v.NotHonouredByBackstop {
		row("not honoured by Backstop", "%s", u)
	}
	for _, d := range v.BackstopDiffers {
		row("Backstop's stack", "%s", d)
	}
}

func (v methodView) text(w io.Writer) {
	fmt.Fprintf(w, "%s:%d:%d: gRPC %s for %s\n", v.File, v.Line, v.Column, v.Field, strings.Join(v.Names, ", "))
	row := rowWriter(w)
	if v.TimeoutSeconds == nil {
		row("timeout", "none: a call is bounded only by its caller's deadline, if it sets one")
	} else {
		row("timeout", "%s for the whole call: every attempt and wait", secs(v.TimeoutSeconds))
	}
	switch v.Policy {
	case "retryPolicy":
		if v.MaxAttemptsAsWritten > v.AttemptsAtMost {
			row("retryPolicy.maxAttempts", "%d, which gRPC caps at %d", v.MaxAttemptsAsWritten, v.AttemptsAtMost)
		} else {
			row("retryPolicy.maxAttempts", "%d attempts at most, the first included", v.AttemptsAtMost)
		}
		row("retryableStatusCodes", "%s", strings.Join(v.StatusCodes, ", "))
		row("backoff", "%s", v.Backoff)
		for _, s := range v.Waits {
			row("", "before attempt %d: %v–%v, mean %v", s.BeforeAttempt, dur(s.MinSeconds), dur(s.MaxSeconds), dur(s.MeanSeconds))
		}
	case "hedgingPolicy":
		if v.MaxAttemptsAsWritten > v.AttemptsAtMost {
			row("hedging maxAttempts", "%d, which gRPC caps at %d requests in flight", v.MaxAttemptsAsWritten, v.AttemptsAtMost)
		} else {
			row("hedging maxAttempts", "%d requests at most in flight, the first included", v.AttemptsAtMost)
		}
		row("hedgingDelay", "%v between them", dur(v.HedgingDelaySeconds))
		row("nonFatalStatusCodes", "%s", strings.Join(v.StatusCodes, ", "))
	default:
		row("retries", "none: no retryPolicy or hedgingPolicy")
	}
	if v.ServerPushback != "" {
		row("server pushback", "%s", v.ServerPushback)
	}
	if v.RetryThrottling != nil {
		row("retryThrottling", "%s", v.RetryThrottling.Says)
	} else if v.Policy != "none" {
		row("retryThrottling", "none: retries go on however many calls fail")
	}
	if v.WorstCaseSeconds != nil {
		row("worst case", "%s, bound by the %s", secs(v.WorstCaseSeconds), v.WorstCaseBoundBy)
	} else {
		row("worst case", "unbounded: %s", strings.TrimPrefix(v.WorstCaseBoundBy, "nothing: "))
	}
	for _, d := range v.BackstopDiffers {
		row("Backstop's stack", "%s", d)
	}
}

// rowWriter prints "key: value" rows, aligned; a row with no key continues the one
// above.
func rowWriter(w io.Writer) func(k, format string, args ...any) {
	return func(k, format string, args ...any) {
		if k != "" {
			k += ":"
		}
		fmt.Fprintf(w, "  %-25s %s\n", k, fmt.Sprintf(format, args...))
	}
}

func dur(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond)
}
