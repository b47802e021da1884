package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backstop-go/backstop/config"
)

// Layers of a call path, outermost first: a request from a user passes a gateway,
// reaches an app, and the app's call to its dependency passes the app's sidecar.
const (
	layerGateway = iota // an ingress gateway's route: it sends the user's request to an app
	layerApp            // the app's own stacks: Backstop's, or a gRPC service config's
	layerSidecar        // the mesh beneath the app: an Envoy, Istio or Linkerd route to the dependency
)

var layerNames = [...]string{"gateway", "app", "sidecar"}

// hop is one layer of a call path: a route of a gateway or of the mesh, or a stack of
// an app, with the requests it sends on and how many times it may send each.
type hop struct {
	layer  int
	source string // "backstop", "envoy", "grpc", "gateway-api", "istio", "linkerd"
	// what names it in its own words: `route "prefix /api"`, `stack payments`,
	// `HTTPRoute shop/web rules[0]`.
	what string
	// pos is where its retry is written (where it is, if it does not retry).
	pos config.Pos
	// field is the field at pos, as its source spells it.
	field string
	// hosts are the hosts or Services it sends to; nil is every host.
	hosts []string
	// paths are the paths it matches; nil is every path.
	paths []pathMatch
	// vague reports that its match is unknown (an Envoy route read without match):
	// whether it is on a call path cannot be told.
	vague bool
	// tries is the most times it sends one request, the first included.
	tries int
	// wait is how long its caller's one try waits at most: its timeout, else its
	// worst case; 0 if nothing bounds it.
	wait time.Duration
	// perTry is each try's own timeout (0: none), worst its worst case (0: unbounded).
	perTry, worst time.Duration
	// drop says how to stop it retrying, in its source's words.
	drop string
}

// pathMatch is a path a hop matches: the path itself, or every path under prefix.
type pathMatch struct {
	path   string
	prefix bool
}

// overlaps reports whether some path matches both.
func (a pathMatch) overlaps(b pathMatch) bool {
	switch {
	case a.prefix && b.prefix:
		return strings.HasPrefix(a.path, b.path) || strings.HasPrefix(b.path, a.path)
	case a.prefix:
		return strings.HasPrefix(b.path, a.path)
	case b.prefix:
		return strings.HasPrefix(a.path, b.path)
	}
	return a.path == b.path
}

// pathsOverlap reports whether some path matches both lists (nil: every path).
func pathsOverlap(a, b []pathMatch) bool {
	if a == nil || b == nil {
		return true
	}
	for _, p := range a {
		for _, q := range b {
			if p.overlaps(q) {
				return true
			}
		}
	}
	return false
}

// hostsOverlap reports whether a request can go to a host of both lists (nil: every
// host). A Kubernetes Service is the same whether it is written "name",
// "name.namespace", "name.namespace.svc" or "name.namespace.svc.cluster.local"; a
// leading "*." matches one or more labels.
func hostsOverlap(a, b []string) bool {
	if a == nil || b == nil {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			if sameHost(x, y) {
				return true
			}
		}
	}
	return false
}

func sameHost(a, b string) bool {
	a, b = hostKey(a), hostKey(b)
	switch {
	case a == "*" || b == "*" || a == b:
		return true
	case strings.HasPrefix(a, "*."):
		return strings.HasSuffix(b, a[1:])
	case strings.HasPrefix(b, "*."):
		return strings.HasSuffix(a, b[1:])
	}
	// a short Service name against a qualified one: "orders" is "orders.shop".
	ah, _, aq := strings.Cut(a, ".")
	bh, _, bq := strings.Cut(b, ".")
	return ah == bh && (!aq || !bq)
}

// wildHost reports whether h stands for more than one host: "*" or "*.example.com".
func wildHost(h string) bool { return strings.HasPrefix(h, "*") }

// hostLabel is the first label of a host's key: "orders" for
// "orders.shop.svc.cluster.local", as sameHost compares Services.
func hostLabel(h string) string {
	l, _, _ := strings.Cut(hostKey(h), ".")
	return l
}

// hostKey is a host without its port and cluster suffix, in lower case.
func hostKey(h string) string {
	h = strings.ToLower(h)
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".cluster.local")
	return strings.TrimSuffix(h, ".svc")
}

