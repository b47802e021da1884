package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyk8s"
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
	{"two-owners", levelError, "two layers of one call path that both retry — a gateway's route, the app's stack or gRPC config, the sidecar's Envoy, Istio or Linkerd route — so the attempts multiply; the fix names the owner to keep"},
	{"maybe-two-owners", levelWarning, "two retrying layers that may share a call path: an Envoy route with no match (a pasted route: block), or a gateway's route in front of the mesh's when the gateway may not be in the mesh"},
	{"path-timeouts", levelWarning, "a layer whose try (its per-try timeout, else its timeout) ends before the layer beneath it can finish retrying: the caller gives up, and retries, while the tries beneath go on"},
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
	{"call-path", levelInfo, "each call path of more than one layer (gateway -> app -> sidecar): its owners and the most attempts one user request makes at the dependency"},
	{"default-retries", levelWarning, "an Istio VirtualService route with no retries: Istio then retries twice by default, a second owner no one wrote down"},
	{"skipped", levelInfo, "a document of -k8s that lint does not read: another kind (a Deployment, a Service without Linkerd annotations), or not a Kubernetes object"},
	{"not-honoured", levelInfo, "a field or condition Envoy honours and Backstop's pipeline for the route does not (retriable_headers, hedge_policy, gRPC conditions on an HTTP route, …), or a match its routing table cannot say (a regex, headers, a wildcard domain)"},
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
	// service is the Kubernetes Service the app runs as (-service): the gateway
	// routes that send to it are upstream of its stacks.
	service string
	fs      []finding
}

func (l *linter) add(id, file string, line, col int, where, field, fix, format string, args ...any) {
	if line <= 0 { // about the file as a whole
		line, col = 1, 1
	}
	l.fs = append(l.fs, finding{ID: id, Level: levelOf(id), File: file, Line: line, Column: col, Where: where, Field: field,
		Message: fmt.Sprintf(format, args...), Fix: fix})
}

// problems returns each problem of a refusal: the members of a joined error, or err.
func problems(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var ps []error
		for _, e := range j.Unwrap() {
			ps = append(ps, problems(e)...)
		}
		return ps
	}
	return []error{err}
}

// refused turns a config the parser refused into a finding per problem.
func (l *linter) refused(file string, err error) {
	for _, p := range problems(err) {
		l.refusedOne(file, p)
	}
}

// refusedOne turns one problem of a refused config into a finding.
func (l *linter) refusedOne(file string, err error) {
	var ee *policyenvoy.ConfigError
	var ge *policygrpc.ServiceConfigError
	var ke *policyk8s.ConfigError
	switch {
	case errors.As(err, &ke):
		if ke.File != "" {
			file = ke.File
		}
		msg := ke.Msg
		if ke.Path != "" {
			msg = ke.Path + ": " + msg
		}
		l.add("refused", file, ke.Line, ke.Column, "", ke.Path, "correct the manifest as the Gateway API, Istio or Linkerd reference for the field says", "%s", msg)
	case errors.As(err, &ee):
		id, msg, fix := "refused", ee.Msg, "correct the field as Envoy's API reference for it says"
		switch {
		case errors.Is(err, policyenvoy.ErrNegativeDuration):
			id, fix = "negative-duration", "give a duration of 0s or more: 0s turns a timeout off, which lint also reports under retries"
		case errors.Is(err, policyenvoy.ErrUnknownRetryOn):
			id, fix = "unknown-retry-on", "name a retry_on condition Envoy knows (5xx, gateway-error, reset, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, …)"
		}
		if ee.Path != "" {
			msg = ee.Path + ": " + msg
		} else if id == "refused" {
			fix = "fix the YAML or JSON at this place; an Envoy route configuration goes with -envoy, a gRPC service config with -grpc"
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
		} else if id == "refused" {
			fix = "fix the JSON at this place; a gRPC service config goes with -grpc, an Envoy route configuration with -envoy"
		}
		l.add(id, file, ge.Line, ge.Column, "", ge.Path, fix, "%s", msg)
	default:
		l.add("refused", file, 0, 0, "", "", "", "%v", err)
	}
}

