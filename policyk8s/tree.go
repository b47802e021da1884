package policyk8s

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/backstop-go/backstop/internal/textdist"
)

// pathElem is one step of a field path: a key, or an index when key is "".
type pathElem struct {
	key   string
	index int
}

// formatPath writes a path as the manifest spells it: "spec.rules[0].retry", with a
// key holding a dot or a slash (an annotation's) in brackets:
// metadata.annotations["retry.linkerd.io/limit"].
func formatPath(path []pathElem) string {
	var b strings.Builder
	for _, p := range path {
		switch {
		case p.key == "":
			fmt.Fprintf(&b, "[%d]", p.index)
		case strings.ContainsAny(p.key, "./[]\"") || p.key == "":
			fmt.Fprintf(&b, "[%q]", p.key)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p.key)
		}
	}
	return b.String()
}

func with(path []pathElem, p ...pathElem) []pathElem {
	return append(append(make([]pathElem, 0, len(path)+len(p)), path...), p...)
}

func key(k string) pathElem { return pathElem{key: k} }
func index(i int) pathElem  { return pathElem{index: i} }

// maxNodes bounds the nodes one document may expand to, aliases followed: a
// document of a few lines can otherwise alias its way to billions.
const maxNodes = 1 << 20

// maxDepth bounds the nesting the reader follows.
const maxDepth = 200

// A walker checks one document's YAML against the Go type it decodes into — every
// field known, every value of the kind the field wants — and writes the JSON the
// type's decoder reads, with every problem placed at its node.
type walker struct {
	file  string
	ps    *problems
	nodes int // visited, aliases followed
	stop  bool
}

func (w *walker) fail(n *yaml3.Node, path []pathElem, format string, args ...any) {
	if w.ps.full() {
		w.stop = true
		return
	}
	e := &ConfigError{File: w.file, Path: formatPath(path), Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	w.ps.add(e)
}

// enter counts a node, and reports false once the document has too many or nests
// too deep.
func (w *walker) enter(n *yaml3.Node, path []pathElem) bool {
	if w.stop {
		return false
	}
	w.nodes++
	if w.nodes > maxNodes || len(path) > maxDepth {
		w.fail(n, path, "the document expands past %d nodes or %d levels (aliases followed): split it", maxNodes, maxDepth)
		w.stop = true
		return false
	}
	return true
}

// deref follows aliases.
func deref(n *yaml3.Node) *yaml3.Node {
	for i := 0; n != nil && n.Kind == yaml3.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml3.AliasNode {
		return nil
	}
	return n
}

// isNull reports whether n is YAML's null (or absent).
func isNull(n *yaml3.Node) bool {
	return n == nil || n.Kind == yaml3.ScalarNode && n.ShortTag() == "!!null"
}

// pairs returns a mapping's keys and values, merge keys ("<<: *base") expanded: a key
// written in the mapping wins over a merged one. A key written twice is reported.
func (w *walker) pairs(n *yaml3.Node, path []pathElem) (keys, vals []*yaml3.Node) {
	seen := map[string]bool{}
	var merged [][2]*yaml3.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml3.ScalarNode && k.ShortTag() == "!!merge" {
			w.merge(v, path, &merged, 0)
			continue
		}
		if k.Kind != yaml3.ScalarNode {
			w.fail(k, path, "a key must be a plain string")
			continue
		}
		if seen[k.Value] {
			w.fail(k, with(path, key(k.Value)), "written twice in one mapping; Kubernetes refuses duplicate fields: keep one")
			continue
		}
		seen[k.Value] = true
		keys, vals = append(keys, k), append(vals, v)
	}
	for _, kv := range merged {
		if !seen[kv[0].Value] {
			seen[kv[0].Value] = true
			keys, vals = append(keys, kv[0]), append(vals, kv[1])
		}
	}
	return keys, vals
}

