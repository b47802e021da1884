package policyenvoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"
)

// Options configure [ParseWith]. The zero value is what [Parse] uses.
type Options struct {
	// Clock times the retries' sleeps; nil means clock.System().
	Clock clock.Clock
	// Rand draws the back-off's jitter and the rate-limited back-off's; nil means
	// jitter.System().
	Rand jitter.Rand
}

// The keys that tell the forms Parse reads apart, in both spellings protojson reads.
var (
	routeConfigKeys = []string{"virtual_hosts", "virtualHosts"}
	virtualHostKeys = []string{"routes", "domains"}
	// A Route's keys that a RouteAction does not have: its match and its actions.
	routeKeys = []string{"match", "route", "redirect", "direct_response", "directResponse",
		"filter_action", "filterAction", "non_forwarding_action", "nonForwardingAction"}
)

// Parse reads Envoy route configuration from YAML or JSON with the zero [Options]; see
// [ParseWith].
func Parse(data []byte) ([]*Route, error) { return ParseWith(data, Options{}) }

// ParseWith reads Envoy route configuration from YAML or JSON, in any of these forms:
//   - a RouteConfiguration (virtual_hosts);
//   - a VirtualHost (routes, domains);
//   - a Route (match, and route or another action);
//   - a Route without match — the snippet Envoy users paste, a top-level route: block
//     with cluster, timeout and retry_policy — read as a Route that matches every
//     path, named "route";
//   - a RouteAction (cluster, timeout, retry_policy), also named "route".
//
// It decodes into go-control-plane's types with protojson, runs Envoy's validation,
// and returns each route that forwards to a cluster, with its virtual host's
// retry_policy where the route has none.
//
// Every problem is reported, not only the first: a [*ConfigError] for one, several
// joined with errors.Join, in the order of the input. Each matches [ErrInvalid].
// It names the line and column in data, and the field's path as data spells it
// ("route.retry_policy.num_retrys"). It says how to fix it. A field protojson refuses is left out and the
// rest is read on; a rule that reads a field left out is not checked. A retry_on
// condition Envoy does not know is reported beside other problems, matching
// [ErrUnknownRetryOn]; alone it is no error (see [Route.UnknownRetryOn]). A syntax
// error stops the reading: a YAML one names its line, malformed JSON its line and
// column.
func ParseWith(data []byte, o Options) ([]*Route, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		if !looksJSON(data) {
			return nil, yamlError(err, data)
		}
		if jerr := jsonSyntaxError(data); jerr != nil {
			return nil, jerr
		}
		// JSON that the YAML reader refuses (a tab where YAML wants spaces): read as JSON.
		var b bytes.Buffer
		if err := json.Compact(&b, data); err != nil {
			return nil, &ConfigError{Msg: "JSON: " + err.Error()}
		}
		js = b.Bytes()
	}
	src := newSource(data, js)
	var probe map[string]any
	if err := json.Unmarshal(js, &probe); err != nil || probe == nil {
		return nil, &ConfigError{Line: lineOf(src), Column: columnOf(src),
			Msg: "want an object (a RouteConfiguration, VirtualHost, Route or RouteAction)"}
	}
	has := func(keys []string) bool {
		for _, k := range keys {
			if _, ok := probe[k]; ok {
				return true
			}
		}
		return false
	}
	ps := &problems{}
	var vhosts []*routev3.VirtualHost
	// Where each virtual host, and each route of one, is in the input.
	vhostAt := func(i int) []pathElem { return nil }
	routeAt := func(vh, j int) []pathElem { return []pathElem{{key: "routes"}, {index: j}} }
	actionKey := []pathElem{{key: "route"}}
	read := false // whether the input was read to its end
	switch {
	case has(routeConfigKeys):
		vhostAt = func(i int) []pathElem { return []pathElem{{key: "virtual_hosts"}, {index: i}} }
		routeAt = func(vh, j int) []pathElem { return append(vhostAt(vh), pathElem{key: "routes"}, pathElem{index: j}) }
		rc := &routev3.RouteConfiguration{}
		read = src.decode(rc, "RouteConfiguration", nil, ps)
		vhosts = rc.GetVirtualHosts()
	case has(virtualHostKeys):
		vh := &routev3.VirtualHost{}
		read = src.decode(vh, "VirtualHost", nil, ps)
		vhosts = []*routev3.VirtualHost{vh}
	case has(routeKeys):
		rt := &routev3.Route{}
		read = src.decode(rt, "Route", func() {
			if rt.Match == nil { // a pasted snippet: it matches whatever its route matches
				rt.Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
				if rt.Name == "" {
					rt.Name = "route"
				}
			}
		}, ps)
		vhosts = []*routev3.VirtualHost{{Routes: []*routev3.Route{rt}}}
		routeAt = func(int, int) []pathElem { return nil }
	default:
		ra := &routev3.RouteAction{}
		read = src.decode(ra, "RouteAction", nil, ps)
		vhosts = []*routev3.VirtualHost{{Routes: []*routev3.Route{{Name: "route", Action: &routev3.Route_Route{Route: ra}}}}}
		routeAt, actionKey = func(int, int) []pathElem { return nil }, nil
	}
	if !read {
		return nil, ps.err()
	}
	// Conditions Envoy does not know, reported only beside other problems.
	var conds problems
	var out []*Route
	for v, vh := range vhosts {
		if rp := vh.GetRetryPolicy(); rp != nil {
			src.unknownRetryOn(rp, append(vhostAt(v), pathElem{key: "retry_policy"}), &conds)
		}
		for i, rt := range vh.GetRoutes() {
			ra := rt.GetRoute()
			if ra == nil {
				continue // a redirect or direct response: no upstream, no retry
			}
			action := append(routeAt(v, i), actionKey...)
			policyAt := append(append([]pathElem(nil), action...), pathElem{key: "retry_policy"})
			if ra.GetRetryPolicy() == nil && vh.GetRetryPolicy() != nil {
				policyAt = append(vhostAt(v), pathElem{key: "retry_policy"})
			} else if ra.GetRetryPolicy() != nil {
				src.unknownRetryOn(ra.GetRetryPolicy(), policyAt, &conds)
			}
			r, err := build(routeName(rt, i), ra, vh, o)
			if err != nil {
				// A field of the route's action, or of the retry policy it inherits,
				// placed in the input. A rule that reads a broken field is dropped.
				var ce *ConfigError
				if !errors.As(err, &ce) {
					ce = &ConfigError{Msg: err.Error()}
				}
				at := action
				if ce.Path != "" {
					base := action
					if strings.HasPrefix(ce.Path, "retry_policy") {
						base = policyAt[:len(policyAt)-1]
					}
					at = append(append([]pathElem(nil), base...), parseFieldPath(ce.Path)...)
				}
				// A rule reads the fields beside the one it names.
				if ps.touches(at[:max(len(at)-1, 0)]) {
					continue
				}
				placed := src.errAt(at, ce.Msg)
				if ce.Path == "" {
					placed.Path = ""
				}
				placed.Rule = ce.Rule
				ps.add(placed)
				continue
			}
			r.src = src
			r.Match = matchOf(rt.GetMatch())
			if len(vh.GetDomains()) > 0 {
				r.Domains = append([]string(nil), vh.GetDomains()...)
			}
			r.action = action
			r.policyAt = policyAt
			out = append(out, r)
		}
	}
	if len(ps.errs) > 0 {
		ps.errs = append(ps.errs, conds.errs...)
		return nil, ps.err()
	}
	if len(out) == 0 {
		return nil, &ConfigError{Line: lineOf(src), Column: columnOf(src), Msg: "no route forwards to a cluster"}
	}
	return out, nil
}

