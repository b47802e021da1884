package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultEnvPrefix is the prefix of the environment variables that override a file's
// fields when Options.EnvPrefix is "".
const DefaultEnvPrefix = "BACKSTOP"

// envWord is a stack's name as it appears in an environment variable: upper case,
// with - as _.
func envWord(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// envFields maps each field of a [Stack] as an environment variable names it
// ("RETRY_ATTEMPTS") to its path in the file (["retry", "attempts"]).
var envFields = func() map[string][]string {
	m := make(map[string][]string)
	var walk func(t reflect.Type, path []string)
	walk = func(t reflect.Type, path []string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == durationType {
			m[envWord(strings.Join(path, "_"))] = append([]string(nil), path...)
			return
		}
		_, names := fields(t)
		for _, n := range names {
			f, _ := t.FieldByNameFunc(func(s string) bool {
				sf, _ := t.FieldByName(s)
				name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
				return name == n
			})
			walk(f.Type, append(path, n))
		}
	}
	walk(reflect.TypeFor[Stack](), nil)
	return m
}()

// envFieldNames returns the keys of envFields, sorted.
func envFieldNames() []string {
	names := make([]string, 0, len(envFields))
	for n := range envFields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// applyEnv writes the environment's overrides into the document root, before it is
// decoded, so that they are checked like the file's own values: each variable
// PREFIX_STACK_FIELD (PREFIX_DEFAULTS_FIELD for the defaults) replaces, or adds, the
// field of that stack, its value read as YAML ("4", "250ms", "[429, 503]"). Variables
// with the prefix that name no stack and no field are left alone (PREFIX_CONFIG may
// name the file); one that names a field but no stack, or a stack but no field, is a
// problem.
func (d *decoder) applyEnv(root *yaml.Node, prefix string, environ []string) {
	if root.Kind != yaml.MappingNode || len(environ) == 0 {
		return
	}
	stacks := map[string]string{"DEFAULTS": ""}
	if s := child(root, "stacks"); s != nil && s.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(s.Content); i += 2 {
			if name := s.Content[i].Value; name != "defaults" {
				stacks[envWord(name)] = name
			}
		}
	}
	words := make([]string, 0, len(stacks))
	for w := range stacks {
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool { return len(words[i]) > len(words[j]) })
	env := append([]string(nil), environ...)
	sort.Strings(env)
	for _, kv := range env {
		key, value, ok := strings.Cut(kv, "=")
		rest, found := strings.CutPrefix(key, prefix+"_")
		if !ok || !found {
			continue
		}
		var stack, field string
		matched := false
		for _, w := range words {
			if f, ok := strings.CutPrefix(rest, w+"_"); ok {
				stack, field, matched = w, f, true
				break
			}
		}
		at := &yaml.Node{Kind: yaml.ScalarNode}
		d.env[at] = key
		if !matched {
			if _, named := stacks[rest]; named {
				d.problem(at, "", fmt.Sprintf("names %s but no field", stackLabel(stacks[rest])),
					fmt.Sprintf("want %s_%s_FIELD, such as %s_%s_RETRY_ATTEMPTS", prefix, rest, prefix, rest))
				continue
			}
			for f := range envFields {
				if strings.HasSuffix(rest, "_"+f) {
					d.problem(at, "", "names no stack of the file",
						fmt.Sprintf("want %s_STACK_%s, with STACK one of %s", prefix, f, strings.Join(sortedWords(stacks), ", ")))
					break
				}
			}
			continue
		}
		path, ok := envFields[field]
		if !ok {
			fix := fmt.Sprintf("want %s_%s_FIELD, such as %s_%s_RETRY_ATTEMPTS", prefix, stack, prefix, stack)
			if f := meant(field, envFieldNames()); f != "" {
				fix = fmt.Sprintf("rename it %s_%s_%s", prefix, stack, f)
			}
			d.problem(at, "", "names no field of "+stackLabel(stacks[stack]), fix)
			continue
		}
		var doc yaml.Node
		v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
		if err := yaml.Unmarshal([]byte(value), &doc); err == nil && len(doc.Content) == 1 {
			v = doc.Content[0]
		}
		d.mark(v, key)
		var m *yaml.Node
		if stacks[stack] == "" {
			m = d.ensure(root, "defaults", key)
		} else {
			m = d.ensure(d.ensure(root, "stacks", key), stacks[stack], key)
		}
		for _, p := range path[:len(path)-1] {
			m = d.ensure(m, p, key)
		}
		set(m, path[len(path)-1], v, d, key)
	}
}

func stackLabel(name string) string {
	if name == "" {
		return "the defaults"
	}
	return "stack " + name
}

func sortedWords(m map[string]string) []string {
	var s []string
	for w := range m {
		s = append(s, w)
	}
	sort.Strings(s)
	return s
}

// mark records every node under n as written by environment variable key.
func (d *decoder) mark(n *yaml.Node, key string) {
	if d.nodes++; d.nodes > maxNodes {
		return
	}
	d.env[n] = key
	for _, c := range n.Content {
		d.mark(c, key)
	}
}

// child returns the value of key in mapping m, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// unalias replaces an alias under key in m by a copy of what it names, so that an
// override written into it reaches this place only, not every place the anchor is
// used.
func (d *decoder) unalias(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.AliasNode {
			m.Content[i+1] = d.copyNode(m.Content[i+1])
		}
	}
}

func (d *decoder) copyNode(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	cp := *n
	cp.Anchor = ""
	cp.Content = nil
	if d.nodes++; d.nodes > maxNodes {
		return &cp
	}
	for _, c := range n.Content {
		cp.Content = append(cp.Content, d.copyNode(c))
	}
	return &cp
}

// ensure returns the mapping under key in m, adding an empty one if there is none. A
// value that is not a mapping is returned as it is, for the decoder to refuse.
func (d *decoder) ensure(m *yaml.Node, key, env string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return m
	}
	d.unalias(m, key)
	if c := child(m, key); c != nil {
		if c.Kind == yaml.ScalarNode && c.Tag == "!!null" {
			c.Kind, c.Tag, c.Value = yaml.MappingNode, "!!map", ""
		}
		return c
	}
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	d.env[k], d.env[v] = env, env
	m.Content = append(m.Content, k, v)
	return v
}

// set sets key in mapping m to v.
func set(m *yaml.Node, key string, v *yaml.Node, d *decoder, env string) {
	if m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	d.env[k] = env
	m.Content = append(m.Content, k, v)
}
