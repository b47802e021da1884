package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
)

// Levels of a finding.
const (
	levelError   = "error"
	levelWarning = "warning"
	levelInfo    = "info"
)

// Defaults of lint's thresholds.
const (
	// DefaultMaxWorstCase is the worst case above which a route or method is reported
	// (-max-worst-case): past half a minute a caller, or a person, has given up, and
	// the attempts still running only load the service.
	DefaultMaxWorstCase = 30 * time.Second
	// maxNumRetries is the num_retries above which a route is reported: more retries
	// than gRPC's own cap of 5 attempts only multiply the load of an outage.
	maxNumRetries = 5
)

// check is one kind of finding: what it catches, for the README's table.
type check struct {
	ID, Level, Catches string
}

// checks are every finding lint makes, in the README's order.
var checks = []check{
	{"refused", levelError, "a config Envoy, gRPC or Backstop's loader refuses: an unknown field, a value of the wrong type, a gRPC maxAttempts below 2, a bare-number duration, a YAML or JSON syntax error"},
	{"negative-duration", levelError, "a negative duration anywhere in the config; Envoy and gRPC refuse them"},
	{"unknown-retry-on", levelError, "a retry_on condition Envoy does not know (a typo such as 5xxx): Envoy never retries on it"},
	{"bad-status-code", levelError, "a retryableStatusCodes or nonFatalStatusCodes entry that is not a gRPC status code, or is OK"},
	{"order", levelError, "a Backstop stack in an order policy.Wrap refuses, under the rule's number (O1–O7), at the stage that breaks it"},
	{"two-owners", levelError, "an Envoy route that retries, in front of a gRPC service whose config retries too: the attempts multiply"},
	{"maybe-two-owners", levelWarning, "a retrying Envoy route with no match (a pasted route: block) given with a retrying gRPC config: they may share a call path"},
	{"no-timeout", levelWarning, "retries with nothing bounding the whole request: Envoy timeout: 0s, a gRPC method with no timeout"},
	{"worst-case", levelWarning, fmt.Sprintf("a worst case (every try timing out, every wait its longest) above -max-worst-case, by default %v", DefaultMaxWorstCase)},
	{"num-retries", levelWarning, fmt.Sprintf("an Envoy num_retries above %d", maxNumRetries)},
	{"max-attempts", levelWarning, fmt.Sprintf("a gRPC maxAttempts above %d, which gRPC silently caps at %d", policygrpc.MaxServiceConfigAttempts, policygrpc.MaxServiceConfigAttempts)},
	{"status-codes-ignored", levelWarning, "retriable_status_codes set while retry_on lacks retriable-status-codes: those codes are never retried"},
	{"attempts-fit", levelWarning, "tries that cannot all run to their per_try_timeout, with their back-off, before the route's timeout"},
	{"retry-500", levelWarning, "retrying 500 (retry_on 5xx) or INTERNAL, UNKNOWN: these usually report a bug that a retry hits again"},
	{"no-throttling", levelWarning, "a gRPC config that retries with no retryThrottling: nothing stops the retries in an outage"},
	{"no-budget", levelWarning, "a Backstop stack that retries with no budget: nothing stops the retries in an outage"},
	{"cluster-budget", levelInfo, "an Envoy route that retries: its bound in an outage is the cluster's circuit_breakers retry_budget, which a route config cannot show"},
	{"not-honoured", levelInfo, "a field or condition Envoy honours and Backstop's pipeline for the route does not (retriable_headers, hedge_policy, gRPC conditions on an HTTP route, …)"},
}

func levelOf(id string) string {
	for _, c := range checks {
		if c.ID == id {
			return c.Level
		}
	}
	panic("lint: no check " + id)
}