// muxPattern splits a ServeMux pattern, "[METHOD ][HOST]/[PATH]", into its host ("" for
// any) and what it matches: the path, or what is under it when it ends in "/" or a
// {name...} wildcard. A {name} segment matches as a prefix up to it.
func muxPattern(p string) (host string, m pathMatch) {
	if i := strings.IndexByte(p, ' '); i >= 0 {
		p = strings.TrimLeft(p[i+1:], " \t")
	}
	slash := strings.IndexByte(p, '/')
	if slash < 0 {
		return p, pathMatch{path: "/", prefix: true}
	}
	host, p = p[:slash], p[slash:]
	if i := strings.IndexByte(p, '{'); i >= 0 {
		if strings.HasSuffix(p, "{$}") {
			return host, pathMatch{path: p[:len(p)-3]}
		}
		return host, pathMatch{path: p[:i], prefix: true}
	}
	return host, pathMatch{path: p, prefix: strings.HasSuffix(p, "/")}
}

// grpcMatch is what a gRPC route name ("pkg.Service/Method", "pkg.Service", "" for
// every method) matches, as an HTTP/2 path.
func grpcMatch(name string) []pathMatch {
	switch {
	case name == "":
		return nil
	case strings.Contains(name, "/"):
		return []pathMatch{{path: "/" + strings.TrimPrefix(name, "/")}}
	}
	return []pathMatch{{path: "/" + name + "/", prefix: true}}
}

// configHops are a configuration's stacks as hops: one for each route of its HTTP and
// gRPC routing tables, at the layer of its format (an Envoy route is the sidecar's).
func configHops(src *source) []hop {
	c := src.config
	e := c.Explain()
	stacks := make(map[string]config.StackExplanation, len(e.Stacks))
	for _, se := range e.Stacks {
		stacks[se.Name] = se
	}
	var hops []hop
	add := func(stack string, hosts []string, paths []pathMatch, vague bool) {
		se, ok := stacks[stack]
		if !ok {
			return
		}
		h := stackHop(src, se)
		h.hosts, h.paths, h.vague = hosts, paths, h.vague || vague
		hops = append(hops, h)
	}
	for _, r := range e.HTTP {
		if r.Match == "" {
			add(r.Stack, nil, nil, false)
			continue
		}
		host, m := muxPattern(r.Match)
		var hosts []string
		if host != "" {
			hosts = []string{host}
		}
		add(r.Stack, hosts, []pathMatch{m}, false)
	}
	for _, r := range e.GRPC {
		add(r.Stack, nil, grpcMatch(r.Match), false)
	}
	// An imported stack no route names (an Envoy route read without match, a
	// methodConfig entry) is still a hop: on every path, vaguely for a route.
	named := make(map[string]bool)
	for _, h := range hops {
		named[h.what] = true
	}
	for _, se := range e.Stacks {
		o, ok := c.Origin(se.Name)
		if !ok {
			continue
		}
		h := stackHop(src, se)
		if named[h.what] {
			continue
		}
		switch o.Format {
		case config.FormatEnvoy:
			h.hosts = o.Route.Domains
		case config.FormatGRPC:
			for _, n := range o.Entry.Names {
				h.paths = append(h.paths, grpcMatch(strings.TrimPrefix(n, "/"))...)
			}
		}
		hops = append(hops, h)
	}
	return hops
}

// stackHop is one stack as a hop, without its match.
func stackHop(src *source, se config.StackExplanation) hop {
	c, e := src.config, se.Explanation
	s, _ := c.Settings(se.Name)
	h := hop{layer: layerApp, source: src.format, what: "stack " + se.Name, tries: e.MaxAttempts}
	if e.WorstCaseFrom != "" {
		h.worst = e.WorstCase
	}
	if s.AttemptTimeout != nil && !s.AttemptTimeout.Off {
		h.perTry = s.AttemptTimeout.D
	}
	h.wait = h.worst
	if s.Deadline != nil && !s.Deadline.Off {
		h.wait = s.Deadline.D
	}
	retryField := "retry"
	if slices.Contains(se.Order, "hedge") {
		retryField = "hedge"
	}
	h.drop = fmt.Sprintf("drop stack %s's %s", se.Name, retryField)
	if o, ok := c.Origin(se.Name); ok {
		h.field, h.pos = o.Field(retryField)
		switch o.Format {
		case config.FormatEnvoy:
			h.layer, h.what = layerSidecar, fmt.Sprintf("route %q", o.Route.Name)
			h.drop = fmt.Sprintf("drop route %q's retry_policy", o.Route.Name)
			// A route: block pasted without match, or a bare RouteAction: where it
			// stands in Envoy's routing is unknown.
			h.vague = o.Route.Domains == nil && o.Route.Name == "route"
		case config.FormatGRPC:
			h.what = "gRPC " + strings.Join(o.Entry.Names, ", ")
			h.drop = fmt.Sprintf("drop the retryPolicy of %s", h.what)
		}
		return h
	}
	h.pos, h.field = positionOf(c, se.Name, retryField)
	return h
}

