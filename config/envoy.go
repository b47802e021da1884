package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policyhttp"
)

// FromEnvoy converts Envoy routes, as policyenvoy.Parse read them, into this
// package's model: the file of [ImportEnvoy], so that a retry policy can move from
// the mesh to a Backstop file.
func FromEnvoy(routes []*policyenvoy.Route) File {
	return ImportEnvoy("", routes).File
}

// ImportEnvoy converts Envoy routes, as policyenvoy.Parse read them from the file
// name, into this package's model: one stack per route, named after it ("prefix
// /api" is prefix_api), and an HTTP route per route and domain. The conversion
// follows what policyenvoy builds:
//   - timeout becomes the stack's deadline (Envoy's default 15s when the route gives
//     none; "off" for 0s); a route that does not retry has no retry, and its
//     per_try_timeout, if shorter, is its deadline;
//   - retry_policy becomes a retry with strategy envoy: attempts num_retries + 1,
//     base base_interval, cap max_interval, http_statuses the statuses retry_on
//     retries (5xx: 500–599; gateway-error: 502, 503, 504; retriable-4xx: 409;
//     retriable-status-codes: retriable_status_codes), max_hint off (Envoy waits its
//     back-off whatever a server asks) or, under rate_limited_retry_back_off, its
//     max_interval; per_try_timeout becomes the attempt timeout;
//   - the match becomes an http.ServeMux pattern: a prefix ending in "/" is the
//     pattern itself, any other prefix the pattern and the pattern with "/" added
//     (both: the path, and what is under it), a path an exact pattern, a domain
//     other than "*" the pattern's host.
//
// What the model cannot say as Envoy does is a [Note], never dropped in silence:
// retry_on conditions Envoy does not know ([NoteUnknown]); the fields and conditions
// policyenvoy lists as unsupported, regex and header matchers, wildcard domains
// ([NoteNotCarried]); retriable_status_codes without retriable-status-codes
// ([NoteIgnored]); and where the stack does otherwise ([NoteDiffers]): a prefix that
// Envoy also matches inside a path segment, Envoy's first-match routing shadowing a
// later route, envoy-ratelimited, reset headers other than Retry-After, connection
// failures and per-try timeouts that retry_on does not name. One difference holds for
// every route, and is said here rather than in each note: a response Envoy's rate
// limiter refused (x-envoy-ratelimited) is retried by Envoy only under
// envoy-ratelimited, while the stack judges it by its status as any other.
func ImportEnvoy(name string, routes []*policyenvoy.Route) *Import {
	im := &Import{Name: name, Origins: make(map[string]Origin)}
	taken := make(map[string]bool)
	var http HTTPRoutes
	patterns := make(map[string]string) // pattern → the stack that has it
	for i, r := range routes {
		stack := stackNameOf(r.Name, taken)
		o := Origin{Format: FormatEnvoy, File: name, Route: r, fields: map[string]string{"": ""}}
		s := envoyStack(r, o.fields)
		im.File.Stacks = append(im.File.Stacks, NamedStack{Name: stack, Stack: s})
		im.Origins[stack] = o
		im.place(stack, o)
		im.envoyNotes(stack, o)
		for _, p := range im.envoyPatterns(stack, o, routes[:i]) {
			if prev, ok := patterns[p]; ok {
				im.note(stack, o, NoteDiffers, "match", p, "%s is routed to the route before it, %s, as Envoy routes it: the first match wins", p, prev)
				continue
			}
			patterns[p] = stack
			k := len(http.Routes)
			_, pos := o.Field("")
			im.pos[fmt.Sprintf("http.routes[%d]", k)] = pos
			im.pos[fmt.Sprintf("http.routes[%d].match", k)] = pos
			http.Routes = append(http.Routes, HTTPRoute{Match: ptr(p), Stack: ptr(stack)})
		}
	}
	if len(http.Routes) > 0 {
		im.File.HTTP = &http
	}
	return im
}