// finding is one thing lint says, placed in its file.
type finding struct {
	ID     string `json:"id"`
	Level  string `json:"level"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	// Where is the route or the gRPC method names the finding is about; "" for the file.
	Where string `json:"where"`
	// Field is the config field at fault, as the config spells it.
	Field   string `json:"field"`
	Message string `json:"message"` // why it is a problem, in one line
	Fix     string `json:"fix"`     // what to do, in one line
}

func (f finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: %s [%s]: ", f.File, f.Line, f.Column, f.Level, f.ID)
	if f.Where != "" {
		fmt.Fprintf(&b, "%s: ", f.Where)
	}
	b.WriteString(f.Message)
	if f.Fix != "" {
		b.WriteString("\n    fix: " + f.Fix)
	}
	return b.String()
}

// linter collects findings.
type linter struct {
	in           *input
	maxWorstCase time.Duration
	fs           []finding
}

func (l *linter) add(id, file string, line, col int, where, field, fix, format string, args ...any) {
	if line <= 0 { // about the file as a whole
		line, col = 1, 1
	}
	l.fs = append(l.fs, finding{ID: id, Level: levelOf(id), File: file, Line: line, Column: col, Where: where, Field: field,
		Message: fmt.Sprintf(format, args...), Fix: fix})
}

// refused turns a config the parser refused into a finding.
func (l *linter) refused(file string, err error) {
	var ee *policyenvoy.ConfigError
	var ge *policygrpc.ServiceConfigError
	switch {
	case errors.As(err, &ee):
		id, msg, fix := "refused", ee.Msg, "correct the field as Envoy's API reference for it says"
		if errors.Is(err, policyenvoy.ErrNegativeDuration) {
			id, fix = "negative-duration", "give a duration of 0s or more: 0s turns a timeout off, which lint also reports under retries"
		}
		if ee.Path != "" {
			msg = ee.Path + ": " + msg
		}
		l.add(id, file, ee.Line, ee.Column, "", ee.Path, fix, "%s", msg)
	case errors.As(err, &ge):
		id, fix := "refused", "correct the field as gRFC A6 says"
		switch {
		case errors.Is(err, policygrpc.ErrNegativeDuration):
			id, fix = "negative-duration", `give a positive duration such as "1.5s"`
		case errors.Is(err, policygrpc.ErrStatusCode):
			id, fix = "bad-status-code", `name a gRPC status code other than OK, as "UNAVAILABLE" or its number (14)`
		}
		msg := ge.Msg
		if ge.Path != "" {
			msg = ge.Path + " " + msg
		}
		l.add(id, file, ge.Line, ge.Column, "", ge.Path, fix, "%s", msg)
	default:
		l.add("refused", file, 0, 0, "", "", "", "%v", err)
	}
}

func lint(in *input, maxWorstCase time.Duration) []finding {
	l := &linter{in: in, maxWorstCase: maxWorstCase}
	if in.envoyErr != nil {
		l.refused(in.envoyFile, in.envoyErr)
	}
	if in.grpcErr != nil {
		l.refused(in.grpcFile, in.grpcErr)
	}
	for _, r := range in.routes {
		l.route(r)
	}
	if in.grpc != nil {
		for _, en := range in.grpc.Entries() {
			l.method(en)
		}
	}
	if in.configErr != nil {
		l.configRefused(in.configFile, in.configErr)
	}
	if in.config != nil {
		for _, se := range in.config.Explain().Stacks {
			l.stack(in.config, se)
		}
	}
	l.owners()
	slices.SortStableFunc(l.fs, func(a, b finding) int {
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Column - b.Column
	})
	return l.fs
}

// columnOf returns the column of word on the given line of data at or after col, or
// col if it is not there: to place a finding on one retry_on condition.
func columnOf(data []byte, line, col int, word string) int {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) || col < 1 {
		return col
	}
	s := string(lines[line-1])
	start := 0
	for c := 1; c < col && start < len(s); c++ {
		_, n := utf8.DecodeRuneInString(s[start:])
		start += n
	}
	for i := start; i < len(s); {
		j := strings.Index(s[i:], word)
		if j < 0 {
			break
		}
		at := i + j
		end := at + len(word)
		isWord := func(b byte) bool { return b == '-' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
		if (at == 0 || !isWord(s[at-1])) && (end >= len(s) || !isWord(s[end])) {
			return utf8.RuneCountInString(s[:at]) + 1
		}
		i = at + 1
	}
	return col
}

func (l *linter) route(r *policyenvoy.Route) {
	file := l.in.envoyFile
	where := fmt.Sprintf("route %q", r.Name)
	at := func(field string) (int, int) { return r.Position(field) }
	add := func(id, field, fix, format string, args ...any) {
		line, col := at(field)
		l.add(id, file, line, col, where, field, fix, format, args...)
	}
	onCondition := func(id, cond, fix, format string, args ...any) {
		line, col := at("retry_policy.retry_on")
		col = columnOf(l.in.envoyData, line, col, cond)
		l.add(id, file, line, col, where, "retry_policy.retry_on", fix, format, args...)
	}
	for _, c := range r.UnknownRetryOn {
		fix := "spell it as one of " + strings.Join(policyenvoy.RetryOnConditions(), ", ")
		if near := nearest(c, policyenvoy.RetryOnConditions()); near != "" {
			fix = fmt.Sprintf("did you mean %s? Envoy's conditions are %s", near, strings.Join(policyenvoy.RetryOnConditions(), ", "))
		}
		onCondition("unknown-retry-on", c, fix, "retry_on %q is not a condition Envoy knows: it never retries on it", c)
	}
	for _, u := range r.Unsupported {
		field, cond, _ := strings.Cut(u, " ")
		if field == "retry_policy.retry_on" {
			cond, _, _ = strings.Cut(cond, " ")
			onCondition("not-honoured", cond, "keep these retries in Envoy, or express them in the application", "Backstop does not honour %s", u)
			continue
		}
		add("not-honoured", field, "keep these retries in Envoy, or express them in the application", "Backstop does not honour %s", u)
	}
	if len(r.RetriableStatusCodes) > 0 && !slices.Contains(r.RetryOn, "retriable-status-codes") {
		add("status-codes-ignored", "retry_policy.retriable_status_codes", `add retriable-status-codes to retry_on, or drop retriable_status_codes`,
			"retriable_status_codes %v are never retried: retry_on lacks retriable-status-codes", r.RetriableStatusCodes)
	}
	if !r.Retrying {
		return
	}
	e := r.Explain()
	if r.NumRetries > maxNumRetries {
		add("num-retries", "retry_policy.num_retries", fmt.Sprintf("lower num_retries to %d or fewer; bound the rest with the cluster's retry_budget", maxNumRetries),
			"num_retries %d: up to %d tries per request, each a load on a service that is already failing", r.NumRetries, r.NumRetries+1)
	}
	if r.Timeout == 0 {
		worst := "unbounded: no per_try_timeout either, so one hung try holds the request for ever"
		if e.WorstCaseFrom != "" {
			worst = fmt.Sprintf("up to %v: %d tries of per_try_timeout %v and their longest waits", e.WorstCase, e.MaxAttempts, r.PerTryTimeout)
		}
		add("no-timeout", "timeout", "give the route a timeout, e.g. timeout: 15s (Envoy's default), that the caller can wait",
			"timeout: 0s turns the route's timeout off under %d tries: %s", e.MaxAttempts, worst)
	}
	if e.WorstCaseFrom == "attempts" {
		l.worstCase(e, func(fix, format string, args ...any) {
			add("worst-case", "retry_policy.per_try_timeout", fix, format, args...)
		},
			fmt.Sprintf("lower per_try_timeout or num_retries, or give a timeout of %v or less", l.maxWorstCase))
	} else {
		l.worstCase(e, func(fix, format string, args ...any) { add("worst-case", "timeout", fix, format, args...) },
			fmt.Sprintf("lower timeout to %v or less", l.maxWorstCase))
	}
	l.fit(r, e, add)
	for _, c := range r.RetryOn {
		if c == "5xx" {
			onCondition("retry-500", c, "retry gateway-error (502, 503, 504) instead, or retriable-status-codes with the codes meant",
				"retry_on 5xx retries 500, which usually reports a bug a retry hits again")
		}
	}
	add("cluster-budget", "retry_policy", "give the cluster circuit_breakers with a retry_budget (e.g. budget_percent 20) so retries stop in an outage",
		"the route's retries are bounded in an outage only by its cluster's retry_budget, which the route config does not show")
}

// worstCase reports a worst case above the threshold.
func (l *linter) worstCase(e policy.Explanation, add func(fix, format string, args ...any), fix string) {
	if e.WorstCaseFrom == "" || e.WorstCase <= l.maxWorstCase {
		return
	}
	add(fix,
		"the worst case is %v (every try timing out, every wait its longest), above %v: callers give up long before, and the tries still load the service",
		e.WorstCase, l.maxWorstCase)
}

// fit reports tries that cannot run to their per-try timeout before the route's
// timeout ends, when every try before them runs to its timeout and every wait is of
// its mean length: the case the per-try timeout is there for.
func (l *linter) fit(r *policyenvoy.Route, e policy.Explanation, add func(id, field, fix, format string, args ...any)) {
	timeout, perTry := r.Timeout, r.PerTryTimeout
	if timeout <= 0 || perTry <= 0 || e.MaxAttempts < 2 {
		return
	}
	var sleeps []policy.Sleep
	for _, st := range e.Stack {
		if st.Kind == policy.KindRetry {
			sleeps = st.Sleeps
		}
	}
	start, fit, need, waits := time.Duration(0), 0, time.Duration(0), time.Duration(0)
	for k := 1; k <= e.MaxAttempts; k++ {
		if k > 1 && k-2 < len(sleeps) {
			start += sleeps[k-2].Mean
			waits += sleeps[k-2].Mean
		}
		need = start + perTry
		if need <= timeout {
			fit = k
		}
		start += perTry
	}
	if fit < e.MaxAttempts {
		fix := fmt.Sprintf("raise timeout to %v, or lower num_retries to %d", need, max(fit-1, 0))
		if per := ((timeout - waits) / time.Duration(e.MaxAttempts)).Truncate(time.Millisecond); per > 0 {
			fix += fmt.Sprintf(", or per_try_timeout to %v", per)
		}
		add("attempts-fit", "retry_policy.per_try_timeout", fix,
			"%d tries of per_try_timeout %v and their back-off do not fit in timeout %v: when tries time out, only %d of %d run",
			e.MaxAttempts, perTry, timeout, fit, e.MaxAttempts)
	}
}

func (l *linter) method(en policygrpc.Entry) {
	if !en.Retrying && !en.Hedging {
		return
	}
	file, sc := l.in.grpcFile, l.in.grpc
	where := strings.Join(en.Names, ", ")
	pol := en.Field + ".retryPolicy"
	codesField := "retryableStatusCodes"
	if en.Hedging {
		pol, codesField = en.Field+".hedgingPolicy", "nonFatalStatusCodes"
	}
	add := func(id, field, fix, format string, args ...any) {
		line, col := sc.Position(field)
		l.add(id, file, line, col, where, field, fix, format, args...)
	}
	e := en.Pipeline.Explain()
	if en.MaxAttempts > policygrpc.MaxServiceConfigAttempts {
		add("max-attempts", pol+".maxAttempts", fmt.Sprintf("write maxAttempts %d, what gRPC will do", policygrpc.MaxServiceConfigAttempts),
			"maxAttempts is %d; gRPC silently caps it at %d", en.MaxAttempts, policygrpc.MaxServiceConfigAttempts)
	}
	if en.Timeout == 0 {
		add("no-timeout", pol, `give the methodConfig a "timeout", e.g. "5s", that a caller can wait`,
			"%d attempts with no timeout: unbounded, each attempt may wait for ever unless the caller sets a deadline", e.MaxAttempts)
	}
	l.worstCase(e, func(fix, format string, args ...any) { add("worst-case", en.Field+".timeout", fix, format, args...) },
		fmt.Sprintf(`lower "timeout" to "%gs" or less`, l.maxWorstCase.Seconds()))
	if _, ok := sc.Throttling(); !ok {
		add("no-throttling", pol, `add "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1} at the top of the config`,
			"retries with no retryThrottling: in an outage every call makes all %d attempts", e.MaxAttempts)
	}
	for i, c := range en.RetryableCodes {
		if c == codes.Internal || c == codes.Unknown {
			add("retry-500", fmt.Sprintf("%s.%s[%d]", pol, codesField, i), "retry UNAVAILABLE, the code of a server that may answer next time",
				"%s %s usually reports a bug that a retry hits again", codesField, policygrpc.StatusCodeName(c))
		}
	}
}

