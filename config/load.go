package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/throttle"
)

// MaxFileSize is the largest configuration file the loader reads: 1 MiB.
const MaxFileSize = 1 << 20

// Options configure how a configuration is loaded. The zero value is valid: no
// environment overrides, the system clock and random source, no observer.
type Options struct {
	// Env is the environment whose PREFIX_… variables override the file's fields, as
	// os.Environ returns it; nil means none. Pass os.Environ() in a program.
	Env []string
	// EnvPrefix is the prefix of those variables; "" means DefaultEnvPrefix
	// ("BACKSTOP").
	EnvPrefix string
	// Observer receives the events of every stack's pipeline (each named after its
	// stack), and a [Loader]'s event.ConfigReload and event.StageReset events; nil
	// means none.
	Observer event.Observer
	// Clock is handed to every stage that reads the time; nil means
	// policy.SystemClock(). Breakers read the system clock whatever it is.
	Clock policy.Clock
	// Rand is handed to every stage that draws jitter; nil means policy.SystemRand().
	Rand policy.Rand
}

// Config is a loaded configuration: every stack's pipeline built, the HTTP and gRPC
// routing tables resolved ([Config.HTTP], [Config.GRPC]). It is immutable and safe for
// concurrent use. A [Loader] replaces one Config with the next on reload.
type Config struct {
	file                   string
	stacks                 []*stack
	byName                 map[string]*stack
	http                   *policyhttp.Routes
	grpc                   *policygrpc.Routes
	httpRoutes, grpcRoutes []routeInfo
	pos                    map[string]Pos    // every field written, by path
	origins                map[string]Origin // an import's stacks: what each was
	notes                  []Note            // an import's notes
}

// routeInfo is one route as written, for explanations.
type routeInfo struct {
	Match string `json:"match"` // the pattern, or the gRPC name; "" for the default
	Stack string `json:"stack"`
	Pos   Pos    `json:"-"`
}

// stack is one named stack, built.
type stack struct {
	name     string
	settings Stack // with the defaults merged in
	order    []string
	stages   map[string]policy.Policy
	prints   map[string]string // each stage's settings, as a fingerprint
	pipeline *policy.Pipeline
	stream   *policy.Pipeline // the pipeline without a hedge, for gRPC streams
	classify policyhttp.Classifier
	codes    []codes.Code
}

// The reasons of a [Change].
const (
	StageChanged = "changed" // its settings changed: a new stage, fresh
	StageAdded   = "added"   // the stack did not have it
	StageRemoved = "removed" // the stack no longer has it
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

// canonical is the order of stages in a stack without an Order: it obeys every
// ordering rule.
var canonical = []string{StageRateLimit, StageDeadline, StageBulkhead, StageThrottle, StageBreaker, StageBudget, StageRetry, StageHedge, StageAttemptTimeout}

// Load reads and loads the file at path, YAML or JSON; see [Parse].
func Load(path string, o Options) (*Config, error) {
	return load(path, o, nil)
}

func load(path string, o Options, prev *Config) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, _, err := parse(path, data, o, prev)
	return c, err
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	if b.Len() > MaxFileSize {
		return nil, &Error{Problems: []Problem{{Pos: Pos{File: path}, Msg: fmt.Sprintf("the file is larger than %d bytes", MaxFileSize)}}}
	}
	return b.Bytes(), nil
}

// Parse loads a configuration from data, YAML or JSON, naming it name in positions.
// It applies the environment overrides of o.Env, merges the defaults into every
// stack field by field, checks every field and every stack's order with
// policy.CheckKinds (the rules and rule numbers of policy.Wrap), builds every stage
// with its package's constructor and every pipeline with policy.Wrap, and resolves
// the routes. A configuration with any problem is refused whole with an [*Error]
// listing every problem found, each at its file:line:column and field path.
func Parse(name string, data []byte, o Options) (*Config, error) {
	c, _, err := parse(name, data, o, nil)
	return c, err
}