// envoyStack converts one route, recording in fields where each field came from.
func envoyStack(r *policyenvoy.Route, fields map[string]string) Stack {
	var s Stack
	switch {
	case r.Retrying:
		s.Deadline = &Duration{D: r.Timeout, Off: r.Timeout == 0}
		fields["deadline"] = "timeout"
		if r.PerTryTimeout > 0 {
			s.AttemptTimeout = &Duration{D: r.PerTryTimeout}
			fields["attempt_timeout"] = "retry_policy.per_try_timeout"
		}
		s.Retry = &Retry{Attempts: ptr(r.NumRetries + 1), Strategy: ptr("envoy"), Base: &Duration{D: r.BaseInterval},
			Cap: &Duration{D: r.MaxInterval}, MaxHint: &Duration{Off: true}, HTTPStatuses: statusesOf(r)}
		if r.ResetMaxInterval > 0 {
			s.Retry.MaxHint = &Duration{D: r.ResetMaxInterval}
		}
		for rel, f := range map[string]string{"retry": "retry_policy", "retry.attempts": "retry_policy.num_retries",
			"retry.strategy": "retry_policy.retry_back_off", "retry.base": "retry_policy.retry_back_off.base_interval",
			"retry.cap": "retry_policy.retry_back_off.max_interval", "retry.max_hint": "retry_policy.rate_limited_retry_back_off.max_interval",
			"retry.http_statuses": "retry_policy.retry_on", "budget": "retry_policy"} {
			fields[rel] = f
		}
		for j, code := range s.Retry.HTTPStatuses {
			if k := slices.Index(r.RetriableStatusCodes, code); k >= 0 && !fromCondition(r, code) {
				fields[fmt.Sprintf("retry.http_statuses[%d]", j)] = fmt.Sprintf("retry_policy.retriable_status_codes[%d]", k)
			}
		}
	case r.PerTryTimeout > 0:
		// One try: its per-try timeout is the request's deadline.
		s.Deadline = &Duration{D: r.PerTryTimeout}
		fields["deadline"] = "retry_policy.per_try_timeout"
	default:
		s.Deadline = &Duration{D: r.Timeout, Off: r.Timeout == 0}
		fields["deadline"] = "timeout"
	}
	return s
}

// statusConditions are the retry_on conditions that retry responses by their status.
var statusConditions = map[string][]int{"gateway-error": {502, 503, 504}, "retriable-4xx": {409}}

// fromCondition reports whether a retry_on condition other than retriable-status-codes
// retries code.
func fromCondition(r *policyenvoy.Route, code int) bool {
	for _, c := range r.RetryOn {
		if c == "5xx" && code >= 500 && code <= 599 || slices.Contains(statusConditions[c], code) {
			return true
		}
	}
	return false
}

// statusesOf returns the statuses the route's retry_on retries, in order, each once.
func statusesOf(r *policyenvoy.Route) []int {
	set := make(map[int]bool)
	for _, c := range r.RetryOn {
		switch c {
		case "5xx":
			for code := 500; code <= 599; code++ {
				set[code] = true
			}
		case "retriable-status-codes":
			for _, code := range r.RetriableStatusCodes {
				if code >= 400 && code <= 599 {
					set[code] = true
				}
			}
		default:
			for _, code := range statusConditions[c] {
				set[code] = true
			}
		}
	}
	out := []int{}
	for code := 400; code <= 599; code++ {
		if set[code] {
			out = append(out, code)
		}
	}
	return out
}

