package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backstop-go/backstop/internal/textdist"
)

// maxNodes bounds the nodes a file may expand to, aliases included, so that a small
// file of nested aliases cannot make the loader walk billions of nodes.
const maxNodes = 100_000

// decoder turns a YAML (or JSON) node tree into a [File], strictly: an unknown field,
// a value of the wrong type, a duplicate key and a bare-number duration are each a
// [Problem] at the value's position, and decoding goes on so that every problem of a
// file is reported at once.
type decoder struct {
	file  string
	probs []Problem
	pos   map[string]Pos        // a field's path → where its value was written
	env   map[*yaml.Node]string // nodes that came from the environment → the variable
	nodes int
}

func (d *decoder) at(n *yaml.Node) Pos {
	if name, ok := d.env[n]; ok {
		return Pos{Env: name}
	}
	return Pos{File: d.file, Line: n.Line, Column: n.Column}
}

// problem records what is wrong at n (msg) and the change that mends it (fix).
func (d *decoder) problem(n *yaml.Node, path, msg, fix string) {
	d.probs = append(d.probs, Problem{Pos: d.at(n), Path: path, Msg: msg, Fix: fix})
}

var (
	durationType = reflect.TypeFor[Duration]()
	stacksType   = reflect.TypeFor[[]NamedStack]()
)

// stackName is what a stack may be called: it becomes part of environment variable
// names and metric labels.
var stackName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// decode decodes n into v (addressable), naming it path in problems.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	d.nodes++
	if d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.problem(n, path, fmt.Sprintf("the file expands to more than %d values (aliases?)", maxNodes),
				"write the aliased values out, or use fewer aliases")
		}
		return
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.pos[path] = d.at(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // written as null: left unset
	}
	switch t := v.Type(); {
	case t == durationType:
		d.duration(n, path, v)
	case t == stacksType:
		d.stacks(n, path, v)
	case t.Kind() == reflect.Pointer:
		// A value refused is left unset, so that it is reported once, not again as
		// the default it would fall back to; a stage with a bad field is kept, with
		// that field unset, so that the rest of it is checked too.
		before := len(d.probs)
		e := reflect.New(t.Elem())
		d.decode(n, path, e.Elem())
		isStage := t.Elem().Kind() == reflect.Struct && t.Elem() != durationType && n.Kind == yaml.MappingNode
		if len(d.probs) == before || isStage {
			v.Set(e)
		}
	case t.Kind() == reflect.Struct:
		d.mapping(n, path, v)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.problem(n, path, "is "+describe(n), "want a list"+such(path))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, fmt.Sprintf("%s[%d]", path, i), s.Index(i))
		}
		v.Set(s)
	default:
		d.scalar(n, path, v)
	}
}

// fields lists a struct type's fields by their yaml names.
func fields(t reflect.Type) (byName map[string]int, names []string) {
	byName = make(map[string]int)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		byName[name] = i
		names = append(names, name)
	}
	return byName, names
}

func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		_, names := fields(v.Type())
		d.problem(n, path, "is "+describe(n), "want a mapping of its fields: "+strings.Join(names, ", "))
		return
	}
	byName, names := fields(v.Type())
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		fp := join(path, key)
		if k.Kind != yaml.ScalarNode {
			d.problem(k, path, "has a key that is "+describe(k), "want a field name: one of "+strings.Join(names, ", "))
			continue
		}
		if first, ok := seen[key]; ok {
			d.problem(k, fp, "is given twice", twice(first))
			continue
		}
		seen[key] = k
		f, ok := byName[key]
		if !ok {
			d.problem(k, fp, "unknown field", renameTo(key, names))
			continue
		}
		d.decode(val, fp, v.Field(f))
	}
}

