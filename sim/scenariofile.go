package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// ScenarioError is one error of a scenario file, placed at its line and column
// (1-based) and named by its path in the file ("services[3].faults[0].to"). It
// matches ErrInvalidScenario.
type ScenarioError struct {
	Line, Column int
	Path         string
	Msg          string
}

func (e *ScenarioError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("%d:%d: %s: %s", e.Line, e.Column, e.Path, e.Msg)
}

func (e *ScenarioError) Unwrap() error { return ErrInvalidScenario }

// ParseScenario reads a scenario file, YAML (or JSON, which is YAML), and validates
// it. Its keys are the fields of [Scenario] in snake case (hop_timeout, user_timeout,
// retry_after); durations are Go duration strings ("7s", "250ms"). custom are the
// stacks beyond the built-in ones that the file may name (see Scenario.Custom); the
// scenario returned carries them.
//
// Every error is reported, not only the first: each is a [*ScenarioError] with its
// line, column and path, joined with errors.Join in the order of the file. An
// unknown field is an error, and so is a field given twice or a value of the wrong
// kind. Every rule of [Scenario.Validate] the file breaks is reported in the same
// run. Each is placed at the field's value, or at the mapping that leaves a needed
// field out. A rule that reads a value of the wrong kind is not checked. A YAML syntax
// error stops the reading.
func ParseScenario(data []byte, custom map[Stack]ClientFunc) (Scenario, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line := 1
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		return Scenario{}, &ScenarioError{Line: line, Column: 1, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return Scenario{}, &ScenarioError{Line: 1, Column: 1, Msg: "empty; want a scenario"}
	}
	d := &decoder{at: map[string][2]int{}}
	var sc Scenario
	d.value(doc.Content[0], reflect.ValueOf(&sc).Elem(), "")
	sc.Custom = custom
	errs := d.errs
	for _, e := range unjoin(sc.validate(d.unread)) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, &ScenarioError{Line: 1, Column: 1, Msg: e.Error()})
			continue
		}
		path := yamlPath(fe.Field)
		line, col := d.place(path)
		errs = append(errs, &ScenarioError{Line: line, Column: col, Path: path, Msg: fe.Msg})
	}
	if len(errs) == 0 {
		return sc, nil
	}
	slices.SortStableFunc(errs, func(a, b error) int {
		ea, eb := a.(*ScenarioError), b.(*ScenarioError)
		return cmp.Or(cmp.Compare(ea.Line, eb.Line), cmp.Compare(ea.Column, eb.Column))
	})
	return Scenario{}, errors.Join(errs...)
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// decoder fills a Scenario from a YAML tree, keeping every error and where each
// path of the file is.
type decoder struct {
	errs   []error
	at     map[string][2]int // path → line, column of its value
	broken []string          // the paths of values of the wrong kind, left unset
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &ScenarioError{Line: n.Line, Column: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// bad reports a value that cannot be read: the field at path is left unset.
func (d *decoder) bad(n *yaml.Node, path, format string, args ...any) {
	d.fail(n, path, format, args...)
	d.broken = append(d.broken, path)
}

// unread reports whether field (a Go path, "Services[3].Work.Mean") holds a value
// left unset, or is inside one, or holds one.
func (d *decoder) unread(field string) bool {
	p := yamlPath(field)
	for _, b := range d.broken {
		if within(p, b) || within(b, p) {
			return true
		}
	}
	return false
}

// within reports whether path p is q or a field or element inside it.
func within(p, q string) bool {
	return q == "" || p == q || strings.HasPrefix(p, q) && (p[len(q)] == '.' || p[len(q)] == '[')
}

// place returns where path is in the file: where its value is, or else where the
// nearest enclosing value is (a field left out is reported at its parent), or 1:1.
func (d *decoder) place(path string) (line, col int) {
	for p := path; ; {
		if at, ok := d.at[p]; ok {
			return at[0], at[1]
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			if at, ok := d.at[""]; ok {
				return at[0], at[1]
			}
			return 1, 1
		}
		p = p[:i]
	}
}

var durationType = reflect.TypeFor[time.Duration]()

func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	d.at[path] = [2]int{n.Line, n.Column}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		d.bad(n, path, "anchors and aliases are not supported")
		return
	}
	if v.Type() == durationType {
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.bad(n, path, "%q is not a duration; want one such as \"7s\" or \"250ms\"", s)
			return
		}
		v.SetInt(int64(dur))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.bad(n, path, "want a mapping")
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			name := k.Value
			p := name
			if path != "" {
				p = path + "." + name
			}
			f, ok := fieldOf(v.Type(), name)
			switch {
			case k.Kind != yaml.ScalarNode:
				d.fail(k, path, "a key that is not a name")
				continue
			case !ok:
				d.fail(k, p, "unknown field; want one of %s", strings.Join(fieldNames(v.Type()), ", "))
				continue
			case seen[name]:
				d.fail(k, p, "given twice")
				continue
			}
			seen[name] = true
			d.value(val, v.FieldByIndex(f.Index), p)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.bad(n, path, "want a list")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.value(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.String:
		if s, ok := d.scalar(n, path); ok {
			v.SetString(s)
		}
	case reflect.Int:
		if s, ok := d.scalar(n, path); ok {
			i, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				d.bad(n, path, "%q; want a whole number", s)
				return
			}
			v.SetInt(i)
		}
	case reflect.Uint64:
		if s, ok := d.scalar(n, path); ok {
			u, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				d.bad(n, path, "%q; want a whole number ≥ 0", s)
				return
			}
			v.SetUint(u)
		}
	case reflect.Float64:
		if s, ok := d.scalar(n, path); ok {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				d.bad(n, path, "%q; want a number", s)
				return
			}
			v.SetFloat(f)
		}
	case reflect.Bool:
		if s, ok := d.scalar(n, path); ok {
			switch s {
			case "true":
				v.SetBool(true)
			case "false":
			default:
				d.bad(n, path, "%q; want true or false", s)
			}
		}
	default:
		d.bad(n, path, "cannot be set in a file")
	}
}

func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.bad(n, path, "want a value")
		return "", false
	}
	return n.Value, true
}

// fileFields are the fields of t a file may set: exported, and not functions or maps
// (Scenario.Custom).
func fileField(f reflect.StructField) bool {
	k := f.Type.Kind()
	return f.IsExported() && k != reflect.Map && k != reflect.Func
}

func fieldOf(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); fileField(f) && snake(f.Name) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if f := t.Field(i); fileField(f) {
			names = append(names, snake(f.Name))
		}
	}
	return names
}

// snake turns a Go field name into its key in a file: HopTimeout → hop_timeout.
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]))) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// yamlPath turns a FieldError's Go path into the file's: Services[3].Work.Mean →
// services[3].work.mean.
func yamlPath(field string) string {
	parts := strings.Split(field, ".")
	for i, p := range parts {
		name, rest, _ := strings.Cut(p, "[")
		if rest != "" {
			rest = "[" + rest
		}
		parts[i] = snake(name) + rest
	}
	return strings.Join(parts, ".")
}