// networkConditions are the retry_on conditions under which Envoy retries a refused
// or reset connection, as a stack's retry always does.
var networkConditions = []string{"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "refused-stream"}

// envoyNotes notes what the route says that the stack says otherwise or cannot say.
func (im *Import) envoyNotes(stack string, o Origin) {
	r := o.Route
	for _, c := range r.UnknownRetryOn {
		im.note(stack, o, NoteUnknown, "retry_policy.retry_on", c, "retry_on %q is not a condition Envoy knows: it never retries on it, nor does the stack", c)
		im.Notes[len(im.Notes)-1].Meant = nearest(c, policyenvoy.RetryOnConditions())
	}
	for _, u := range r.Unsupported {
		field, _, _ := strings.Cut(u, " ")
		im.note(stack, o, NoteNotCarried, field, u, "Envoy honours %s; the stack has no field for it", u)
	}
	if len(r.RetriableStatusCodes) > 0 && !slices.Contains(r.RetryOn, "retriable-status-codes") {
		im.note(stack, o, NoteIgnored, "retry_policy.retriable_status_codes", fmt.Sprint(r.RetriableStatusCodes),
			"retriable_status_codes %v are never retried: retry_on lacks retriable-status-codes", r.RetriableStatusCodes)
	}
	if !r.Retrying {
		return
	}
	for _, code := range r.RetriableStatusCodes {
		if (code < 400 || code > 599) && slices.Contains(r.RetryOn, "retriable-status-codes") {
			im.note(stack, o, NoteNotCarried, "retry_policy.retriable_status_codes", strconv.Itoa(code),
				"retriable_status_codes %d: the stack retries statuses from 400 to 599 only", code)
		}
	}
	if slices.Contains(r.RetryOn, "envoy-ratelimited") {
		im.note(stack, o, NoteDiffers, "retry_policy.retry_on", "envoy-ratelimited",
			"envoy-ratelimited retries a response Envoy's rate limiter refused (x-envoy-ratelimited); the stack judges every response by its status")
	}
	if !slices.ContainsFunc(r.RetryOn, func(c string) bool { return slices.Contains(networkConditions, c) }) {
		im.note(stack, o, NoteDiffers, "retry_policy.retry_on", "",
			"retry_on names no condition that retries a refused or reset connection; the stack retries them")
	}
	if r.IgnoredPerTryTimeout > 0 {
		im.note(stack, o, NoteNotCarried, "retry_policy.per_try_timeout", "",
			"per_try_timeout %v is not below the route's timeout %v: Envoy ignores it, and so does the stack", r.IgnoredPerTryTimeout, r.Timeout)
	}
	if r.PerTryTimeout > 0 && !slices.ContainsFunc(r.RetryOn, func(c string) bool { return c == "5xx" || c == "gateway-error" || c == "reset" }) {
		im.note(stack, o, NoteDiffers, "retry_policy.per_try_timeout", "",
			"a try that runs out its per_try_timeout is retried by Envoy only under 5xx, gateway-error or reset, which retry_on does not name; the stack retries it")
	}
	for _, h := range r.ResetHeaders {
		if !strings.HasPrefix(strings.ToLower(h), "retry-after ") {
			im.note(stack, o, NoteDiffers, "retry_policy.rate_limited_retry_back_off.reset_headers", h,
				"reset header %s: the stack waits for Retry-After only", h)
		}
	}
}

// envoyPatterns returns the ServeMux patterns of a route, noting what they cannot say;
// earlier are the routes before it, which Envoy tries first.
func (im *Import) envoyPatterns(stack string, o Origin, earlier []*policyenvoy.Route) []string {
	r, m := o.Route, o.Route.Match
	for _, other := range m.Others {
		im.note(stack, o, NoteNotCarried, "match."+other, "", "the route matches by %s too, which a pattern cannot say: the table sends it every request of its paths", other)
	}
	var paths []string
	switch {
	case m.Regex != "":
		im.note(stack, o, NoteNotCarried, "match.safe_regex", m.Regex, "the route matches paths by the regex %q, which a pattern cannot say: the table does not route to it", m.Regex)
		return nil
	case m.Path != "" && !strings.HasPrefix(m.Path, "/"):
		return im.noPath(stack, o, "match.path", m.Path)
	case m.Path != "":
		paths = []string{m.Path}
		if strings.HasSuffix(m.Path, "/") {
			paths = []string{m.Path + "{$}"}
		}
	case m.PathSeparatedPrefix != "" && !strings.HasPrefix(m.PathSeparatedPrefix, "/"):
		return im.noPath(stack, o, "match.path_separated_prefix", m.PathSeparatedPrefix)
	case m.PathSeparatedPrefix != "":
		paths = []string{m.PathSeparatedPrefix, m.PathSeparatedPrefix + "/"}
	case m.Prefix != "" && !strings.HasPrefix(m.Prefix, "/"):
		return im.noPath(stack, o, "match.prefix", m.Prefix)
	case m.Prefix == "" || strings.HasSuffix(m.Prefix, "/"):
		paths = []string{m.Prefix}
		if m.Prefix == "" {
			paths = []string{"/"}
		}
	default:
		paths = []string{m.Prefix, m.Prefix + "/"}
		im.note(stack, o, NoteDiffers, "match.prefix", m.Prefix,
			"prefix %s matches any path that starts so (%sx too); the patterns %s and %s/ match it and the paths under it", m.Prefix, m.Prefix, m.Prefix, m.Prefix)
	}
	for _, e := range earlier {
		if len(e.Match.Others) == 0 && e.Match.Regex == "" && e.Match.Path == "" && e.Match.PathSeparatedPrefix == "" &&
			strings.HasPrefix(strings.TrimSuffix(paths[0], "{$}"), e.Match.Prefix) && e.Match.Prefix != m.Prefix && sameHosts(e, r) {
			im.note(stack, o, NoteDiffers, "match", "", "Envoy sends this route's requests to %q, an earlier route whose prefix %s matches them first; the table sends them here, the most specific pattern winning",
				e.Name, e.Match.Prefix)
			break
		}
	}
	hosts := []string{""}
	if len(r.Domains) > 0 && !slices.Contains(r.Domains, "*") {
		hosts = nil
		for _, d := range r.Domains {
			if !plainHost.MatchString(d) {
				im.note(stack, o, NoteNotCarried, "domains", d, "domain %q (a wildcard or a port) is no pattern's host: the table routes the route's paths on every host", d)
				hosts = []string{""}
				break
			}
			hosts = append(hosts, d)
		}
	}
	var out []string
	for _, h := range hosts {
		for _, p := range paths {
			pattern := h + p
			if _, err := policyhttp.NewRoutes(policyhttp.Route{Pattern: pattern}); err != nil {
				im.note(stack, o, NoteNotCarried, "match", pattern, "%s is no http.ServeMux pattern (%s): the table does not route to the route", pattern, tableMsg(err, policyhttp.ErrInvalidRoute))
				continue
			}
			out = append(out, pattern)
		}
	}
	return out
}

// noPath notes a route whose match (field, value) does not begin with "/": it matches
// no request's path, every one of which does, and as a pattern it would say something
// else (ServeMux reads "  /" as "/", every path), so the table does not route to it.
func (im *Import) noPath(stack string, o Origin, field, value string) []string {
	im.note(stack, o, NoteNotCarried, field, value, "%q does not begin with /: Envoy matches it against no request's path, and the table does not route to the route", value)
	return nil
}

// plainHost is a domain a ServeMux pattern can name: no wildcard, no port.
var plainHost = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

func sameHosts(a, b *policyenvoy.Route) bool {
	return len(a.Domains) == 0 || slices.Contains(a.Domains, "*") || slices.Equal(a.Domains, b.Domains)
}

// stackNameOf makes a route's name a stack name: letters, digits, _ and -, starting
// with a letter, and not taken.
func stackNameOf(route string, taken map[string]bool) string {
	var b strings.Builder
	under := false
	for _, c := range route {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		switch {
		case ok:
			b.WriteRune(c)
			under = false
		case !under && b.Len() > 0:
			b.WriteByte('_')
			under = true
		}
	}
	name := strings.TrimRight(b.String(), "_")
	if name == "" || !(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z') {
		name = "route_" + name
	}
	name = strings.TrimRight(name, "_")
	base := name
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("%s_%d", base, n)
	}
	taken[name] = true
	return name
}