// callPath is one path a request can take through the hops given: at most one of
// each layer, outermost first.
type callPath struct {
	hops []hop
	// vague reports that the hops may not share the path: a hop's match is unknown,
	// or a gateway's route reaches the mesh only if the gateway is in it.
	vague bool
}

// attempts is the most requests one user request makes at the innermost hop: every
// layer's tries multiply.
func (p callPath) attempts() int {
	n := 1
	for _, h := range p.hops {
		n *= max(h.tries, 1)
	}
	return n
}

// owners are the hops that retry.
func (p callPath) owners() []hop {
	var out []hop
	for _, h := range p.hops {
		if h.tries > 1 {
			out = append(out, h)
		}
	}
	return out
}

// String names the hops: `gateway HTTPRoute shop/web rules[0] (3 tries) -> app stack
// orders (3 tries)`.
func (p callPath) String() string {
	parts := make([]string, len(p.hops))
	for i, h := range p.hops {
		parts[i] = fmt.Sprintf("%s %s (%s)", layerNames[h.layer], h.what, triesText(h.tries))
	}
	return strings.Join(parts, " -> ")
}

// callPaths finds the call paths of hops with more than one layer. A gateway's route
// is upstream of the app when it sends to the app's Service (service, from
// -service); any other is upstream of the mesh's routes to where it sends, if the
// gateway is in the mesh. The app's stacks are upstream of the sidecar's routes to
// the hosts and paths they call.
func callPaths(hops []hop, service string) []callPath {
	var gates, apps, sides []hop
	for _, h := range hops {
		switch h.layer {
		case layerGateway:
			gates = append(gates, h)
		case layerApp:
			apps = append(apps, h)
		case layerSidecar:
			sides = append(sides, h)
		}
	}
	// The sidecar's routes by the first label of each host they serve, so that a
	// path is found without comparing every route with every other; a route for
	// every host, or a wildcard one, is a candidate always.
	byLabel, always := map[string][]int{}, []int(nil)
	for i, s := range sides {
		if s.hosts == nil || slices.ContainsFunc(s.hosts, wildHost) {
			always = append(always, i)
			continue
		}
		for _, h := range s.hosts {
			l := hostLabel(h)
			if ids := byLabel[l]; len(ids) == 0 || ids[len(ids)-1] != i {
				byLabel[l] = append(byLabel[l], i)
			}
		}
	}
	beneath := func(up hop) []hop {
		var ids []int
		if up.hosts == nil || slices.ContainsFunc(up.hosts, wildHost) {
			ids = make([]int, len(sides))
			for i := range sides {
				ids[i] = i
			}
		} else {
			ids = append(ids, always...)
			for _, h := range up.hosts {
				ids = append(ids, byLabel[hostLabel(h)]...)
			}
			slices.Sort(ids)
			ids = slices.Compact(ids)
		}
		var out []hop
		for _, i := range ids {
			if s := sides[i]; hostsOverlap(up.hosts, s.hosts) && pathsOverlap(up.paths, s.paths) {
				out = append(out, s)
			}
		}
		return out
	}
	var paths []callPath
	var front []hop // the gateway routes that send to the app
	if service != "" {
		for _, g := range gates {
			if hostsOverlap(g.hosts, []string{service}) && g.hosts != nil {
				front = append(front, g)
			}
		}
	}
	seen := make(map[string]bool)
	for _, a := range apps {
		ups, downs := ptrs(front), ptrs(beneath(a))
		if ups == nil {
			ups = []*hop{nil}
		}
		if downs == nil {
			downs = []*hop{nil}
		}
		for _, g := range ups {
			for _, s := range downs {
				p := callPath{vague: a.vague}
				if g != nil {
					p.hops = append(p.hops, *g)
				}
				p.hops = append(p.hops, a)
				if s != nil {
					p.hops = append(p.hops, *s)
					p.vague = p.vague || s.vague
				}
				if key := p.key(); len(p.hops) > 1 && !seen[key] {
					seen[key] = true
					paths = append(paths, p)
				}
			}
		}
	}
	// A gateway's route to another Service meets the mesh's routes to it if the
	// gateway is in the mesh.
	for _, g := range gates {
		if slices.ContainsFunc(front, func(f hop) bool { return f.what == g.what && f.pos == g.pos }) {
			continue
		}
		for _, s := range beneath(g) {
			paths = append(paths, callPath{hops: []hop{g, s}, vague: true})
		}
	}
	return paths
}