// unknownRetryOn reports each of rp's retry_on conditions that Envoy does not know,
// at the condition in the input; rp is at path at.
func (s *source) unknownRetryOn(rp *routev3.RetryPolicy, at []pathElem, ps *problems) {
	known := RetryOnConditions()
	for _, c := range strings.Split(rp.GetRetryOn(), ",") {
		c = strings.TrimSpace(c)
		if c == "" || slices.Contains(known, c) {
			continue
		}
		e := s.errAt(append(append([]pathElem(nil), at...), pathElem{key: "retry_on"}), "")
		e.Column = s.wordColumn(e.Line, e.Column, c)
		fix := "want one of " + strings.Join(known, ", ")
		if m := nearest(c, known); m != "" {
			fix = "did you mean " + m + "?"
		}
		e.Msg = fmt.Sprintf("%q is not a retry_on condition Envoy knows: it never retries on it; %s", c, fix)
		e.Rule = ErrUnknownRetryOn
		ps.add(e)
	}
}

// looksJSON reports whether data starts, after white space, as a JSON object or array.
func looksJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func lineOf(s *source) int {
	if s.root == nil {
		return 0
	}
	line, _ := s.at(s.root)
	return line
}

func columnOf(s *source) int {
	if s.root == nil {
		return 0
	}
	_, col := s.at(s.root)
	return col
}

