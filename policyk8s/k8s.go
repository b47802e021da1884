package policyk8s

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
)

// The sources a [Route], [Budget] or [Policy] comes from.
const (
	SourceGatewayAPI = "gateway-api" // Gateway API HTTPRoute, GRPCRoute, XBackendTrafficPolicy
	SourceIstio      = "istio"       // Istio VirtualService, DestinationRule
	SourceLinkerd    = "linkerd"     // Linkerd's annotations on routes and Services
)

// Set is what [Parse] or [Load] read: every route rule, every policy, and a note for
// each document read but not used. Its fields are in the input's order, file by file.
type Set struct {
	// Routes are the route rules that send requests to a backend: one per HTTPRoute
	// or GRPCRoute rule, one per VirtualService http entry.
	Routes []*Route
	// Policies are the BackendTrafficPolicies and DestinationRules, and the Services
	// carrying Linkerd's retry or timeout annotations.
	Policies []*Policy
	// Notes are the documents skipped (another kind, not a Kubernetes object) and
	// what a source ignores as written, placed.
	Notes []Note
}

// Note is something read and not used: a kind skipped, a field a source ignores.
type Note struct {
	File         string
	Line, Column int
	Msg          string
}

// String returns "file:line:column: message".
func (n Note) String() string { return fmt.Sprintf("%s:%d:%d: %s", n.File, n.Line, n.Column, n.Msg) }

// Match is one way a route rule picks requests, in the source's words. The zero
// value matches every request.
type Match struct {
	// PathType is how Path matches: Gateway API's "Exact", "PathPrefix" or
	// "RegularExpression"; Istio's uri "exact", "prefix" or "regex".
	PathType, Path string
	// Method is the HTTP method matched; "" for any.
	Method string
	// Service and GRPCMethod are a GRPCRoute's method match; "" for any.
	Service, GRPCMethod string
	// Others names the other matchers set ("headers", "queryParams", …), which no
	// path pattern can say.
	Others []string
}

// Budget is a retry budget: a share of the requests to a backend that retries may
// be. The zero value is no budget.
type Budget struct {
	// Percent is the share of active requests that may be retries, 0 to 100.
	Percent float64
	// Interval is the window the share is counted over; 0 (Istio's default) counts
	// only the requests in flight.
	Interval time.Duration
	// MinRetryRate is the retries per second allowed whatever the share says
	// (Gateway API's minRetryRate, count over interval); 0 for none.
	MinRetryRate float64
	// MinRetryConcurrency is the retries allowed in flight whatever the share says
	// (Istio's minRetryConcurrency); 0 for none.
	MinRetryConcurrency int
	// Source is where it comes from; File, Line and Column where it is written.
	Source, File string
	Line, Column int
}

// MarshalJSON writes the budget with snake_case keys and the interval in seconds,
// as the rest of an explanation.
func (b *Budget) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Percent             float64 `json:"percent"`
		IntervalSeconds     float64 `json:"interval_seconds"`
		MinRetryRate        float64 `json:"min_retry_rate"`
		MinRetryConcurrency int     `json:"min_retry_concurrency"`
		Source              string  `json:"source"`
		File                string  `json:"file"`
		Line                int     `json:"line"`
		Column              int     `json:"column"`
	}{b.Percent, b.Interval.Seconds(), b.MinRetryRate, b.MinRetryConcurrency, b.Source, b.File, b.Line, b.Column})
}