func lint(in *input, maxWorstCase time.Duration) []finding {
	l := &linter{in: in, maxWorstCase: maxWorstCase, service: in.service}
	var hops []hop
	for _, src := range in.sources {
		var ce *config.Error
		switch {
		case src.err == nil:
		case errors.As(src.err, &ce) || src.format == formatBackstop:
			l.configRefused(src.file, src.err)
		default:
			l.refused(src.file, src.err)
		}
		if src.format == formatK8s && src.k8s != nil && src.err == nil {
			l.k8sRoutes(src)
			hops = append(hops, k8sHops(src.k8s)...)
			continue
		}
		if src.config == nil {
			continue
		}
		notes := src.config.Notes()
		for _, se := range src.config.Explain().Stacks {
			l.stack(src, se, notes)
		}
		hops = append(hops, configHops(src)...)
	}
	l.paths(hops)
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

// stack lints one stack of a configuration, whatever its format: a Backstop file's
// stack, an Envoy route or a gRPC methodConfig entry imported into the model. The
// checks read the model; the words, fields and places are the original's.
func (l *linter) stack(src *source, se config.StackExplanation, notes []config.Note) {
	c, e := src.config, se.Explanation
	s, _ := c.Settings(se.Name)
	o, imported := c.Origin(se.Name)
	format, where := formatBackstop, "stack "+se.Name
	if imported {
		format = o.Format
		switch format {
		case formatEnvoy:
			where = fmt.Sprintf("route %q", o.Route.Name)
		case formatGRPC:
			where = strings.Join(o.Entry.Names, ", ")
		}
	}
	// place returns the field at rel ("retry.attempts") as the original spells it,
	// and where it is written.
	place := func(rel string) (string, config.Pos) {
		if imported {
			return o.Field(rel)
		}
		pos, field := positionOf(c, se.Name, rel)
		return field, pos
	}
	add := func(id, rel, fix, format string, args ...any) {
		field, pos := place(rel)
		l.add(id, pos.File, pos.Line, pos.Column, where, field, fix, format, args...)
	}
	// onWord places a finding on one word of the field at rel (a retry_on condition).
	onWord := func(id, rel, word, fix, format string, args ...any) {
		field, pos := place(rel)
		l.add(id, pos.File, pos.Line, columnOf(src.data, pos.Line, pos.Column, word), where, field, fix, format, args...)
	}
	for _, n := range notes {
		if n.Stack == se.Name {
			l.note(src, where, n)
		}
	}
	if e.MaxAttempts < 2 {
		return
	}
	retryField := "retry"
	if slices.Contains(se.Order, "hedge") {
		retryField = "hedge"
	}
	var perTry time.Duration
	if s.AttemptTimeout != nil && !s.AttemptTimeout.Off {
		perTry = s.AttemptTimeout.D
	}
	if format == formatEnvoy && e.MaxAttempts-1 > maxNumRetries {
		add("num-retries", "retry.attempts", fmt.Sprintf("lower num_retries to %d or fewer; bound the rest with the cluster's retry_budget", maxNumRetries),
			"num_retries %d: up to %d tries per request, each a load on a service that is already failing", e.MaxAttempts-1, e.MaxAttempts)
	}
	if !slices.Contains(se.Order, "deadline") {
		switch format {
		case formatEnvoy:
			worst := "unbounded: no per_try_timeout either, so one hung try holds the request for ever"
			if e.WorstCaseFrom != "" {
				worst = fmt.Sprintf("up to %v: %d tries of per_try_timeout %v and their longest waits", e.WorstCase, e.MaxAttempts, perTry)
			}
			add("no-timeout", "deadline", "give the route a timeout, e.g. timeout: 15s (Envoy's default), that the caller can wait",
				"timeout: 0s turns the route's timeout off under %d tries: %s", e.MaxAttempts, worst)
		case formatGRPC:
			add("no-timeout", retryField, `give the methodConfig a "timeout", e.g. "5s", that a caller can wait`,
				"%d attempts with no timeout: unbounded, each attempt may wait for ever unless the caller sets a deadline", e.MaxAttempts)
		default:
			add("no-timeout", retryField, "give the stack a deadline, e.g. deadline: 2s, that its callers can wait",
				"%d attempts with no deadline: unbounded unless every caller sets one", e.MaxAttempts)
		}
	}
	worstAt, worstFix := "deadline", fmt.Sprintf("lower the deadline to %v or less", l.maxWorstCase)
	switch {
	case format == formatGRPC:
		worstFix = fmt.Sprintf(`lower "timeout" to "%gs" or less`, l.maxWorstCase.Seconds())
	case e.WorstCaseFrom == "attempts" && format == formatEnvoy:
		worstAt, worstFix = "attempt_timeout", fmt.Sprintf("lower per_try_timeout or num_retries, or give a timeout of %v or less", l.maxWorstCase)
	case e.WorstCaseFrom == "attempts":
		worstAt, worstFix = "attempt_timeout", fmt.Sprintf("give the stack a deadline of %v or less", l.maxWorstCase)
	case format == formatEnvoy:
		worstFix = fmt.Sprintf("lower timeout to %v or less", l.maxWorstCase)
	}
	l.worstCase(e, func(fix, format string, args ...any) { add("worst-case", worstAt, fix, format, args...) }, worstFix)
	if s.Deadline != nil && !s.Deadline.Off && perTry > 0 {
		deadline := s.Deadline.D
		if perTry >= deadline {
			// Only a Backstop stack says so: an Envoy route's per_try_timeout not below
			// its timeout is ignored when the route is read, as Envoy ignores it.
			add("attempts-fit", "attempt_timeout", fmt.Sprintf("lower attempt_timeout below the deadline %v, or drop it", deadline),
				"attempt_timeout %v is not below the deadline %v: it never fires, and an attempt that hangs ends the call at the deadline with no retry",
				perTry, deadline)
		} else {
			fitAttempts(e, deadline, perTry, func(fit int, need, waits time.Duration) {
				if format == formatEnvoy {
					fix := fmt.Sprintf("raise timeout to %v, or lower num_retries to %d", need, max(fit-1, 0))
					if per := ((deadline - waits) / time.Duration(e.MaxAttempts)).Truncate(time.Millisecond); per > 0 {
						fix += fmt.Sprintf(", or per_try_timeout to %v", per)
					}
					add("attempts-fit", "attempt_timeout", fix,
						"%d tries of per_try_timeout %v and their back-off do not fit in timeout %v: when tries time out, only %d of %d run",
						e.MaxAttempts, perTry, deadline, fit, e.MaxAttempts)
					return
				}
				add("attempts-fit", "attempt_timeout", fmt.Sprintf("raise the deadline to %v, or lower %s.attempts to %d", need, retryField, max(fit, 1)),
					"%d attempts of attempt_timeout %v and their back-off do not fit in the deadline %v: when attempts time out, only %d of %d run",
					e.MaxAttempts, perTry, deadline, fit, e.MaxAttempts)
			})
		}
	}
	if !slices.Contains(se.Order, "budget") {
		switch format {
		case formatEnvoy:
			add("cluster-budget", "budget", "give the cluster circuit_breakers with a retry_budget (e.g. budget_percent 20) so retries stop in an outage",
				"the route's retries are bounded in an outage only by its cluster's retry_budget, which the route config does not show")
		case formatGRPC:
			add("no-throttling", retryField, `add "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1} at the top of the config`,
				"retries with no retryThrottling: in an outage every call makes all %d attempts", e.MaxAttempts)
		default:
			add("no-budget", retryField, "add a budget, e.g. budget: {token_bucket: {max_tokens: 10, token_ratio: 0.1}}",
				"retries with no budget: in an outage every call makes all %d attempts", e.MaxAttempts)
		}
	}
	l.retry500(s, format, place, add, onWord)
}

// retry500 reports a stack that retries HTTP 500, or gRPC INTERNAL or UNKNOWN.
func (l *linter) retry500(s config.Stack, format string, place func(rel string) (string, config.Pos), add func(id, rel, fix, format string, args ...any),
	onWord func(id, rel, word, fix, format string, args ...any)) {
	var statuses []int
	var codes []string
	stage := "retry"
	switch {
	case s.Retry != nil && (s.Retry.Enabled == nil || *s.Retry.Enabled):
		statuses, codes = s.Retry.HTTPStatuses, s.Retry.GRPCCodes
	case s.Hedge != nil:
		codes, stage = s.Hedge.GRPCCodes, "hedge"
	}
	for i, code := range statuses {
		if code != 500 {
			continue
		}
		rel := fmt.Sprintf("retry.http_statuses[%d]", i)
		if format == formatEnvoy {
			if field, _ := place(rel); field == "retry_policy.retry_on" {
				onWord("retry-500", rel, "5xx", "retry gateway-error (502, 503, 504) instead, or retriable-status-codes with the codes meant",
					"retry_on 5xx retries 500, which usually reports a bug a retry hits again")
				continue
			}
			add("retry-500", rel, "retry gateway-error (502, 503, 504) instead, or retriable-status-codes with the codes meant",
				"retriable_status_codes 500 usually reports a bug that a retry hits again")
			continue
		}
		add("retry-500", rel, "retry 502, 503 and 504, the statuses of a server that may answer next time",
			"http_statuses 500 usually reports a bug that a retry hits again")
	}
	for i, code := range codes {
		if code != "INTERNAL" && code != "UNKNOWN" {
			continue
		}
		field := "grpc_codes"
		if format == formatGRPC {
			field = map[string]string{"retry": "retryableStatusCodes", "hedge": "nonFatalStatusCodes"}[stage]
		}
		add("retry-500", fmt.Sprintf("%s.grpc_codes[%d]", stage, i), "retry UNAVAILABLE, the code of a server that may answer next time",
			"%s %s usually reports a bug that a retry hits again", field, code)
	}
}

// note reports what an imported original says that its stack says otherwise or
// cannot say, where it is a finding: a retry_on condition Envoy does not know, a
// setting Backstop does not honour, status codes Envoy ignores, a gRPC maxAttempts
// above its cap. The other notes are explain's.
func (l *linter) note(src *source, where string, n config.Note) {
	switch n.Reason {
	case config.NoteUnknown:
		fix := "spell it as one of " + strings.Join(policyenvoy.RetryOnConditions(), ", ")
		if n.Meant != "" {
			fix = fmt.Sprintf("did you mean %s? Envoy's conditions are %s", n.Meant, strings.Join(policyenvoy.RetryOnConditions(), ", "))
		}
		l.add("unknown-retry-on", n.Pos.File, n.Pos.Line, columnOf(src.data, n.Pos.Line, n.Pos.Column, n.Value), where, n.Field, fix,
			"retry_on %q is not a condition Envoy knows: it never retries on it", n.Value)
	case config.NoteNotCarried:
		const fix = "keep these retries in Envoy, or express them in the application"
		switch {
		case n.Field == "retry_policy.retry_on":
			cond, _, _ := strings.Cut(strings.TrimPrefix(n.Value, n.Field+" "), " ")
			l.add("not-honoured", n.Pos.File, n.Pos.Line, columnOf(src.data, n.Pos.Line, n.Pos.Column, cond), where, n.Field, fix,
				"Backstop does not honour %s", n.Value)
		case isRetryField(n.Field):
			l.add("not-honoured", n.Pos.File, n.Pos.Line, n.Pos.Column, where, n.Field, fix, "Backstop does not honour %s", n.Value)
		default:
			l.add("not-honoured", n.Pos.File, n.Pos.Line, n.Pos.Column, where, n.Field,
				"route these requests in Envoy, or with a pattern of a Backstop file", "Backstop's routing table does not honour it: %s", n.Msg)
		}
	case config.NoteIgnored:
		l.add("status-codes-ignored", n.Pos.File, n.Pos.Line, n.Pos.Column, where, n.Field,
			`add retriable-status-codes to retry_on, or drop retriable_status_codes`, "%s", n.Msg)
	case config.NoteCapped:
		l.add("max-attempts", n.Pos.File, n.Pos.Line, n.Pos.Column, where, n.Field,
			fmt.Sprintf("write maxAttempts %d, what gRPC will do", policygrpc.MaxServiceConfigAttempts),
			"maxAttempts is %s; gRPC silently caps it at %d", n.Value, policygrpc.MaxServiceConfigAttempts)
	}
}

// fitAttempts calls report when the attempts cannot all run to their timeout, with
// their longest back-off, before the deadline — the retry starts no attempt with less
// than its per-attempt timeout left: fit is how many can, need the deadline they all
// need, waits the longest back-off of them all.
func fitAttempts(e policy.Explanation, deadline, perTry time.Duration, report func(fit int, need, waits time.Duration)) {
	if e.MaxAttempts < 2 {
		return
	}
	var sleeps []policy.Sleep
	for _, st := range e.Stack {
		if st.Place.OwnsRetries {
			sleeps = st.Sleeps
		}
	}
	start, fit, need, waits := time.Duration(0), 0, time.Duration(0), time.Duration(0)
	for k := 1; k <= e.MaxAttempts; k++ {
		if k > 1 && k-2 < len(sleeps) {
			start += sleeps[k-2].Max
			waits += sleeps[k-2].Max
		}
		need = start + perTry
		if need <= deadline {
			fit = k
		}
		start += perTry
	}
	if fit < e.MaxAttempts {
		report(fit, need, waits)
	}
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
