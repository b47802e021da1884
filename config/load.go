package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyhttp"
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
	// clock.System(). Breakers read the system clock whatever it is.
	Clock clock.Clock
	// Rand is handed to every stage that draws jitter; nil means jitter.System().
	Rand jitter.Rand
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
	retried  retried // for explanations
}

// The reasons of a [Change].
const (
	StageChanged = "changed" // its settings changed: a new stage, fresh
	StageAdded   = "added"   // the stack did not have it
	StageRemoved = "removed" // the stack no longer has it
)

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
		return nil, &Error{Problems: []Problem{{Pos: Pos{File: path}, Msg: fmt.Sprintf("the file is larger than %d bytes", MaxFileSize),
			Fix: "keep it under 1 MiB: move the defaults' fields out of the stacks that repeat them"}}}
	}
	return b.Bytes(), nil
}

// Parse loads a configuration from data, YAML or JSON, naming it name in positions.
// It applies the environment overrides of o.Env, merges the defaults into every
// stack field by field, and checks every field. It checks every stack's order with
// policy.CheckPlacements (the rules and rule numbers of policy.Wrap), builds every
// stage with its package's constructor and every pipeline with policy.Wrap, and
// resolves the routes. A configuration with any problem is refused whole with an
// [*Error] listing every problem found, each at its file:line:column and field path.
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
			Msg: "a second YAML document", Fix: "remove the --- and what follows: a configuration file holds one document"}}}
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
	return Problem{Pos: Pos{File: file, Line: line, Column: 1}, Msg: "not YAML or JSON: " + msg,
		Fix: "correct the syntax on this line or the one above: indentation, a colon, a quote or a bracket", Err: err}
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
		b.d.problem(&yaml.Node{Line: 1, Column: 1}, "stacks", "the file names no stack", "add stacks: with one, such as stacks: {payments: {retry: {attempts: 3}}}")
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

// problem records what is wrong with a stack's field rel (msg) and its fix.
func (b *builder) problem(name, rel string, err error, msg, fix string) {
	pos, path := b.where(name, rel)
	b.d.probs = append(b.d.probs, Problem{Pos: pos, Path: path, Msg: msg, Fix: fix, Err: err})
}

// broken records a broken ordering rule at a stack's field rel.
func (b *builder) broken(name, rel, rule string, err error, msg, fix string) {
	pos, path := b.where(name, rel)
	b.d.probs = append(b.d.probs, Problem{Pos: pos, Path: path, Rule: rule, Msg: msg, Fix: fix, Err: err})
}