// Change is a stage a reload replaced, added or removed in a stack that was there
// before: a stage built anew starts fresh.
type Change struct {
	Stack, Stage string
	// Reason is StageChanged, StageAdded or StageRemoved.
	Reason string
	// Kept says what state the new stage took over from the old one: "open" for a
	// breaker that was open (it stays open until the old one would have let probes
	// through); "" for none.
	Kept string
}

func parse(name string, data []byte, o Options, prev *Config) (*Config, []Change, error) {
	d := &decoder{file: name, pos: make(map[string]Pos), env: make(map[*yaml.Node]string)}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, &Error{Problems: []Problem{syntaxProblem(name, err)}}
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		line := second.Line
		if err != nil {
			return nil, nil, &Error{Problems: []Problem{syntaxProblem(name, err)}}
		}
		return nil, nil, &Error{Problems: []Problem{{Pos: Pos{File: name, Line: line, Column: 1},
			Msg: "a second YAML document; a configuration file holds one"}}}
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1, Column: 1}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	prefix := o.EnvPrefix
	if prefix == "" {
		prefix = DefaultEnvPrefix
	}
	d.applyEnv(root, prefix, o.Env)
	var f File
	d.decode(root, "", reflect.ValueOf(&f).Elem())
	b := &builder{d: d, o: o, prev: prev}
	c := b.build(&f)
	if len(d.probs) > 0 {
		sortProblems(d.probs)
		return nil, nil, &Error{Problems: d.probs}
	}
	return c, b.changes, nil
}

// syntaxProblem places a YAML syntax error ("yaml: line 3: …") at its line.
func syntaxProblem(file string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, r, ok := strings.Cut(rest, ": "); ok {
			if _, e := fmt.Sscanf(n, "%d", &line); e == nil {
				msg = r
			}
		}
	}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = strings.Join(te.Errors, "; ")
	}
	return Problem{Pos: Pos{File: file, Line: line, Column: 1}, Msg: "not YAML or JSON: " + msg, Err: err}
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i].Pos, ps[j].Pos
		if (a.Env == "") != (b.Env == "") {
			return a.Env == "" // the file's problems first, then the environment's
		}
		if a.Env != b.Env {
			return a.Env < b.Env
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// builder builds a configuration's stacks and routes, reporting problems to d.
type builder struct {
	d       *decoder
	o       Options
	prev    *Config
	current *Config // being built
	changes []Change
}

func (b *builder) build(f *File) *Config {
	c := &Config{file: b.d.file, byName: make(map[string]*stack), pos: b.d.pos}
	b.current = c
	for _, ns := range f.Stacks {
		s := merge(f.Defaults, ns.Stack)
		st := b.stack(ns.Name, s)
		c.stacks = append(c.stacks, st)
		c.byName[ns.Name] = st
	}
	if len(f.Stacks) == 0 && f.HTTP == nil && f.GRPC == nil {
		b.d.problem(&yaml.Node{Line: 1, Column: 1}, "stacks", "the file names no stack; want stacks: with at least one")
	}
	b.httpRoutes(c, f.HTTP)
	b.grpcRoutes(c, f.GRPC)
	return c
}

// merge returns s with every field it leaves out taken from defaults: a stage s sets
// is merged field by field with the defaults' stage; lists are replaced whole.
func merge(defaults, s Stack) Stack {
	out := s
	mergeValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(defaults))
	return out
}

func mergeValue(dst, src reflect.Value) {
	for i := range dst.NumField() {
		df, sf := dst.Field(i), src.Field(i)
		switch {
		case df.Kind() == reflect.Slice:
			if df.IsNil() && !sf.IsNil() {
				df.Set(sf)
			}
		case df.Kind() == reflect.Pointer:
			if sf.IsNil() {
				continue
			}
			if df.IsNil() {
				df.Set(sf)
				continue
			}
			if df.Elem().Kind() == reflect.Struct && df.Elem().Type() != durationType {
				cp := reflect.New(df.Elem().Type())
				cp.Elem().Set(df.Elem())
				mergeValue(cp.Elem(), sf.Elem())
				df.Set(cp)
			}
		}
	}
}

