package policyenvoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
// Every error matches [ErrInvalid] and is a [*ConfigError] that names the line and
// column in data and the field's path as data spells it
// ("route.retry_policy.num_retrys"); a YAML syntax error names its line, malformed
// JSON its line and column.
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
	var vhosts []*routev3.VirtualHost
	// Where each virtual host, and each route of one, is in the input.
	vhostAt := func(i int) []pathElem { return nil }
	routeAt := func(vh, j int) []pathElem { return []pathElem{{key: "routes"}, {index: j}} }
	actionKey := []pathElem{{key: "route"}}
	switch {
	case has(routeConfigKeys):
		vhostAt = func(i int) []pathElem { return []pathElem{{key: "virtual_hosts"}, {index: i}} }
		routeAt = func(vh, j int) []pathElem { return append(vhostAt(vh), pathElem{key: "routes"}, pathElem{index: j}) }
		rc := &routev3.RouteConfiguration{}
		if err := src.decode(rc, "RouteConfiguration", nil); err != nil {
			return nil, err
		}
		vhosts = rc.GetVirtualHosts()
	case has(virtualHostKeys):
		vh := &routev3.VirtualHost{}
		if err := src.decode(vh, "VirtualHost", nil); err != nil {
			return nil, err
		}
		vhosts = []*routev3.VirtualHost{vh}
	case has(routeKeys):
		rt := &routev3.Route{}
		if err := src.decode(rt, "Route", func() {
			if rt.Match == nil { // a pasted snippet: it matches whatever its route matches
				rt.Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
				if rt.Name == "" {
					rt.Name = "route"
				}
			}
		}); err != nil {
			return nil, err
		}
		vhosts = []*routev3.VirtualHost{{Routes: []*routev3.Route{rt}}}
		routeAt = func(int, int) []pathElem { return nil }
	default:
		ra := &routev3.RouteAction{}
		if err := src.decode(ra, "RouteAction", nil); err != nil {
			return nil, err
		}
		vhosts = []*routev3.VirtualHost{{Routes: []*routev3.Route{{Name: "route", Action: &routev3.Route_Route{Route: ra}}}}}
		routeAt, actionKey = func(int, int) []pathElem { return nil }, nil
	}
	var out []*Route
	for v, vh := range vhosts {
		for i, rt := range vh.GetRoutes() {
			ra := rt.GetRoute()
			if ra == nil {
				continue // a redirect or direct response: no upstream, no retry
			}
			r, err := build(routeName(rt, i), ra, vh, o)
			var ce *ConfigError
			if errors.As(err, &ce) && ce.Path != "" && ce.Line == 0 {
				// A field of the route's action (or of the virtual host's retry policy
				// it inherits): place it in the input.
				base := append(routeAt(v, i), actionKey...)
				if ra.GetRetryPolicy() == nil && vh.GetRetryPolicy() != nil && strings.HasPrefix(ce.Path, "retry_policy") {
					base = vhostAt(v)
				}
				placed := src.errAt(append(base, parseFieldPath(ce.Path)...), ce.Msg)
				placed.Rule = ce.Rule
				return nil, placed
			}
			if err != nil {
				return nil, err
			}
			r.src = src
			r.Match = matchOf(rt.GetMatch())
			if len(vh.GetDomains()) > 0 {
				r.Domains = append([]string(nil), vh.GetDomains()...)
			}
			r.action = append(routeAt(v, i), actionKey...)
			r.policyAt = append(append([]pathElem(nil), r.action...), pathElem{key: "retry_policy"})
			if ra.GetRetryPolicy() == nil && vh.GetRetryPolicy() != nil {
				r.policyAt = append(vhostAt(v), pathElem{key: "retry_policy"})
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, &ConfigError{Line: lineOf(src), Column: columnOf(src), Msg: "no route forwards to a cluster"}
	}
	return out, nil
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
// and validates it as Envoy does.
func (s *source) decode(m interface {
	proto.Message
	ValidateAll() error
}, what string, fix func()) error {
	if err := protojson.Unmarshal(s.js, m); err != nil {
		return s.decodeError(err, what)
	}
	if path, d, ok := negativeDuration(m.ProtoReflect(), nil); ok {
		e := s.errAt(path, fmt.Sprintf("%s is negative; Envoy refuses negative durations: want 0s or more", d))
		e.Rule = ErrNegativeDuration
		return e
	}
	if fix != nil {
		fix()
	}
	if err := m.ValidateAll(); err != nil {
		return s.validationError(err, m.ProtoReflect().Descriptor(), what)
	}
	return nil
}

// negativeDuration finds the first google.protobuf.Duration below zero in m, in field
// order, and returns its path (prefixed by at) and value.
func negativeDuration(m protoreflect.Message, at []pathElem) ([]pathElem, string, bool) {
	md := m.Descriptor()
	if md.FullName() == "google.protobuf.Duration" {
		secs := m.Get(md.Fields().ByName("seconds")).Int()
		nanos := m.Get(md.Fields().ByName("nanos")).Int()
		if secs < 0 || nanos < 0 {
			return at, strconv.FormatFloat(float64(secs)+float64(nanos)/1e9, 'f', -1, 64) + "s", true
		}
		return nil, "", false
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
				if q, d, ok := negativeDuration(l.Get(j).Message(), append(p, pathElem{index: j})); ok {
					return q, d, true
				}
			}
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				continue
			}
			var found []pathElem
			var fd2 string
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if q, d, ok := negativeDuration(mv.Message(), append(p, pathElem{key: k.String()})); ok {
					found, fd2 = q, d
					return false
				}
				return true
			})
			if found != nil {
				return found, fd2, true
			}
		default:
			if q, d, ok := negativeDuration(v.Message(), p); ok {
				return q, d, true
			}
		}
	}
	return nil, "", false
}