func (w *walker) merge(v *yaml3.Node, path []pathElem, out *[][2]*yaml3.Node, depth int) {
	v = deref(v)
	if v == nil || depth > 10 || !w.enter(v, path) {
		return
	}
	switch v.Kind {
	case yaml3.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := v.Content[i]
			if k.Kind == yaml3.ScalarNode && k.ShortTag() == "!!merge" {
				w.merge(v.Content[i+1], path, out, depth+1)
				continue
			}
			if k.Kind == yaml3.ScalarNode {
				*out = append(*out, [2]*yaml3.Node{k, v.Content[i+1]})
			}
		}
	case yaml3.SequenceNode:
		for _, c := range v.Content {
			w.merge(c, path, out, depth+1)
		}
	default:
		w.fail(v, path, "a merge key (<<) takes a mapping or a list of mappings")
	}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	protoMessage    = reflect.TypeFor[proto.Message]()
)

// fieldInfo is one JSON field of a Go struct.
type fieldInfo struct {
	name string
	typ  reflect.Type
}

type structInfo struct {
	fields map[string]fieldInfo
	names  []string // in declaration order
}

var structs sync.Map // reflect.Type → *structInfo

// structOf lists t's JSON fields, embedded and inline structs flattened, as
// encoding/json reads them.
func structOf(t reflect.Type) *structInfo {
	if si, ok := structs.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{fields: map[string]fieldInfo{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if tag == "-" || !f.IsExported() && !f.Anonymous {
				continue
			}
			ft := f.Type
			if f.Anonymous && name == "" {
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					add(ft)
					continue
				}
			}
			if strings.Contains(opts, "inline") && ft.Kind() == reflect.Struct {
				add(ft)
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, ok := si.fields[name]; !ok {
				si.names = append(si.names, name)
			}
			si.fields[name] = fieldInfo{name: name, typ: ft}
		}
	}
	add(t)
	structs.Store(t, si)
	return si
}

// suggest returns "; did you mean X?" for the known name nearest to k, within two
// edits or differing in case only; "" if none is near.
func suggest(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if strings.EqualFold(c, k) {
			return fmt.Sprintf("; did you mean %s?", c)
		}
		if d := textdist.Distance(strings.ToLower(k), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", best)
}

// value checks n against Go type t and writes its JSON to out.
func (w *walker) value(n *yaml3.Node, t reflect.Type, path []pathElem, out *bytes.Buffer) {
	n = deref(n)
	if n == nil {
		out.WriteString("null")
		return
	}
	if !w.enter(n, path) {
		out.WriteString("null")
		return
	}
	if isNull(n) {
		out.WriteString("null")
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(protoMessage) {
		m := reflect.New(t).Interface().(proto.Message)
		w.message(n, m.ProtoReflect().Descriptor(), path, out)
		return
	}
	if pt.Implements(jsonUnmarshaler) || t.Kind() == reflect.Interface {
		w.generic(n, path, out)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml3.MappingNode {
			w.fail(n, path, "want a mapping (%s), not %s", t.Name(), describe(n))
			out.WriteString("null")
			return
		}
		si := structOf(t)
		out.WriteByte('{')
		keys, vals := w.pairs(n, path)
		first := true
		for i, k := range keys {
			f, ok := si.fields[k.Value]
			if !ok {
				w.fail(k, with(path, key(k.Value)), "unknown field %q of %s%s", k.Value, t.Name(), suggest(k.Value, si.names))
				continue
			}
			if !first {
				out.WriteByte(',')
			}
			first = false
			writeString(out, f.name)
			out.WriteByte(':')
			w.value(vals[i], f.typ, with(path, key(k.Value)), out)
		}
		out.WriteByte('}')
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 { // []byte: base64 in JSON
			w.scalar(n, path, "!!str", out)
			return
		}
		if n.Kind != yaml3.SequenceNode {
			w.fail(n, path, "want a list, not %s", describe(n))
			out.WriteString("null")
			return
		}
		out.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				out.WriteByte(',')
			}
			w.value(c, t.Elem(), with(path, index(i)), out)
		}
		out.WriteByte(']')
	case reflect.Map:
		if n.Kind != yaml3.MappingNode {
			w.fail(n, path, "want a mapping, not %s", describe(n))
			out.WriteString("null")
			return
		}
		out.WriteByte('{')
		keys, vals := w.pairs(n, path)
		for i, k := range keys {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, k.Value)
			out.WriteByte(':')
			w.value(vals[i], t.Elem(), with(path, key(k.Value)), out)
		}
		out.WriteByte('}')
	case reflect.String:
		w.scalar(n, path, "!!str", out)
	case reflect.Bool:
		w.scalar(n, path, "!!bool", out)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.integer(n, path, t.Bits(), true, out)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.integer(n, path, t.Bits(), false, out)
	case reflect.Float32, reflect.Float64:
		w.scalar(n, path, "!!float", out)
	default:
		w.generic(n, path, out)
	}
}