// where returns the position of a stack's field (rel, e.g. "retry.attempts"): where
// the stack sets it, else where the defaults do, else the nearest enclosing field
// that is written, else the stack's name.
func (b *builder) where(name, rel string) (Pos, string) {
	for p := rel; p != ""; {
		for _, full := range []string{"stacks." + name + "." + p, "defaults." + p} {
			if pos, ok := b.d.pos[full]; ok {
				return pos, full
			}
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return b.d.pos["stacks."+name], "stacks." + name
}

func (b *builder) problem(name, rel string, err error, format string, args ...any) {
	pos, path := b.where(name, rel)
	b.d.probs = append(b.d.probs, Problem{Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...), Err: err})
}

// present reports whether the stack has a stage.
func present(s Stack, stage string) bool {
	on := func(e *bool) bool { return e == nil || *e }
	switch stage {
	case StageDeadline:
		return s.Deadline != nil && !s.Deadline.Off
	case StageAttemptTimeout:
		return s.AttemptTimeout != nil && !s.AttemptTimeout.Off
	case StageBreaker:
		return s.Breaker != nil && on(s.Breaker.Enabled)
	case StageBudget:
		return s.Budget != nil && on(s.Budget.Enabled)
	case StageRetry:
		return s.Retry != nil && on(s.Retry.Enabled)
	case StageHedge:
		return s.Hedge != nil && on(s.Hedge.Enabled)
	case StageThrottle:
		return s.Throttle != nil && on(s.Throttle.Enabled)
	case StageBulkhead:
		return s.Bulkhead != nil && on(s.Bulkhead.Enabled)
	case StageRateLimit:
		return s.RateLimit != nil && on(s.RateLimit.Enabled)
	}
	return false
}

// settingsOf returns a stage's settings, for its fingerprint.
func settingsOf(s Stack, stage string) any {
	switch stage {
	case StageDeadline:
		return s.Deadline
	case StageAttemptTimeout:
		return s.AttemptTimeout
	case StageBreaker:
		return s.Breaker
	case StageBudget:
		return s.Budget
	case StageRetry:
		return s.Retry
	case StageHedge:
		return s.Hedge
	case StageThrottle:
		return s.Throttle
	case StageBulkhead:
		return s.Bulkhead
	case StageRateLimit:
		return s.RateLimit
	}
	return nil
}

var kinds = map[string]policy.Kind{
	StageDeadline: policy.KindDeadline, StageAttemptTimeout: policy.KindAttemptTimeout,
	StageBreaker: policy.KindBreaker, StageBudget: policy.KindBudget, StageRetry: policy.KindRetry,
	StageHedge: policy.KindRetry, StageThrottle: policy.KindThrottle, StageBulkhead: policy.KindBulkhead,
	StageRateLimit: policy.KindRateLimit,
}

// stateful are the stages that keep state across calls, and so across a reload that
// leaves their settings alone.
var stateful = map[string]bool{StageBreaker: true, StageBudget: true, StageThrottle: true, StageBulkhead: true, StageRateLimit: true}

func (b *builder) stack(name string, s Stack) *stack {
	st := &stack{name: name, settings: s, stages: make(map[string]policy.Policy), prints: make(map[string]string)}
	before := len(b.d.probs)
	st.order = b.order(name, s)
	if len(b.d.probs) > before {
		return st
	}
	var prev *stack
	if b.prev != nil {
		prev = b.prev.byName[name]
	}
	var ps []policy.Policy
	for _, stage := range st.order {
		raw, _ := json.Marshal(settingsOf(s, stage))
		st.prints[stage] = string(raw)
		if prev != nil && stateful[stage] && prev.prints[stage] == st.prints[stage] {
			st.stages[stage] = prev.stages[stage] // unchanged: keeps its state
			ps = append(ps, prev.stages[stage])
			continue
		}
		p := b.stage(name, stage, s)
		if p == nil {
			continue
		}
		if prev != nil {
			if old, ok := prev.prints[stage]; !ok {
				b.changes = append(b.changes, Change{Stack: name, Stage: stage, Reason: StageAdded})
			} else if old != st.prints[stage] {
				b.changes = append(b.changes, Change{Stack: name, Stage: stage, Reason: StageChanged, Kept: carryOver(prev.stages[stage], p)})
			}
		}
		st.stages[stage] = p
		ps = append(ps, p)
	}
	if len(b.d.probs) > before {
		return st
	}
	if prev != nil {
		for _, stage := range prev.order {
			if _, ok := st.prints[stage]; !ok {
				b.changes = append(b.changes, Change{Stack: name, Stage: stage, Reason: StageRemoved})
			}
		}
	}
	st.pipeline = b.wrap(name, ps)
	if present(s, StageHedge) {
		// Streams are retried, never hedged: their pipeline is the stack without the
		// hedge, and without what stands only for it (a budget, a per-attempt timeout).
		var streamed []policy.Policy
		for i, stage := range st.order {
			switch stage {
			case StageHedge:
				continue
			case StageBudget, StageAttemptTimeout:
				if !present(s, StageRetry) {
					continue
				}
			}
			streamed = append(streamed, ps[i])
		}
		st.stream = b.wrap(name, streamed)
	}
	switch {
	case present(s, StageRetry):
		b.classification(st, "retry", s.Retry.HTTPStatuses, s.Retry.GRPCCodes)
	case present(s, StageHedge):
		b.classification(st, "hedge", nil, s.Hedge.GRPCCodes)
	}
	return st
}

// carryOver hands the state a replaced stage must not lose to its successor: a
// breaker that is open stays open until the old one would have let probes through,
// so that a reload never lets a flood through to a dependency that is down.
func carryOver(old, new policy.Policy) string {
	ob, ok1 := old.(*breaker.Breaker)
	nb, ok2 := new.(*breaker.Breaker)
	if !ok1 || !ok2 {
		return ""
	}
	if d, open := ob.OpenNow(); open {
		nb.OpenUntil(time.Now().Add(d))
		return "open"
	}
	return ""
}

func (b *builder) wrap(name string, ps []policy.Policy) *policy.Pipeline {
	opts := []policy.Policy{policy.Name(name)}
	if b.o.Observer != nil {
		opts = append(opts, policy.Observe(b.o.Observer))
	}
	if b.o.Clock != nil {
		opts = append(opts, policy.UseClock(b.o.Clock))
	}
	p, err := policy.Wrap(append(ps, opts...)...)
	if err != nil {
		// CheckKinds accepted the order; Wrap sees the objects too (O6).
		b.problem(name, "", err, "%v", err)
	}
	return p
}

// order works out a stack's stages, outermost first, and checks them with
// policy.CheckKinds, placing a broken rule at the stage it names.
func (b *builder) order(name string, s Stack) []string {
	var order []string
	if s.Order == nil {
		for _, stage := range canonical {
			if present(s, stage) {
				order = append(order, stage)
			}
		}
	} else {
		seen := make(map[string]int)
		for i, stage := range s.Order {
			rel := fmt.Sprintf("order[%d]", i)
			_, known := kinds[stage]
			switch {
			case !known:
				b.problem(name, rel, nil, "%q is not a stage; want one of %s%s", stage, strings.Join(canonical, ", "), suggest(stage, canonical))
				continue
			case seen[stage] > 0:
				b.problem(name, rel, policy.ErrOrder, "O6: %s is listed at positions %d and %d; a stack has one of each stage, so list it once", stage, seen[stage], i+1)
				continue
			case !present(s, stage):
				b.problem(name, rel, nil, "%s is listed but not configured (or is disabled); configure it or take it out of the order", stage)
				continue
			}
			seen[stage] = i + 1
			order = append(order, stage)
		}
		for _, stage := range canonical {
			if present(s, stage) && seen[stage] == 0 {
				b.problem(name, stage, nil, "%s is configured but not in the stack's order; add it to order, or disable it", stage)
			}
		}
		if len(order) != len(s.Order) {
			return nil
		}
	}
	ks := make([]policy.Kind, len(order))
	for i, stage := range order {
		ks[i] = kinds[stage]
	}
	if err := policy.CheckKinds(ks...); err != nil {
		var oe *policy.OrderError
		if errors.As(err, &oe) {
			rel := order[oe.First-1]
			if s.Order != nil {
				rel = fmt.Sprintf("order[%d]", indexOf(s.Order, rel))
			}
			pos, path := b.where(name, rel)
			b.d.probs = append(b.d.probs, Problem{Pos: pos, Path: path, Rule: oe.Rule, Msg: stageWords(oe.Msg, order), Err: err})
		} else {
			b.problem(name, "", err, "%v", err)
		}
	}
	return order
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return 0
}

// stageWords adds the stages' names to a rule's message, which speaks of positions:
// "(1 deadline, 2 retry, 3 attempt_timeout)".
func stageWords(msg string, order []string) string {
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d %s", i+1, s)
	}
	// The fix in the file's words, not the Go constructors'.
	msg = strings.NewReplacer("deadline.PerAttempt", "attempt_timeout", "deadline.New", "deadline", "policy.RetryBudget", "a retry budget").Replace(msg)
	return fmt.Sprintf("%s (positions: %s)", msg, strings.Join(parts, ", "))
}

