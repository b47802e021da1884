package policyk8s

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Explanation says what a route rule does, in its source's words: Lines for people,
// the other fields for tools (encoding/json writes them).
type Explanation struct {
	// Route names the rule: "istio VirtualService bookinfo/reviews http[0]".
	Route string `json:"route"`
	// Position is where the rule is written, "file:line:column".
	Position string `json:"position"`
	// Tries and AttemptsAtMost are the Route's; WorstCase is Route.WorstCase as a
	// duration string, "unbounded" for 0.
	Tries          int      `json:"tries"`
	AttemptsAtMost int      `json:"attempts_at_most"`
	RetryOn        []string `json:"retry_on,omitempty"`
	PerTryTimeout  string   `json:"per_try_timeout"`
	Timeout        string   `json:"timeout"`
	Backoff        string   `json:"backoff"`
	WorstCase      string   `json:"worst_case"`
	Budget         *Budget  `json:"budget,omitempty"`
	Defaults       []string `json:"defaults,omitempty"`
	Unsupported    []string `json:"unsupported,omitempty"`
	// Lines say it in sentences, one a line.
	Lines []string `json:"lines"`
}

// String returns the lines, one a line.
func (e Explanation) String() string { return strings.Join(e.Lines, "\n") }

func durString(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}

// Explain says what the rule does, in its source's words.
func (r *Route) Explain() Explanation {
	rule := fmt.Sprintf("rules[%d]", r.Rule)
	if r.Kind == "VirtualService" {
		rule = fmt.Sprintf("http[%d]", r.Rule)
	}
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + r.Name
	}
	route := fmt.Sprintf("%s %s %s %s", r.Source, r.Kind, name, rule)
	if r.Kind == "Service" { // a Service's own annotations: all traffic to it
		route = fmt.Sprintf("%s %s %s", r.Source, r.Kind, name)
	}
	e := Explanation{Route: route,
		Position: fmt.Sprintf("%s:%d:%d", r.File, r.Line, r.Column), Tries: r.Tries, AttemptsAtMost: r.AttemptsAtMost(),
		RetryOn: r.RetryOn, PerTryTimeout: durString(r.PerTryTimeout), Timeout: durString(r.Timeout), Backoff: durString(r.Backoff),
		WorstCase: "unbounded", Budget: r.Budget, Defaults: r.Defaults, Unsupported: r.Unsupported}
	if wc := r.WorstCase(); wc > 0 {
		e.WorstCase = wc.String()
	}
	add := func(format string, args ...any) { e.Lines = append(e.Lines, fmt.Sprintf(format, args...)) }
	add("%s (%s)", e.Route, e.Position)
	dflt := func(f string) bool { return slices.Contains(r.Defaults, f) }
	switch r.Source {
	case SourceIstio:
		switch {
		case dflt("retries"):
			add("retries: not set, so Istio's default retry policy applies: attempts %d, up to %d tries, retryOn %s", IstioDefaultAttempts, r.Tries, strings.Join(r.RetryOn, ","))
		case r.Tries <= 1:
			add("retries.attempts: 0, retries off: 1 try")
		default:
			add("retries.attempts: %s, up to %d tries, the first included", retries(r.Tries-1), r.Tries)
			if dflt("retries.retryOn") {
				add("retries.retryOn: not set, so Istio's default %s", strings.Join(r.RetryOn, ","))
			} else {
				add("retries.retryOn: %s", strings.Join(r.RetryOn, ","))
			}
		}
		if r.Tries > 1 {
			add("retries.perTryTimeout: %s; retries.backoff: %s base, each wait at most 10 × base (Envoy's back-off)", durString(r.PerTryTimeout), r.Backoff)
		}
		if dflt("timeout") {
			add("timeout: not set, so disabled (Istio's default)")
		} else {
			add("timeout: %s", durString(r.Timeout))
		}
	case SourceLinkerd:
		if r.InheritedFrom != "" {
			add("annotations from %s, the route having none of its own", r.InheritedFrom)
		}
		if r.Tries > 1 {
			limit := fmt.Sprintf("retry.linkerd.io/limit: %s", retries(r.Tries-1))
			if dflt("retry.linkerd.io/limit") {
				limit = "retry.linkerd.io/limit: not set, so Linkerd's default 1 retry"
			}
			on := strings.Join(r.RetryOn, ",")
			if on == "" {
				on = "the proxy's default conditions (none written)"
			}
			add("%s, up to %d tries; on %s", limit, r.Tries, on)
			add("retry.linkerd.io/timeout (each try): %s; back-off %v to %v, jittered (Linkerd's policy controller)", durString(r.PerTryTimeout), LinkerdBackoff, LinkerdMaxBackoff)
		} else {
			add("no retry.linkerd.io annotation: 1 try")
		}
		add("timeout (timeout.linkerd.io/request, else timeouts.request): %s", durString(r.Timeout))
	default:
		switch {
		case dflt("retry"):
			add("retry: not set: 1 try as written; an implementation may retry by its own defaults")
		case r.Tries == 0:
			add("retry.attempts: not set: the number of retries is implementation-specific")
		default:
			add("retry.attempts: %s, up to %d tries, the first included", retries(r.Tries-1), r.Tries)
		}
		if len(r.RetryOn) > 0 {
			add("retry.codes: %s", strings.Join(r.RetryOn, ","))
		}
		if !dflt("retry") {
			if dflt("retry.backoff") {
				add("retry.backoff: not set: implementation-specific")
			} else {
				add("retry.backoff: at least %s between tries; an implementation may wait longer", r.Backoff)
			}
		}
		add("timeouts.request: %s; timeouts.backendRequest (each try): %s", durString(r.Timeout), durString(r.PerTryTimeout))
	}
	if r.Budget != nil {
		add("retry budget (%s, %s:%d:%d): %v%% of requests", r.Budget.Source, r.Budget.File, r.Budget.Line, r.Budget.Column, r.Budget.Percent)
	}
	for _, u := range r.Unsupported {
		add("not carried by Backstop: %s", u)
	}
	add("worst case: %s", e.WorstCase)
	return e
}

// retries is "1 retry", "3 retries".
func retries(n int) string {
	if n == 1 {
		return "1 retry"
	}
	return fmt.Sprintf("%d retries", n)
}