// describe names a node's kind for an error: "a list", "the number 3".
func describe(n *yaml3.Node) string {
	switch n.Kind {
	case yaml3.MappingNode:
		return "a mapping"
	case yaml3.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return strconv.Quote(n.Value)
}

// scalar checks that n is a scalar of the kind want ("!!str", "!!bool", "!!float")
// and writes it.
func (w *walker) scalar(n *yaml3.Node, path []pathElem, want string, out *bytes.Buffer) {
	if n.Kind != yaml3.ScalarNode {
		w.fail(n, path, "want %s, not %s", kindWord(want), describe(n))
		out.WriteString("null")
		return
	}
	tag := n.ShortTag()
	switch want {
	case "!!str":
		if tag == "!!int" || tag == "!!float" || tag == "!!bool" {
			w.fail(n, path, "want a string, not %s: quote it (%q)", describe(n), n.Value)
			out.WriteString("null")
			return
		}
		writeString(out, n.Value)
		return
	case "!!bool":
		if tag != "!!bool" {
			w.fail(n, path, "want true or false, not %s", describe(n))
			out.WriteString("null")
			return
		}
	case "!!float":
		if tag != "!!float" && tag != "!!int" {
			w.fail(n, path, "want a number, not %s", describe(n))
			out.WriteString("null")
			return
		}
	}
	w.generic(n, path, out)
}

func kindWord(tag string) string {
	switch tag {
	case "!!bool":
		return "true or false"
	case "!!float", "!!int":
		return "a number"
	}
	return "a string"
}

// integer checks that n is an integer that fits bits (signed or not) and writes it.
func (w *walker) integer(n *yaml3.Node, path []pathElem, bits int, signed bool, out *bytes.Buffer) {
	if n.Kind != yaml3.ScalarNode || n.ShortTag() != "!!int" {
		w.fail(n, path, "want a whole number, not %s", describe(n))
		out.WriteString("null")
		return
	}
	var v any
	if err := n.Decode(&v); err != nil {
		w.fail(n, path, "want a whole number: %v", err)
		out.WriteString("null")
		return
	}
	var i int64
	var u uint64
	neg := false
	switch x := v.(type) {
	case int:
		i, neg = int64(x), x < 0
	case int64:
		i, neg = x, x < 0
	case uint64:
		u = x
		if x <= math.MaxInt64 {
			i = int64(x)
		} else {
			i = math.MaxInt64
		}
	default:
		w.fail(n, path, "want a whole number, not %s", describe(n))
		out.WriteString("null")
		return
	}
	if u == 0 && !neg {
		u = uint64(i)
	}
	switch {
	case !signed && neg:
		w.fail(n, path, "is %s; want 0 or more", n.Value)
	case signed && !neg && u > uint64(1)<<(bits-1)-1, signed && neg && i < -(int64(1)<<(bits-1)):
		w.fail(n, path, "is %s, out of range for a %d-bit integer", n.Value, bits)
	case !signed && bits < 64 && u > uint64(1)<<bits-1:
		w.fail(n, path, "is %s, out of range for a %d-bit integer", n.Value, bits)
	default:
		if neg {
			out.WriteString(strconv.FormatInt(i, 10))
		} else {
			out.WriteString(strconv.FormatUint(u, 10))
		}
		return
	}
	out.WriteString("null")
}

// generic writes any YAML value as JSON, as sigs.k8s.io/yaml converts it.
func (w *walker) generic(n *yaml3.Node, path []pathElem, out *bytes.Buffer) {
	n = deref(n)
	if n == nil || !w.enter(n, path) {
		out.WriteString("null")
		return
	}
	switch n.Kind {
	case yaml3.MappingNode:
		out.WriteByte('{')
		keys, vals := w.pairs(n, path)
		for i, k := range keys {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, k.Value)
			out.WriteByte(':')
			w.generic(vals[i], with(path, key(k.Value)), out)
		}
		out.WriteByte('}')
		return
	case yaml3.SequenceNode:
		out.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				out.WriteByte(',')
			}
			w.generic(c, with(path, index(i)), out)
		}
		out.WriteByte(']')
		return
	case yaml3.DocumentNode:
		out.WriteString("null")
		return
	}
	switch n.ShortTag() {
	case "!!null":
		out.WriteString("null")
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			w.fail(n, path, "%v", err)
			out.WriteString("null")
			return
		}
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			w.fail(n, path, "is %s; want a finite number", n.Value)
			out.WriteString("null")
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			w.fail(n, path, "%v", err)
			out.WriteString("null")
			return
		}
		out.Write(b)
	default:
		writeString(out, n.Value)
	}
}