// goNames maps the option names the constructors' errors use to the stage's field
// names, so that a refused value is placed at the field that set it.
var goNames = map[string][][2]string{
	StageBreaker: {{"ConsecutiveFailures", "consecutive_failures"}, {"FailureRatio", "failure_ratio"}, {"MinRequests", "min_requests"},
		{"MaxOpenTimeout", "max_open_timeout"}, {"OpenTimeout", "open_timeout"}, {"HalfOpenProbes", "half_open_probes"},
		{"SlowCall", "slow_call"}, {"SlowStart", "slow_start"}, {"Window", "window"}},
	StageRetry: {{"MaxAttempts", "attempts"}, {"MaxHintDelay", "max_hint"}, {"Base", "base"}, {"Cap", "cap"}, {"Multiplier", "multiplier"}},
	StageHedge: {{"MaxAttempts", "attempts"}, {"Delay", "delay"}},
	StageBudget: {{"maxTokens", "token_bucket.max_tokens"}, {"tokenRatio", "token_bucket.token_ratio"},
		{"MinPerSecond", "ratio.min_per_second"}, {"Window", "ratio.window"}, {"Ratio", "ratio.ratio"}},
	StageThrottle:  {{"K", "k"}, {"Window", "window"}},
	StageBulkhead:  {{"MaxConcurrent", "max_concurrent"}, {"MaxQueue", "max_queue"}, {"MaxWait", "max_wait"}},
	StageRateLimit: {{"Rate", "rate"}, {"Burst", "burst"}, {"MaxWait", "max_wait"}},
}