func (b *builder) stack(name string, s Stack) *stack {
	st := &stack{name: name, settings: s, stages: make(map[string]policy.Policy), prints: make(map[string]string)}
	before := len(b.d.probs)
	defs := b.order(name, s)
	for _, d := range defs {
		st.order = append(st.order, d.name)
	}
	// A refused order does not hide the stages' own problems: build them all.
	build := defs
	if len(b.d.probs) > before {
		build = configured(s)
	}
	var prev *stack
	if b.prev != nil {
		prev = b.prev.byName[name]
	}
	var ps []policy.Policy
	for _, d := range build {
		raw, _ := json.Marshal(d.settings(s))
		st.prints[d.name] = string(raw)
		if prev != nil && d.stateful && prev.prints[d.name] == st.prints[d.name] {
			st.stages[d.name] = prev.stages[d.name] // unchanged: keeps its state
			ps = append(ps, prev.stages[d.name])
			continue
		}
		p := b.stage(name, d, s)
		if p == nil {
			continue
		}
		if prev != nil {
			if old, ok := prev.prints[d.name]; !ok {
				b.changes = append(b.changes, Change{Stack: name, Stage: d.name, Reason: StageAdded})
			} else if old != st.prints[d.name] {
				b.changes = append(b.changes, Change{Stack: name, Stage: d.name, Reason: StageChanged, Kept: carryOver(prev.stages[d.name], p)})
			}
		}
		st.stages[d.name] = p
		ps = append(ps, p)
	}
	// Every stage's statuses and codes are checked; the first stage's are used.
	for _, d := range build {
		if d.classes == nil {
			continue
		}
		statuses, grpcCodes := d.classes(s)
		if r := b.classification(name, d.name, statuses, grpcCodes); st.retried.stage == "" {
			st.retried = r
			st.classify, st.codes = r.classify, r.codes
		}
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
	if streamed, ok := forStreams(defs, ps); ok {
		st.stream = b.wrap(name, streamed)
	}
	return st
}

// configured returns the stages s holds, in the canonical order.
func configured(s Stack) []*stageDef {
	var out []*stageDef
	for _, d := range stages {
		if d.on(s) {
			out = append(out, d)
		}
	}
	return out
}

// forStreams returns a stack's stages for gRPC streams, and whether they differ
// from the stack's: without the stages streams cannot use (a hedge), and without
// what stands only for a retry (a budget, a per-attempt timeout) when no retry is
// left.
func forStreams(defs []*stageDef, ps []policy.Policy) ([]policy.Policy, bool) {
	cut, retries := false, false
	for i, d := range defs {
		cut = cut || d.unstreamed
		retries = retries || !d.unstreamed && ps[i].Placement().OwnsRetries
	}
	if !cut {
		return nil, false
	}
	var out []policy.Policy
	for i, d := range defs {
		if d.unstreamed || !retries && forRetry(ps[i]) {
			continue
		}
		out = append(out, ps[i])
	}
	return out, true
}

// forRetry reports whether a stage stands only for a retry: one that stands inside
// it (O3), or a retry's budget (O4).
func forRetry(p policy.Policy) bool {
	pl := p.Placement()
	_, budget := p.(policy.RetryBudget)
	return pl.Retry == policy.InsideRetry || budget && pl.Retry == policy.OutsideRetry && !pl.Deadline
}

// opener is a stage that can be open: a breaker.
type opener interface {
	OpenNow() (time.Duration, bool)
	OpenUntil(time.Time)
}

// carryOver hands the state a replaced stage must not lose to its successor: a
// breaker that is open stays open until the old one would have let probes through,
// so that a reload never lets a flood through to a dependency that is down.
func carryOver(old, new policy.Policy) string {
	ob, ok1 := old.(opener)
	nb, ok2 := new.(opener)
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
		// CheckPlacements accepted the order; Wrap sees the objects too (O6).
		var oe *policy.OrderError
		if errors.As(err, &oe) {
			msg, fix := splitFix(oe.Msg)
			b.broken(name, "", oe.Rule, err, msg, fix)
		} else {
			b.problem(name, "", err, err.Error(), "leave order out for the canonical order")
		}
	}
	return p
}

// order works out a stack's stages, outermost first, and checks their placements
// with policy.CheckPlacements, placing a broken rule at the stage it names.
func (b *builder) order(name string, s Stack) []*stageDef {
	var order []*stageDef
	if s.Order == nil {
		order = configured(s)
	} else {
		seen := make(map[string]int)
		for i, stage := range s.Order {
			rel := fmt.Sprintf("order[%d]", i)
			d := stageNamed(stage)
			switch {
			case d == nil:
				b.problem(name, rel, nil, fmt.Sprintf("%q is not a stage", stage), oneOf(stage, stageNames()))
				continue
			case seen[stage] > 0:
				b.broken(name, rel, "O6", policy.ErrOrder, fmt.Sprintf("%s is listed at positions %d and %d", stage, seen[stage], i+1),
					"list it once: a stack has one of each stage")
				continue
			case !d.on(s):
				b.problem(name, rel, nil, stage+" is listed but not configured (or is disabled)",
					fmt.Sprintf("configure %s, or take it out of order", stage))
				continue
			}
			seen[stage] = i + 1
			order = append(order, d)
		}
		for _, d := range stages {
			if d.on(s) && seen[d.name] == 0 {
				b.problem(name, d.name, nil, fmt.Sprintf("%s is configured but not in stack %s's order", d.name, name),
					fmt.Sprintf("add %s to order, or disable it", d.name))
			}
		}
		if len(order) != len(s.Order) {
			return nil
		}
	}
	places := make([]policy.Placement, len(order))
	names := make([]string, len(order))
	for i, d := range order {
		places[i], names[i] = d.place(), d.name
	}
	if err := policy.CheckPlacements(places...); err != nil {
		var oe *policy.OrderError
		if errors.As(err, &oe) {
			rel := names[oe.First-1]
			if s.Order != nil {
				rel = fmt.Sprintf("order[%d]", indexOf(s.Order, rel))
			}
			msg, fix := splitFix(oe.Msg)
			if s.Order != nil {
				if canon := canonical(order); canon != "" {
					fix += ", as in order: [" + canon + "]"
				}
			}
			b.broken(name, rel, oe.Rule, err, stageWords(msg, names), fix)
		} else {
			b.problem(name, "", err, err.Error(), "leave order out for the canonical order")
		}
	}
	return order
}