func writeString(out *bytes.Buffer, s string) {
	b, _ := json.Marshal(s)
	out.Write(b)
}

// message checks n against protobuf message md — field names as protojson reads
// them, JSON or proto spelling — and writes the JSON protojson reads. Durations are
// read as Istio writes them ("1h", "1m", "1s", "1ms", or protobuf's "1.5s").
func (w *walker) message(n *yaml3.Node, md protoreflect.MessageDescriptor, path []pathElem, out *bytes.Buffer) {
	switch md.FullName() {
	case "google.protobuf.Duration":
		w.duration(n, path, out)
		return
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Any":
		w.generic(n, path, out)
		return
	case "google.protobuf.Timestamp":
		w.scalar(n, path, "!!str", out)
		return
	}
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") && strings.HasSuffix(string(md.Name()), "Value") {
		if f := md.Fields().ByName("value"); f != nil {
			w.field(n, f, path, out)
			return
		}
	}
	if n.Kind != yaml3.MappingNode {
		w.fail(n, path, "want a mapping (%s), not %s", md.Name(), describe(n))
		out.WriteString("null")
		return
	}
	fs := md.Fields()
	var names []string
	for i := range fs.Len() {
		names = append(names, fs.Get(i).JSONName())
	}
	out.WriteByte('{')
	keys, vals := w.pairs(n, path)
	first := true
	for i, k := range keys {
		f := fs.ByJSONName(k.Value)
		if f == nil {
			f = fs.ByName(protoreflect.Name(k.Value))
		}
		if f == nil {
			w.fail(k, with(path, key(k.Value)), "unknown field %q of %s%s", k.Value, md.Name(), suggest(k.Value, names))
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		writeString(out, f.JSONName())
		out.WriteByte(':')
		p := with(path, key(k.Value))
		v := deref(vals[i])
		if v == nil || isNull(v) {
			out.WriteString("null")
			continue
		}
		if !w.enter(v, p) {
			out.WriteString("null")
			continue
		}
		switch {
		case f.IsList():
			if v.Kind != yaml3.SequenceNode {
				w.fail(v, p, "want a list, not %s", describe(v))
				out.WriteString("null")
				continue
			}
			out.WriteByte('[')
			for j, c := range v.Content {
				if j > 0 {
					out.WriteByte(',')
				}
				w.field(c, f, with(p, index(j)), out)
			}
			out.WriteByte(']')
		case f.IsMap():
			if v.Kind != yaml3.MappingNode {
				w.fail(v, p, "want a mapping, not %s", describe(v))
				out.WriteString("null")
				continue
			}
			out.WriteByte('{')
			mk, mv := w.pairs(v, p)
			for j, k := range mk {
				if j > 0 {
					out.WriteByte(',')
				}
				writeString(out, k.Value)
				out.WriteByte(':')
				w.field(mv[j], f.MapValue(), with(p, key(k.Value)), out)
			}
			out.WriteByte('}')
		default:
			w.field(v, f, p, out)
		}
	}
	out.WriteByte('}')
}