// Route is one route rule: how the mesh or gateway retries and times out the
// requests it matches. Read it as a value; it is safe for concurrent reads.
type Route struct {
	// Source is SourceGatewayAPI, SourceIstio or SourceLinkerd (a Gateway API route
	// that Linkerd's annotations, its own or its parent Service's, configure).
	// Kind is "HTTPRoute", "GRPCRoute" or "VirtualService".
	Source, Kind, Namespace, Name string
	// Rule is the index of the rule (spec.rules) or http entry (spec.http).
	Rule int
	// File, Line and Column are where the rule is written.
	File         string
	Line, Column int
	// Hosts are the route's hostnames (Gateway API) or hosts (Istio), as written.
	Hosts []string
	// ParentRefs are what the route attaches to: Gateway API parentRefs as
	// "name", "namespace/name" or "Kind/name" for another kind than Gateway
	// ("Service/api" for a mesh route); Istio's gateways, "mesh" for the sidecars
	// when the VirtualService names none.
	ParentRefs []string
	// Backends are the destination Services, "name" or "name.namespace" as
	// written (Istio: the destination host as written).
	Backends []string
	// Matches are the rule's matches; one that matches every path when the rule
	// has none, as every source reads it.
	Matches []Match
	// Tries is how many tries a request makes at this layer, the first included:
	// 1 is no retry. 0 means the source leaves it to the implementation (a Gateway
	// API retry without attempts).
	Tries int
	// RetryOn are the conditions or codes retried, in the source's words.
	RetryOn []string
	// PerTryTimeout bounds each try and Timeout the whole request, retries and
	// waits included; 0 for none.
	PerTryTimeout, Timeout time.Duration
	// Backoff is the base back-off between tries; 0 when the source sets none or
	// leaves it to the implementation (Defaults says which, and doc.go each
	// source's default).
	Backoff time.Duration
	// Budget is the retry budget bounding the route's retries: the first policy
	// attached to one of its backends that has one. nil for none.
	Budget *Budget
	// Policies are the policies attached to the route's backends, in load order.
	Policies []*Policy
	// Defaults names each field the rule leaves out whose value is the source's
	// default or the implementation's, in the source's words ("retries",
	// "retry.attempts", "timeout").
	Defaults []string
	// Unsupported names each field set that the mesh honours and Backstop cannot
	// carry ("fault", "retries.retryRemoteLocalities",
	// "timeout.linkerd.io/idle").
	Unsupported []string
	// InheritedFrom names the Service whose Linkerd annotations the route takes
	// ("Service default/api"), its own having none of that kind; "" otherwise.
	InheritedFrom string

	grpc     bool                                     // a GRPCRoute
	pos      map[string]pos                           // the rule's fields, by path from the rule
	docPos   map[string]pos                           // the document's metadata and spec fields, by path from the root
	services []string                                 // the backends as fully qualified Service names
	parents  []string                                 // parent Services, fully qualified, of a mesh route
	build    func(*Route, map[string]string, *Policy) // re-reads Linkerd's annotations
}

// Position returns where one of the route's fields is written, named as the source
// spells it from the rule: "retry.attempts", "timeouts.request",
// "retries.perTryTimeout", "matches[0].path"; an annotation by its name
// ("retry.linkerd.io/limit"); a field of the document from its root
// ("metadata.name", "spec.hosts"). A field the rule leaves out gives the position
// of the deepest field above it that is written, "" the rule's own.
func (r *Route) Position(field string) (line, col int) {
	if strings.Contains(field, ".linkerd.io/") {
		if p, ok := r.docPos[formatPath([]pathElem{key("metadata"), key("annotations"), key(field)})]; ok {
			return p.line, p.col
		}
		if p, ok := r.docPos["metadata.annotations"]; ok {
			return p.line, p.col
		}
		return r.Line, r.Column
	}
	if strings.HasPrefix(field, "metadata.") || strings.HasPrefix(field, "spec.") {
		for f := field; f != ""; f = parent(f) {
			if p, ok := r.docPos[f]; ok {
				return p.line, p.col
			}
		}
		return r.Line, r.Column
	}
	for f := field; f != ""; f = parent(f) {
		if p, ok := r.pos[f]; ok {
			return p.line, p.col
		}
	}
	return r.Line, r.Column
}

// parent cuts the last step off a field path: "a.b[2]" → "a.b", "a.b" → "a".
func parent(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}

// AttemptsAtMost is the most tries a request makes at this layer, the first
// included — what a lint multiplies along a call path. It is Tries; 0 when the
// source leaves the count to the implementation.
func (r *Route) AttemptsAtMost() int { return r.Tries }