// stacks decodes the stacks mapping in file order.
func (d *decoder) stacks(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "is "+describe(n), "want a mapping of stack names to stacks, such as payments: {retry: {attempts: 3}}")
		return
	}
	var out []NamedStack
	seen := make(map[string]*yaml.Node)
	envNames := make(map[string]string)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		name := k.Value
		fp := join(path, name)
		switch {
		case k.Kind != yaml.ScalarNode || !stackName.MatchString(name):
			d.problem(k, fp, "is not a stack name", "rename it: a letter, then letters, digits, _ or -")
			continue
		case envWord(name) == "DEFAULTS":
			d.problem(k, fp, fmt.Sprintf("%q is reserved", name), "move its fields to the top level, under defaults:")
			continue
		case seen[name] != nil:
			d.problem(k, fp, "is given twice", twice(seen[name]))
			continue
		}
		seen[name] = k
		if other, ok := envNames[envWord(name)]; ok {
			d.problem(k, fp, fmt.Sprintf("has the environment name %s, as stack %q has", envWord(name), other), "rename one of the two")
			continue
		}
		envNames[envWord(name)] = name
		d.pos[fp] = d.at(k)
		var s Stack
		d.decode(val, fp, reflect.ValueOf(&s).Elem())
		d.pos[fp] = d.at(k) // the stack's name, where problems of the whole stack point
		out = append(out, NamedStack{Name: name, Stack: s})
	}
	v.Set(reflect.ValueOf(out))
}

func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.problem(n, path, "is "+describe(n), "want a duration"+such(path))
		return
	}
	if n.Tag != "!!str" {
		d.problem(n, path, "is the bare number "+n.Value, fmt.Sprintf("write a duration with its unit, such as \"%sms\" or \"%ss\"", n.Value, n.Value))
		return
	}
	if n.Value == "off" && offable(path) {
		v.Set(reflect.ValueOf(Duration{Off: true}))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.problem(n, path, fmt.Sprintf("is %q, not a duration", n.Value), `want one such as "250ms", "2s" or "1m30s"`)
		return
	}
	if dur <= 0 {
		fix := "want a duration > 0" + such(path)
		if offable(path) {
			fix += `, or "off"`
		}
		d.problem(n, path, "is "+n.Value, fix)
		return
	}
	v.Set(reflect.ValueOf(Duration{D: dur}))
}

func (d *decoder) scalar(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.problem(n, path, "is "+describe(n), "want "+want(v.Kind())+such(path))
		return
	}
	switch v.Kind() {
	case reflect.String:
		if n.Tag != "!!str" {
			d.problem(n, path, "is "+describe(n), fmt.Sprintf("want a string: quote it, %q", n.Value))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Tag != "!!bool" || err != nil {
			d.problem(n, path, "is "+describe(n), "want true or false")
			return
		}
		v.SetBool(b)
	case reflect.Int:
		i, err := strconv.ParseInt(n.Value, 10, 32)
		if n.Tag != "!!int" || err != nil {
			d.problem(n, path, "is "+describe(n), "want a whole number"+such(path))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, 64)
		if (n.Tag != "!!int" && n.Tag != "!!float") || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.problem(n, path, "is "+describe(n), "want a number"+such(path))
			return
		}
		v.SetFloat(f)
	default:
		panic("config: no decoder for " + v.Type().String())
	}
}

func want(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "a whole number"
	}
	return "a number"
}

// describe names what a node holds, for messages: "a list", "the string \"x\"".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		switch n.Tag {
		case "!!str":
			return strconv.Quote(v)
		case "!!null":
			return "null"
		}
		return v
	}
	return "empty"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest returns ` (did you mean "x"?)` for a key one edit or a separator away from a
// field name.
func suggest(key string, names []string) string {
	if n := meant(key, names); n != "" {
		return fmt.Sprintf(" (did you mean %q?)", n)
	}
	return ""
}

// meant returns the name one edit or a separator away from key; "" if none is.
func meant(key string, names []string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	var hits []string
	for _, n := range names {
		if norm(n) == norm(key) || textdist.Distance(n, key) == 1 {
			hits = append(hits, n)
		}
	}
	if len(hits) == 0 {
		return ""
	}
	sort.Strings(hits)
	return hits[0]
}