// owners reports an Envoy route that retries in front of a gRPC method that retries.
func (l *linter) owners() {
	if l.in.grpc == nil {
		return
	}
	for _, r := range l.in.routes {
		if !r.Retrying {
			continue
		}
		for _, en := range l.in.grpc.Entries() {
			if !en.Retrying && !en.Hedging {
				continue
			}
			for _, name := range en.Names {
				covers, sure := routeCovers(r.Name, name)
				if !covers {
					continue
				}
				gl, gc := l.in.grpc.Position(en.Field)
				id, how := "two-owners", "on one call path"
				if !sure {
					id, how = "maybe-two-owners", "if they are on one call path (the route has no match to tell)"
				}
				line, col := r.Position("retry_policy")
				ea, ga := r.Explain().MaxAttempts, en.Pipeline.Explain().MaxAttempts
				l.add(id, l.in.envoyFile, line, col, fmt.Sprintf("route %q", r.Name), "retry_policy",
					"let one layer retry: drop the route's retry_policy, or the method's retryPolicy",
					"the mesh retries (%d tries) and %s:%d:%d retries %s (%d attempts) %s: up to %d attempts per request",
					ea, l.in.grpcFile, gl, gc, name, ga, how, ea*ga)
			}
		}
	}
}

// routeCovers reports whether an Envoy route named by its match ("prefix /api",
// "path /x") sends the gRPC path given (/pkg.Service/Method, /pkg.Service/, /), and
// whether it is sure: a route without match, named or matched by a regex, may.
func routeCovers(route, grpcPath string) (covers, sure bool) {
	switch {
	case strings.HasPrefix(route, "prefix "):
		p := strings.TrimPrefix(route, "prefix ")
		return strings.HasPrefix(grpcPath, p) || grpcPath == "/" || strings.HasPrefix(p, grpcPath), true
	case strings.HasPrefix(route, "path "):
		p := strings.TrimPrefix(route, "path ")
		return p == grpcPath || grpcPath == "/" || (strings.HasSuffix(grpcPath, "/") && strings.HasPrefix(p, grpcPath)), true
	}
	return true, false
}

// nearest returns the word of known within two edits of w, the closest first; "" if
// none is.
func nearest(w string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(w), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