// WorstCase is how long a request can take at this layer when every try runs out
// its per-try timeout and every wait between tries is its longest: the Timeout, or
// less when the tries and waits end sooner. 0 means unbounded: no timeout, and a
// try or a wait without a bound.
func (r *Route) WorstCase() time.Duration {
	tries := r.Tries
	bounded := r.PerTryTimeout > 0 && tries > 0
	var sum time.Duration
	if bounded {
		var waits time.Duration
		waits, bounded = r.waits(tries - 1)
		sum = addSat(mulSat(r.PerTryTimeout, int64(tries)), waits)
	}
	switch {
	case r.Timeout > 0 && bounded:
		return min(r.Timeout, sum)
	case r.Timeout > 0:
		return r.Timeout
	case bounded:
		return sum
	}
	return 0
}

// waits is the longest the waits before retries 1 to n can add up to; false when
// the source does not bound them.
func (r *Route) waits(n int) (time.Duration, bool) {
	switch {
	case n <= 0:
		return 0, true
	case r.Source == SourceLinkerd:
		// retry n waits up to 2^(n−1) × LinkerdBackoff, at most LinkerdMaxBackoff.
		var sum time.Duration
		for i := 1; i <= n; i++ {
			sum = addSat(sum, min(mulSat(LinkerdBackoff, int64(1)<<min(i-1, 20)), LinkerdMaxBackoff))
		}
		return sum, true
	case r.Source == SourceIstio:
		// Envoy's back-off: retry n waits up to (2^n − 1) × base, at most 10 × base:
		// 1, 3 and 7 × base, then 10 × base each.
		var sum time.Duration
		for i := 1; i <= min(n, 3); i++ {
			sum = addSat(sum, mulSat(r.Backoff, int64(1)<<i-1))
		}
		if n > 3 {
			sum = addSat(sum, mulSat(mulSat(r.Backoff, 10), int64(n-3)))
		}
		return sum, true
	}
	// The Gateway API's backoff is a minimum: an implementation may wait longer.
	return 0, false
}

// mulSat returns d × n, at most the longest duration.
func mulSat(d time.Duration, n int64) time.Duration {
	if n != 0 && d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// addSat returns a + b, at most the longest duration.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Parse reads one file of Kubernetes manifests — multi-document YAML, or JSON —
// named name in positions. It reads each document on its own: the Gateway API's
// HTTPRoute and GRPCRoute (gateway.networking.k8s.io) and XBackendTrafficPolicy
// (gateway.networking.x-k8s.io), Istio's VirtualService and DestinationRule
// (networking.istio.io), Linkerd's annotations on those routes and on Services, and
// List objects of them. Another kind is skipped with a [Note].
//
// Every problem is reported, not only the first: a [*ConfigError] for one, several
// joined with errors.Join, in the order of the input, each matching [ErrInvalid]
// and placed at file:line:column. A YAML syntax error stops the file's reading. On
// error the Set is nil.
func Parse(name string, data []byte) (*Set, error) {
	r := newReader()
	r.stream(name, bytes.NewReader(data), func() []byte { return data })
	return r.finish()
}

// Load reads a file as [Parse] does, or a directory: every *.yaml, *.yml and *.json
// file under it, recursively, in lexical order. It reads one document at a time,
// keeping only what it returns, so a directory of many manifests takes memory in
// proportion to its routes and policies, not its size. Problems of every file are
// reported together.
func Load(path string) (*Set, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var files []string
	if info.IsDir() {
		err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && manifestFile(p) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		files = []string{path}
	}
	r := newReader()
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		r.stream(p, bufio.NewReader(f), func() []byte {
			data, _ := os.ReadFile(p)
			return data
		})
		f.Close()
	}
	return r.finish()
}

func manifestFile(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// reader reads documents into a Set.
type reader struct {
	set *Set
	ps  problems
}

func newReader() *reader { return &reader{set: &Set{}} }

// stream reads every document of one file; reread returns the whole file, to place
// a syntax error the YAML reader names by its line only.
func (r *reader) stream(name string, in io.Reader, reread func() []byte) {
	dec := yaml3.NewDecoder(in)
	for !r.ps.full() {
		var doc yaml3.Node
		err := decode(dec, &doc)
		if err == io.EOF {
			return
		}
		if err != nil {
			r.ps.add(yamlError(name, err, reread))
			return
		}
		r.document(name, &doc)
	}
}

// decode reads one document, turning a panic of the YAML reader into an error.
func decode(dec *yaml3.Decoder, n *yaml3.Node) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("yaml: %v", p)
		}
	}()
	return dec.Decode(n)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError places an error of the YAML reader: "yaml: line 3: …" at the line's