// canonical returns the stages of order in the canonical order, "deadline,
// retry", if that obeys every rule; "" if it does not.
func canonical(order []*stageDef) string {
	var places []policy.Placement
	var names []string
	for _, d := range stages {
		if slices.Contains(order, d) {
			places = append(places, d.place())
			names = append(names, d.name)
		}
	}
	if policy.CheckPlacements(places...) != nil {
		return ""
	}
	return strings.Join(names, ", ")
}

// splitFix splits a rule's message, "what is wrong; the fix", in two. The fix is
// put in the file's words, not the Go constructors'.
func splitFix(msg string) (what, fix string) {
	what, fix, ok := strings.Cut(msg, "; ")
	if !ok {
		return msg, "reorder the stages as the rule says, or leave order out for the canonical order"
	}
	return what, strings.NewReplacer("deadline.NewPerAttempt", StageAttemptTimeout, "deadline.New", StageDeadline,
		"policy.RetryBudget", "a retry budget").Replace(fix)
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
	return fmt.Sprintf("%s (positions: %s)", msg, strings.Join(parts, ", "))
}

// stage builds one stage; nil after reporting a problem. A field written 0 is
// reported, and the stage still built, for the constructor to check the rest.
func (b *builder) stage(name string, d *stageDef, s Stack) policy.Policy {
	zero := b.zeroWritten(name, d, s)
	p, err := d.build(b, name, s)
	if err != nil {
		b.refused(name, d, err)
		return nil
	}
	if zero {
		return nil
	}
	return p
}

// refused reports a constructor's error at the field it names, each error of a
// joined one apart.
func (b *builder) refused(name string, d *stageDef, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			b.refused(name, d, e)
		}
		return
	}
	rel, msg, fix := d.translate(name, err)
	b.problem(name, rel, err, msg, fix)
}

// goWord matches an option's Go name in a constructor's message: "MaxAttempts",
// "HedgeOptions.MaxAttempts", "GRPC.Multiplier".
var goWord = regexp.MustCompile(`\b(?:[A-Z][A-Za-z]*\.)?[A-Za-z]+\b`)

// translate puts a constructor's error in the file's words: the field it names
// (rel, in the stack), what is wrong, and the fix with an example value. For
// "Cap is 1s, below Base 2s; want Cap ≥ Base" it returns "retry.cap",
// "is 1s, below base 2s" and "want cap ≥ base, such as cap: 5s".
func (d *stageDef) translate(name string, err error) (rel, msg, fix string) {
	text := err.Error()
	if _, rest, ok := strings.Cut(text, "invalid options: "); ok {
		text = rest
	}
	text = strings.TrimPrefix(text, name+": ")
	rel = d.name
	byGo := make(map[string]stageField)
	for _, f := range d.fields {
		if f.goName != "" {
			byGo[f.goName] = f
		}
	}
	first := true
	text = goWord.ReplaceAllStringFunc(text, func(w string) string {
		f, ok := byGo[w[strings.LastIndexByte(w, '.')+1:]]
		if !ok {
			return w
		}
		if first && f.name != "" {
			rel = d.name + "." + f.name
		}
		first = false
		return f.name[strings.LastIndexByte(f.name, '.')+1:]
	})
	what, want, ok := strings.Cut(text, "; want ")
	if !ok {
		what, want, _ = strings.Cut(text, "; ")
	} else {
		want = "want " + want
	}
	// The field's own name starts what is wrong; the problem's path says it.
	if leaf := rel[strings.LastIndexByte(rel, '.')+1:]; rel != d.name {
		what = strings.TrimPrefix(what, leaf+" ")
	}
	// A file says "the default" by leaving the field out, never by a 0.
	if i := strings.Index(want, ", or 0 for"); i >= 0 {
		want = want[:i]
	}
	if want == "" {
		want = "want a value"
	}
	return rel, what, want + suchRel(rel)
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
		b.problem(name, rel, nil, fmt.Sprintf("is %d", *p), "want ≥ 1"+suchRel(rel))
		return 0
	}
	return uint32(*p)
}