// refused reports a constructor's error at the field it names.
func (b *builder) refused(name, stage string, err error) {
	rel := stage
	msg := err.Error()
	for _, g := range goNames[stage] {
		if strings.Contains(msg, g[0]+" ") || strings.Contains(msg, g[0]+":") {
			rel = stage + "." + g[1]
			break
		}
	}
	b.problem(name, rel, err, "%v", err)
}

func intp(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func floatp(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func durp(p *Duration) time.Duration {
	if p == nil {
		return 0
	}
	return p.D
}

// count checks a whole-number field that the library keeps unsigned.
func (b *builder) count(name, rel string, p *int) uint32 {
	if p == nil {
		return 0
	}
	if *p < 1 {
		b.problem(name, rel, nil, "is %d; want ≥ 1", *p)
		return 0
	}
	return uint32(*p)
}

// zeros lists the fields whose 0 the library reads as "the default": written in a
// file, 0 is refused, since leaving the field out says that.
var zeros = map[string]func(s Stack) any{
	"hedge.attempts":          func(s Stack) any { return s.Hedge.Attempts },
	"bulkhead.max_concurrent": func(s Stack) any { return s.Bulkhead.MaxConcurrent },
	"rate_limit.burst":        func(s Stack) any { return s.RateLimit.Burst },
	"throttle.k":              func(s Stack) any { return s.Throttle.K },
	"retry.multiplier":        func(s Stack) any { return s.Retry.Multiplier },
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
}

// zeroWritten reports a field of stage written as 0 whose 0 would mean the default.
func (b *builder) zeroWritten(name, stage string, s Stack) bool {
	bad := false
	for field, get := range zeros {
		if !strings.HasPrefix(field, stage+".") {
			continue
		}
		switch v := get(s).(type) {
		case *int:
			if v != nil && *v == 0 {
				b.problem(name, field, nil, "is 0; leave it out for the default")
				bad = true
			}
		case *float64:
			if v != nil && *v == 0 {
				b.problem(name, field, nil, "is 0; leave it out for the default")
				bad = true
			}
		}
	}
	return bad
}

// stage builds one stage; nil after reporting a problem.
func (b *builder) stage(name, stage string, s Stack) policy.Policy {
	if b.zeroWritten(name, stage, s) {
		return nil
	}
	var p policy.Policy
	var err error
	switch stage {
	case StageDeadline:
		p, err = deadline.New(s.Deadline.D)
	case StageAttemptTimeout:
		p, err = deadline.PerAttempt(s.AttemptTimeout.D)
	case StageBreaker:
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
			b.problem(name, "breaker.failure_ratio", nil, "is %v; want a ratio in (0, 1]", *c.FailureRatio)
			return nil
		}
		if c.FailureRatio == nil && (c.MinRequests != nil || c.Window != nil) {
			field := "breaker.min_requests"
			if c.Window != nil {
				field = "breaker.window"
			}
			b.problem(name, field, nil, "applies to ratio mode only; set failure_ratio, or remove it")
			return nil
		}
		p, err = breaker.New(name, o)
	case StageBudget:
		c := s.Budget
		switch {
		case (c.TokenBucket == nil) == (c.Ratio == nil):
			b.problem(name, "budget", nil, "wants exactly one of token_bucket and ratio")
			return nil
		case c.TokenBucket != nil:
			tb := c.TokenBucket
			if tb.MaxTokens == nil || tb.TokenRatio == nil {
				field := "budget.token_bucket.max_tokens"
				if tb.MaxTokens != nil {
					field = "budget.token_bucket.token_ratio"
				}
				b.problem(name, "budget.token_bucket", nil, "%s is missing; a token bucket needs max_tokens and token_ratio", field[strings.LastIndexByte(field, '.')+1:])
				return nil
			}
			p, err = budget.NewTokenBucket(*tb.MaxTokens, *tb.TokenRatio)
		default:
			r := c.Ratio
			p, err = budget.NewRatio(budget.RatioOptions{Ratio: floatp(r.Ratio), MinPerSecond: floatp(r.MinPerSecond), Window: durp(r.Window), Clock: b.o.Clock})
		}
	case StageRetry:
		c := s.Retry
		strat, ok := b.strategy(name, c)
		if !ok {
			return nil
		}
		if c.Attempts != nil && *c.Attempts < 1 {
			b.problem(name, "retry.attempts", nil, "is %d; want ≥ 1 (1 never retries)", *c.Attempts)
			return nil
		}
		var rt *retry.Retry
		rt, err = retry.New(retry.Options{MaxAttempts: intp(c.Attempts), Base: durp(c.Base), Cap: durp(c.Cap),
			Strategy: strat, MaxHintDelay: durp(c.MaxHint), Clock: b.o.Clock, Rand: b.o.Rand})
		p = rt
		if err == nil && c.MaxHint != nil && c.MaxHint.Off {
			p = &hintless{rt}
		}
	case StageHedge:
		c := s.Hedge
		p, err = retry.NewHedge(retry.HedgeOptions{MaxAttempts: intp(c.Attempts), Delay: durp(c.Delay), Clock: b.o.Clock})
	case StageThrottle:
		c := s.Throttle
		p, err = throttle.New(name, throttle.Options{K: floatp(c.K), Window: durp(c.Window), Clock: b.o.Clock, Rand: b.o.Rand})
	case StageBulkhead:
		c := s.Bulkhead
		if c.MaxQueue != nil && *c.MaxQueue < 0 {
			b.problem(name, "bulkhead.max_queue", nil, "is %d; want ≥ 0", *c.MaxQueue)
			return nil
		}
		p, err = bulkhead.New(name, bulkhead.Options{MaxConcurrent: intp(c.MaxConcurrent), MaxQueue: intp(c.MaxQueue), MaxWait: durp(c.MaxWait), Clock: b.o.Clock})
	case StageRateLimit:
		c := s.RateLimit
		if c.Rate == nil {
			b.problem(name, "rate_limit", nil, "rate is missing; want calls per second, e.g. rate: 100")
			return nil
		}
		mode := ratelimit.Wait
		if c.Mode != nil {
			switch *c.Mode {
			case "wait":
			case "refuse":
				mode = ratelimit.Refuse
			default:
				b.problem(name, "rate_limit.mode", nil, "is %q; want wait or refuse", *c.Mode)
				return nil
			}
		}
		p, err = ratelimit.New(name, ratelimit.Options{Rate: *c.Rate, Burst: intp(c.Burst), Mode: mode, MaxWait: durp(c.MaxWait), Clock: b.o.Clock})
	}
	if err != nil {
		b.refused(name, stage, err)
		return nil
	}
	return p
}

// Strategy names, as retry.strategy takes them.
var strategies = []string{"full", "equal", "decorrelated", "none", "grpc", "envoy"}

func (b *builder) strategy(name string, c *Retry) (retry.Strategy, bool) {
	s := "full"
	if c.Strategy != nil {
		s = *c.Strategy
	}
	if c.Multiplier != nil && s != "grpc" {
		b.problem(name, "retry.multiplier", nil, "applies to strategy grpc only (strategy is %s)", s)
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
	b.problem(name, "retry.strategy", nil, "is %q; want one of %s%s", s, strings.Join(strategies, ", "), suggest(s, strategies))
	return nil, false
}

// classification builds the stack's HTTP classifier and gRPC codes from its retry's
// (or hedge's, stage) statuses and codes.
func (b *builder) classification(st *stack, stage string, statuses []int, grpcCodes []string) {
	name := st.name
	if statuses != nil {
		set := make(map[int]bool)
		for i, code := range statuses {
			if code < 400 || code > 599 {
				b.problem(name, fmt.Sprintf("%s.http_statuses[%d]", stage, i), nil, "is %d; want a status from 400 to 599", code)
				continue
			}
			set[code] = true
		}
		st.classify = statusClassifier(set)
	}
	if grpcCodes != nil {
		st.codes = []codes.Code{}
		for i, name := range grpcCodes {
			var c codes.Code
			if err := c.UnmarshalJSON([]byte(fmt.Sprintf("%q", name))); err != nil || c == codes.OK {
				b.problem(st.name, fmt.Sprintf("%s.grpc_codes[%d]", stage, i), nil, "is %q; want a gRPC status code name other than OK, such as UNAVAILABLE", name)
				continue
			}
			st.codes = append(st.codes, c)
		}
	}
}