// triesText is "1 try", "3 tries".
func triesText(n int) string {
	if n <= 1 {
		return "1 try"
	}
	return fmt.Sprintf("%d tries", n)
}

// key names the path's hops, to report a path once however many routes lead to it.
func (p callPath) key() string {
	var b strings.Builder
	for _, h := range p.hops {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00", h.source, h.pos.File, h.what)
	}
	return b.String()
}

// ptrs points at each hop; nil for none.
func ptrs(hs []hop) []*hop {
	if len(hs) == 0 {
		return nil
	}
	out := make([]*hop, len(hs))
	for i := range hs {
		out[i] = &hs[i]
	}
	return out
}

// keeper is the owner a call path should keep: the app's, which sees Retry-After and
// pushback, knows what is idempotent and has its budget; else the innermost, nearest
// the dependency.
func keeper(owners []hop) hop {
	for _, h := range owners {
		if h.layer == layerApp {
			return h
		}
	}
	return owners[len(owners)-1]
}

// paths reports each call path with more than one layer: its owners, and the most
// attempts per user request (info, call-path); two owners on one path (two-owners,
// or maybe-two-owners when the path is not sure), with the owner to keep; and an
// outer layer that gives up on a try while the layer beneath still retries
// (path-timeouts).
func (l *linter) paths(hops []hop) {
	for _, p := range callPaths(hops, l.service) {
		owners := p.owners()
		first := p.hops[0]
		l.add("call-path", first.pos.File, first.pos.Line, first.pos.Column, first.what, first.field, pathFix(owners),
			"call path %s: %s per user request at most; %s", p, plural(p.attempts(), "attempt"), ownersText(owners))
		if len(owners) > 1 {
			keep := keeper(owners)
			var drops []string
			for _, o := range owners {
				if o.what != keep.what || o.source != keep.source {
					drops = append(drops, o.drop)
				}
			}
			at := owners[0]
			if at.what == keep.what && at.source == keep.source {
				at = owners[1]
			}
			id, how := "two-owners", "on one call path"
			if p.vague {
				id, how = "maybe-two-owners", "if they are on one call path"
			}
			l.add(id, at.pos.File, at.pos.Line, at.pos.Column, at.what, at.field,
				fmt.Sprintf("keep one owner, %s %s: %s", layerNames[keep.layer], keep.what, strings.Join(drops, "; ")),
				"%d layers retry %s (%s): up to %s per user request", len(owners), how, p, plural(p.attempts(), "attempt"))
		}
		for i := 0; i+1 < len(p.hops); i++ {
			l.pathTimeouts(p.hops[i], p.hops[i+1])
		}
	}
}

// pathFix is what to do about a call path with these owners.
func pathFix(owners []hop) string {
	switch len(owners) {
	case 0:
		return "nothing to do; if the dependency fails briefly, retry at one layer only, the app's, with a budget"
	case 1:
		return fmt.Sprintf("nothing to do; keep %s %s the only layer that retries", layerNames[owners[0].layer], owners[0].what)
	}
	return fmt.Sprintf("keep one owner, %s %s (see two-owners)", layerNames[keeper(owners).layer], keeper(owners).what)
}

func ownersText(owners []hop) string {
	switch len(owners) {
	case 0:
		return "no layer retries"
	case 1:
		return fmt.Sprintf("one owner, %s %s", layerNames[owners[0].layer], owners[0].what)
	}
	names := make([]string, len(owners))
	for i, o := range owners {
		names[i] = layerNames[o.layer] + " " + o.what
	}
	return fmt.Sprintf("%d owners: %s", len(owners), strings.Join(names, ", "))
}

// pathTimeouts reports an outer hop whose try ends before the hop beneath it can
// finish retrying: the outer gives up (and may retry) while the inner still sends.
func (l *linter) pathTimeouts(outer, inner hop) {
	limit, what := outer.perTry, "per-try timeout"
	if limit == 0 {
		limit, what = outer.wait, "timeout"
	}
	if limit == 0 || inner.tries < 2 || inner.worst <= limit {
		return
	}
	if inner.worst == 0 {
		return
	}
	l.add("path-timeouts", inner.pos.File, inner.pos.Line, inner.pos.Column, inner.what, inner.field,
		fmt.Sprintf("let %s %s retry within %v (fewer tries or shorter per-try timeouts), or raise %s's %s above %v",
			layerNames[inner.layer], inner.what, limit, outer.what, what, inner.worst),
		"%s %s may retry for %v, beyond the %v %s of %s %s above it: the caller gives up while the tries go on",
		layerNames[inner.layer], inner.what, inner.worst, limit, what, layerNames[outer.layer], outer.what)
}