// zeroWritten reports a field of a stage written as 0 whose 0 would mean the default.
func (b *builder) zeroWritten(name string, d *stageDef, s Stack) bool {
	bad := false
	for field, get := range d.zeros {
		switch v := get(s).(type) {
		case *int:
			if v != nil && *v == 0 {
				b.problem(name, field, nil, "is 0", "leave it out for the default, or write a value"+suchRel(field))
				bad = true
			}
		case *float64:
			if v != nil && *v == 0 {
				b.problem(name, field, nil, "is 0", "leave it out for the default, or write a value"+suchRel(field))
				bad = true
			}
		}
	}
	return bad
}

// codeNames are the gRPC status codes as a file names them.
var codeNames = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// retried is what a stack's retry, or hedge, retries through the routes.
type retried struct {
	stage    string                // the stage: StageRetry or StageHedge
	classify policyhttp.Classifier // nil: policyhttp.DefaultClassifier
	codes    []codes.Code          // nil: policygrpc.DefaultRetryableCode
	statuses []int                 // the HTTP statuses retried, ascending
	names    []string              // the gRPC codes retried, as a file names them
}

// classification checks a stage's statuses and codes, and returns what they make
// the stage retry through the routes.
func (b *builder) classification(name, stage string, statuses []int, grpcCodes []string) retried {
	r := retried{stage: stage, statuses: defaultStatuses(), names: []string{"UNAVAILABLE"}}
	if statuses != nil {
		set := make(map[int]bool)
		for i, code := range statuses {
			if code < 400 || code > 599 {
				b.problem(name, fmt.Sprintf("%s.http_statuses[%d]", stage, i), nil, fmt.Sprintf("is %d", code), "want a status from 400 to 599, such as 503")
				continue
			}
			set[code] = true
		}
		r.classify = statusClassifier(set)
		r.statuses = slices.Sorted(maps.Keys(set))
	}
	if grpcCodes != nil {
		r.codes, r.names = []codes.Code{}, []string{}
		for i, code := range grpcCodes {
			var c codes.Code
			if err := c.UnmarshalJSON([]byte(fmt.Sprintf("%q", code))); err != nil || c == codes.OK {
				fix := "want a gRPC code other than OK, such as UNAVAILABLE"
				if n := meant(code, codeNames); n != "" && n != "OK" {
					fix = fmt.Sprintf("rename it %q", n)
				}
				b.problem(name, fmt.Sprintf("%s.grpc_codes[%d]", stage, i), nil, fmt.Sprintf("is %q", code), fix)
				continue
			}
			if !slices.Contains(r.codes, c) {
				r.codes, r.names = append(r.codes, c), append(r.names, code)
			}
		}
	}
	return r
}

// defaultStatuses are the statuses policyhttp.DefaultClassifier retries.
var defaultStatuses = sync.OnceValue(func() []int {
	var out []int
	for code := 400; code <= 599; code++ {
		err := policyhttp.DefaultClassifier(&http.Response{StatusCode: code, Header: http.Header{}}, time.Time{})
		if fault.Of(err).Retryable {
			out = append(out, code)
		}
	}
	return out
})