// field checks one value of field f (an element, for a list).
func (w *walker) field(n *yaml3.Node, f protoreflect.FieldDescriptor, path []pathElem, out *bytes.Buffer) {
	n = deref(n)
	if n == nil || isNull(n) {
		out.WriteString("null")
		return
	}
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		w.message(n, f.Message(), path, out)
	case protoreflect.EnumKind:
		if n.Kind == yaml3.ScalarNode && n.ShortTag() == "!!int" {
			w.integer(n, path, 32, true, out)
			return
		}
		vs := f.Enum().Values()
		if n.Kind == yaml3.ScalarNode && vs.ByName(protoreflect.Name(n.Value)) != nil {
			writeString(out, n.Value)
			return
		}
		var names []string
		for i := range vs.Len() {
			names = append(names, string(vs.Get(i).Name()))
		}
		fix := suggest(n.Value, names)
		if fix == "" {
			fix = "; want one of " + strings.Join(names, ", ")
		}
		w.fail(n, path, "%s is not a %s%s", describe(n), f.Enum().Name(), fix)
		out.WriteString("null")
	case protoreflect.BoolKind:
		w.scalar(n, path, "!!bool", out)
	case protoreflect.StringKind, protoreflect.BytesKind:
		w.scalar(n, path, "!!str", out)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		w.integer(n, path, 32, true, out)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		w.integer(n, path, 64, true, out)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		w.integer(n, path, 32, false, out)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		w.integer(n, path, 64, false, out)
	default: // float, double
		w.scalar(n, path, "!!float", out)
	}
}

// duration checks an Istio duration and writes it as protobuf's JSON ("1.5s").
func (w *walker) duration(n *yaml3.Node, path []pathElem, out *bytes.Buffer) {
	if n.Kind != yaml3.ScalarNode || n.ShortTag() != "!!str" {
		w.fail(n, path, "want a duration such as \"1s\" or \"250ms\", not %s", describe(n))
		out.WriteString("null")
		return
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err != nil:
		w.fail(n, path, "%q is not a duration: want one such as \"1s\" or \"250ms\"", n.Value)
	case d < 0:
		w.fail(n, path, "%q is negative: want 0s or more", n.Value)
	default:
		writeString(out, strconv.FormatFloat(d.Seconds(), 'f', -1, 64)+"s")
		return
	}
	out.WriteString("null")
}

// pos is a position in a file.
type pos struct{ line, col int }

// record notes where each field under n is written, by its path from base ("" for n
// itself): "retry.attempts", "matches[0].path". Keys holding a dot or a slash are
// kept whole, in brackets, as formatPath writes them.
func record(n *yaml3.Node, path []pathElem, into map[string]pos, budget *int) {
	n = deref(n)
	if n == nil || *budget <= 0 || len(path) > 50 {
		return
	}
	*budget--
	switch n.Kind {
	case yaml3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml3.ScalarNode {
				continue
			}
			p := with(path, key(k.Value))
			into[formatPath(p)] = pos{k.Line, k.Column}
			record(n.Content[i+1], p, into, budget)
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			p := with(path, index(i))
			into[formatPath(p)] = pos{c.Line, c.Column}
			record(c, p, into, budget)
		}
	}
}

// child returns the value of key k in mapping n, or nil.
func child(n *yaml3.Node, k string) *yaml3.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return deref(n.Content[i+1])
		}
	}
	return nil
}

// keyOf returns the key node of k in mapping n, or nil.
func keyOf(n *yaml3.Node, k string) *yaml3.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i]
		}
	}
	return nil
}

// item returns element i of sequence n, or nil.
func item(n *yaml3.Node, i int) *yaml3.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml3.SequenceNode || i < 0 || i >= len(n.Content) {
		return nil
	}
	return deref(n.Content[i])
}