// decode unmarshals the source's JSON into m with protojson, lets fix complete it,
// and validates it as Envoy does, reporting every problem to ps. A field protojson
// refuses is cut out of the JSON, and decoding starts again without it. decode
// reports whether it read the input to its end.
func (s *source) decode(m interface {
	proto.Message
	ValidateAll() error
}, what string, fix func(), ps *problems) bool {
	md := m.ProtoReflect().Descriptor()
	tree, err := readTree(s.js)
	if err != nil {
		tree = nil // JSON nested too deeply to cut: its first problem alone
	}
	js := s.js
	if tree != nil {
		js = tree.write() // the same JSON, with each value's span noted
	}
	for n := 0; ; n++ {
		err := protojson.Unmarshal(js, m)
		if err == nil {
			break
		}
		e, path, ok := s.cutError(err, what, tree, js, md)
		ps.add(e)
		if !ok || n+1 == maxProblems {
			return false
		}
		if !strings.HasPrefix(e.Msg, "unknown field") {
			ps.breaks(path)
		}
		js = tree.write()
	}
	negativeDurations(m.ProtoReflect(), nil, func(path []pathElem, d string) {
		e := s.errAt(path, fmt.Sprintf("%s is negative; Envoy refuses negative durations: want 0s or more", d))
		e.Rule = ErrNegativeDuration
		ps.add(e)
		ps.breaks(path)
	})
	if fix != nil {
		fix()
	}
	if err := m.ValidateAll(); err != nil {
		s.validationErrors(err, md, nil, what, ps, 0)
	}
	return true
}

// maxProblems bounds the fields decode cuts out of one input.
const maxProblems = 100

// negativeDurations calls found with the path (prefixed by at) and value of each
// google.protobuf.Duration below zero in m, in field order.
func negativeDurations(m protoreflect.Message, at []pathElem, found func(path []pathElem, d string)) {
	md := m.Descriptor()
	if md.FullName() == "google.protobuf.Duration" {
		secs := m.Get(md.Fields().ByName("seconds")).Int()
		nanos := m.Get(md.Fields().ByName("nanos")).Int()
		if secs < 0 || nanos < 0 {
			found(at, strconv.FormatFloat(float64(secs)+float64(nanos)/1e9, 'f', -1, 64)+"s")
		}
		return
	}
	fs := md.Fields()
	for i := range fs.Len() {
		fd := fs.Get(i)
		if fd.Message() == nil || !m.Has(fd) {
			continue
		}
		p := append(append([]pathElem(nil), at...), pathElem{key: string(fd.Name())})
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			for j := range l.Len() {
				negativeDurations(l.Get(j).Message(), append(p, pathElem{index: j}), found)
			}
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				continue
			}
			// In the order of the keys: a map's own order is random.
			var keys []protoreflect.MapKey
			v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				negativeDurations(v.Map().Get(k).Message(), append(p, pathElem{key: k.String()}), found)
			}
		default:
			negativeDurations(v.Message(), p, found)
		}
	}
}