// first character that is not a space.
func yamlError(name string, err error, reread func() []byte) *ConfigError {
	msg := err.Error()
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return &ConfigError{File: name, Msg: "YAML: " + strings.TrimPrefix(msg, "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	if parserError(m[2]) {
		// The parser names the line, counted from 0, of the block it was reading.
		line++
		if strings.HasPrefix(m[2], "did not find expected") && !strings.Contains(m[2], "<document start>") {
			m[2] += " (in the block that starts here)"
		}
	}
	lines := strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(reread())), "\n")
	line = max(min(line, len(lines)), 1)
	col := 1
	if line <= len(lines) {
		l := lines[line-1]
		col = len([]rune(l)) - len([]rune(strings.TrimLeft(l, " \t"))) + 1
	}
	return &ConfigError{File: name, Line: line, Column: col, Msg: "YAML: " + m[2]}
}

// parserError reports whether msg is an error of the YAML parser, which names its
// line from 0, rather than of its scanner, which names it from 1.
func parserError(msg string) bool {
	for _, p := range []string{"did not find expected key", "did not find expected '-' indicator", "did not find expected ',' or",
		"did not find expected node content", "did not find expected <document start>", "found duplicate %", "found incompatible YAML document"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// document reads one document.
func (r *reader) document(file string, doc *yaml3.Node) {
	root := doc
	if doc.Kind == yaml3.DocumentNode {
		if len(doc.Content) == 0 {
			return
		}
		root = doc.Content[0]
	}
	r.object(file, root, 0)
}

// object reads one Kubernetes object; depth counts the Lists it is in.
func (r *reader) object(file string, root *yaml3.Node, depth int) {
	root = deref(root)
	if root == nil || isNull(root) {
		return // an empty document: a lone "---", or only comments
	}
	if root.Kind != yaml3.MappingNode {
		r.note(file, root, "not a Kubernetes object (%s): skipped", describeKind(root))
		return
	}
	apiVersion, kind := scalarOf(child(root, "apiVersion")), scalarOf(child(root, "kind"))
	if kind == "" {
		r.note(file, root, "not a Kubernetes object (no kind): skipped")
		return
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = "" // core: "v1"
	}
	if kind == "List" || strings.HasSuffix(kind, "List") && child(root, "items") != nil {
		items := child(root, "items")
		if items == nil || items.Kind != yaml3.SequenceNode || depth > 10 {
			r.note(file, root, "%s without a list of items: skipped", kind)
			return
		}
		for _, it := range items.Content {
			r.object(file, it, depth+1)
		}
		return
	}
	w := &walker{file: file, ps: &r.ps}
	switch {
	case group == "gateway.networking.k8s.io" && (kind == "HTTPRoute" || kind == "GRPCRoute"):
		r.gatewayRoute(w, root, kind)
	case group == "policy.linkerd.io" && (kind == "HTTPRoute" || kind == "GRPCRoute"):
		r.gatewayRoute(w, root, kind)
	case group == "gateway.networking.x-k8s.io" && (kind == "XBackendTrafficPolicy" || kind == "BackendTrafficPolicy"):
		r.backendTrafficPolicy(w, root, kind)
	case group == "networking.istio.io" && kind == "VirtualService":
		r.virtualService(w, root)
	case group == "networking.istio.io" && kind == "DestinationRule":
		r.destinationRule(w, root)
	case group == "" && kind == "Service":
		r.service(w, root)
	default:
		groups := map[string]string{"HTTPRoute": "gateway.networking.k8s.io or policy.linkerd.io", "GRPCRoute": "gateway.networking.k8s.io or policy.linkerd.io",
			"XBackendTrafficPolicy": "gateway.networking.x-k8s.io", "BackendTrafficPolicy": "gateway.networking.x-k8s.io",
			"VirtualService": "networking.istio.io", "DestinationRule": "networking.istio.io"}
		if want, ok := groups[kind]; ok {
			r.note(file, root, "%s %s %s: skipped: policyk8s reads %s of the API group %s, not %q", kind, apiVersion, objectName(root), kind, want, group)
			return
		}
		r.note(file, root, "%s %s %s: skipped: not a kind policyk8s reads (HTTPRoute, GRPCRoute, XBackendTrafficPolicy, VirtualService, DestinationRule)",
			kind, apiVersion, objectName(root))
	}
}

func describeKind(n *yaml3.Node) string {
	if n.Kind == yaml3.SequenceNode {
		return "a list"
	}
	return describe(n)
}

func scalarOf(n *yaml3.Node) string {
	if n == nil || n.Kind != yaml3.ScalarNode {
		return ""
	}
	return n.Value
}

// objectName returns "namespace/name" or "name" as metadata says.
func objectName(root *yaml3.Node) string {
	md := child(root, "metadata")
	ns, name := scalarOf(child(md, "namespace")), scalarOf(child(md, "name"))
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (r *reader) note(file string, n *yaml3.Node, format string, args ...any) {
	nt := Note{File: file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		nt.Line, nt.Column = n.Line, n.Column
	}
	r.set.Notes = append(r.set.Notes, nt)
}

// fail reports a problem at node n, at path from the document's root.
func (r *reader) fail(file string, n *yaml3.Node, path []pathElem, format string, args ...any) {
	e := &ConfigError{File: file, Path: formatPath(path), Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	r.ps.add(e)
}

// finish attaches policies to the routes and returns the Set, or every problem.
func (r *reader) finish() (*Set, error) {
	if err := r.ps.err(); err != nil {
		return nil, err
	}
	set := r.set
	services := map[string][]*Policy{}
	for _, p := range set.Policies {
		for _, s := range p.services {
			services[s] = append(services[s], p)
		}
	}
	// A Service with Linkerd's retry annotations and no route attached to it: Linkerd
	// applies them to all traffic to the Service, its default route.
	parented := map[string]bool{}
	for _, rt := range set.Routes {
		for _, s := range rt.parents {
			parented[s] = true
		}
	}
	for _, p := range set.Policies {
		if p.Kind != "Service" || p.Source != SourceLinkerd || !hasAny(p.annotations, linkerdRetry) || parented[p.services[0]] {
			continue
		}
		rt := &Route{Source: SourceLinkerd, Kind: "Service", Namespace: p.Namespace, Name: p.Name, File: p.File,
			Line: p.Line, Column: p.Column, ParentRefs: []string{"Service/" + p.Name}, Backends: []string{p.Name},
			Matches: []Match{{PathType: "PathPrefix", Path: "/"}}, Tries: 1, docPos: p.pos, pos: map[string]pos{},
			parents: p.services, services: p.services}
		r.linkerd(nil, rt, p.annotations, nil, nil, nil)
		set.Routes = append(set.Routes, rt)
	}
	for _, rt := range set.Routes {
		// Linkerd's annotations on a parent Service, for a route without its own.
		if rt.build != nil {
			for _, s := range rt.parents {
				for _, p := range services[s] {
					if p.Kind == "Service" && p.Source == SourceLinkerd {
						rt.build(rt, p.annotations, p)
					}
				}
			}
		}
		targets := rt.services
		if len(targets) == 0 {
			targets = rt.parents
		}
		for _, s := range targets {
			for _, p := range services[s] {
				if p.Kind == "Service" || slices.Contains(rt.Policies, p) {
					continue
				}
				rt.Policies = append(rt.Policies, p)
				if rt.Budget == nil && p.Budget != nil {
					rt.Budget = p.Budget
				}
			}
		}
	}
	return set, nil
}

// fqdn returns a Service's fully qualified name, host as written in namespace ns:
// "api" → "api.ns.svc.cluster.local", "api.other" → "api.other.svc.cluster.local".
func fqdn(host, ns string) string {
	if ns == "" {
		ns = "default"
	}
	switch strings.Count(host, ".") {
	case 0:
		return host + "." + ns + ".svc.cluster.local"
	case 1:
		return host + ".svc.cluster.local"
	}
	if strings.HasSuffix(host, ".svc") {
		return host + ".cluster.local"
	}
	return host
}
