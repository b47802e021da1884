package policyenvoy

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml3 "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A ConfigError is a route configuration [Parse] refuses, with where in the input it
// went wrong. It matches [ErrInvalid].
type ConfigError struct {
	// Line and Column are the 1-based position in the input (YAML or JSON) of the
	// field or token at fault; 0 when the parser does not know it. A YAML syntax
	// error, which the YAML reader names by its line only, is placed at the first
	// character of that line.
	Line, Column int
	// Path is the field at fault as the input spells it, e.g.
	// "route.retry_policy.num_retrys" or "virtual_hosts[0].routes[1].route.timeout";
	// "" when the error is not about one field.
	Path string
	// Msg says what is wrong.
	Msg string
	// Rule is the rule broken that tools tell apart — ErrNegativeDuration,
	// ErrUnknownRetryOn — or nil.
	Rule error
}

// ErrNegativeDuration is matched by a [ConfigError] for a duration below zero, which
// Envoy refuses wherever it is.
var ErrNegativeDuration = errors.New("policyenvoy: negative duration")

// ErrUnknownRetryOn is matched by a [ConfigError] for a retry_on condition Envoy does
// not know. [ParseWith] reports one only beside other problems: alone, it is listed
// in [Route.UnknownRetryOn].
var ErrUnknownRetryOn = errors.New("policyenvoy: unknown retry_on condition")

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	b.WriteString(": ")
	switch {
	case e.Line > 0 && e.Column > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalid or the rule the error breaks.
func (e *ConfigError) Is(target error) bool {
	return target == ErrInvalid || (e.Rule != nil && target == e.Rule)
}

// pathElem is one step of a field path: a key, or an index when key is "".
type pathElem struct {
	key   string
	index int
}

// source is the input as read: its bytes, the YAML node tree (nil if the YAML
// parser could not read it) and the JSON it was converted to.
type source struct {
	data  []byte
	root  *yaml3.Node
	js    []byte
	lines int // of the input, as YAML counts them
}

func newSource(data, js []byte) *source {
	s := &source{data: data, js: js, lines: yamlLines(data)}
	var doc yaml3.Node
	if yaml3.Unmarshal(data, &doc) == nil && doc.Kind == yaml3.DocumentNode && len(doc.Content) == 1 {
		s.root = doc.Content[0]
	}
	return s
}

// at returns n's line and column, or 0, 0 when the YAML reader placed it past the
// input's last line (the empty document after a lone "---").
func (s *source) at(n *yaml3.Node) (line, col int) {
	if n.Line > s.lines {
		return 0, 0
	}
	return n.Line, n.Column
}

// errAt returns a ConfigError for path, placed at the input's node for it: the deepest
// node of path that the input has, and the path as the input spells it, with the
// steps it lacks appended as given.
func (s *source) errAt(path []pathElem, msg string) *ConfigError {
	e := &ConfigError{Msg: msg}
	n := s.root
	if n != nil {
		e.Line, e.Column = s.at(n)
	}
	var spelled []pathElem
	for i, p := range path {
		n = deref(n)
		next, key := step(n, p)
		if next == nil {
			spelled = append(spelled, path[i:]...)
			break
		}
		if key != nil {
			spelled = append(spelled, pathElem{key: key.Value})
			e.Line, e.Column = s.at(key)
		} else {
			spelled = append(spelled, p)
			e.Line, e.Column = s.at(next)
		}
		n = next
	}
	e.Path = formatPath(spelled)
	return e
}

// deref follows YAML aliases.
func deref(n *yaml3.Node) *yaml3.Node {
	for i := 0; n != nil && n.Kind == yaml3.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// step returns the child of n that p names (and its key node, in a mapping), or nil.
// Keys match with case and underscores ignored, so "retryPolicy" finds retry_policy.
func step(n *yaml3.Node, p pathElem) (child, key *yaml3.Node) {
	if n == nil {
		return nil, nil
	}
	switch {
	case n.Kind == yaml3.MappingNode && p.key != "":
		want := normKey(p.key)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml3.ScalarNode && normKey(k.Value) == want {
				return n.Content[i+1], k
			}
		}
	case n.Kind == yaml3.SequenceNode && p.key == "" && p.index >= 0 && p.index < len(n.Content):
		return n.Content[p.index], nil
	}
	return nil, nil
}

func normKey(k string) string { return strings.ToLower(strings.ReplaceAll(k, "_", "")) }

func formatPath(path []pathElem) string {
	var b strings.Builder
	for _, p := range path {
		if p.key == "" {
			fmt.Fprintf(&b, "[%d]", p.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.key)
	}
	return b.String()
}

// protojsonPos finds the "(line L:C): message" protojson puts in its errors.
var protojsonPos = regexp.MustCompile(`\(line (\d+):(\d+)\): (.*)$`)

// cutError turns a protojson error about js, as tree last wrote it, into a
// ConfigError placed in the input, with a fix. It cuts the field at fault out of
// tree and returns its path; false if it cannot.
func (s *source) cutError(err error, what string, tree *jsonNode, js []byte, md protoreflect.MessageDescriptor) (*ConfigError, []pathElem, bool) {
	m := protojsonPos.FindStringSubmatch(err.Error())
	if m == nil || tree == nil {
		return &ConfigError{Msg: fmt.Sprintf("as an Envoy %s: %v", what, err)}, nil, false
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	msg := fmt.Sprintf("%s (as an Envoy %s)", m[3], what)
	off, ok := offsetOf(js, line, col)
	if !ok {
		return &ConfigError{Msg: msg}, nil, false
	}
	path, ok := tree.cut(off)
	if !ok {
		return s.errAt(nil, msg), nil, false
	}
	if fix := fixFor(md, path, m[3]); fix != "" {
		msg += "; " + fix
	}
	return s.errAt(path, msg), path, true
}

// offsetOf returns the byte offset of 1-based line and rune column in b.
func offsetOf(b []byte, line, col int) (int, bool) {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	for c := 1; c < col; c++ {
		if off >= len(b) {
			return 0, false
		}
		_, size := utf8.DecodeRune(b[off:])
		off += size
	}
	return off, off <= len(b)
}

// validationErrors reports each error of Envoy's validation (protoc-gen-validate) of
// the message described by md, at path at, to ps. A chain of "embedded message failed
// validation" errors gives an error's path, its innermost link the reason. An error
// about a field that could not be read is left out.
func (s *source) validationErrors(err error, md protoreflect.MessageDescriptor, at []pathElem, what string, ps *problems, depth int) {
	type fieldError interface {
		Field() string
		Reason() string
		Cause() error
	}
	type multi interface{ AllErrors() []error }
	leaf := func(path []pathElem, reason string, alts [][]pathElem) {
		for _, p := range append(alts, path) {
			if ps.touches(p) {
				return
			}
		}
		ps.add(s.errAt(path, fmt.Sprintf("%s (Envoy's validation of the %s)", reason, what)))
		ps.breaks(path)
	}
	if m, ok := err.(multi); ok && len(m.AllErrors()) > 0 {
		for _, e := range m.AllErrors() {
			s.validationErrors(e, md, at, what, ps, depth+1)
		}
		return
	}
	fe, ok := err.(fieldError)
	if !ok || depth > 64 { // bounded: the chain is as deep as the message nesting
		leaf(at, err.Error(), nil)
		return
	}
	name, index, hasIndex := splitIndex(fe.Field())
	var fd protoreflect.FieldDescriptor
	if md != nil {
		fd = fieldByGoName(md, name)
	}
	path := append([]pathElem(nil), at...)
	// A oneof is no field of the input: its members are.
	var members [][]pathElem
	switch {
	case fd != nil:
		path = append(path, pathElem{key: string(fd.Name())})
	default:
		key := name
		if od := oneofByGoName(md, name); od != nil {
			key = string(od.Name())
			for i := range od.Fields().Len() {
				members = append(members, append(append([]pathElem(nil), at...), pathElem{key: string(od.Fields().Get(i).Name())}))
			}
		}
		path = append(path, pathElem{key: key})
	}
	if hasIndex {
		path = append(path, pathElem{index: index})
	}
	if fe.Cause() == nil {
		leaf(path, fe.Reason(), members)
		return
	}
	var child protoreflect.MessageDescriptor
	if fd != nil {
		child = fd.Message()
		if fd.IsMap() {
			child = fd.MapValue().Message()
		}
	}
	if _, ok := fe.Cause().(fieldError); !ok {
		if _, ok := fe.Cause().(multi); !ok {
			leaf(path, fe.Reason(), members)
			return
		}
	}
	s.validationErrors(fe.Cause(), child, path, what, ps, depth+1)
}

// splitIndex splits "Routes[3]" into "Routes", 3; a map key ("Map[\"k\"]") is dropped.
func splitIndex(f string) (name string, index int, ok bool) {
	i := strings.IndexByte(f, '[')
	if i < 0 || !strings.HasSuffix(f, "]") {
		return f, 0, false
	}
	n, err := strconv.Atoi(f[i+1 : len(f)-1])
	return f[:i], n, err == nil && n >= 0
}

// fieldByGoName finds md's field whose generated Go name is goName.
func fieldByGoName(md protoreflect.MessageDescriptor, goName string) protoreflect.FieldDescriptor {
	fs := md.Fields()
	for i := range fs.Len() {
		if fd := fs.Get(i); normKey(string(fd.Name())) == normKey(goName) {
			return fd
		}
	}
	return nil
}

// oneofByGoName finds md's oneof whose generated Go name is goName.
func oneofByGoName(md protoreflect.MessageDescriptor, goName string) protoreflect.OneofDescriptor {
	if md == nil {
		return nil
	}
	os := md.Oneofs()
	for i := range os.Len() {
		if od := os.Get(i); normKey(string(od.Name())) == normKey(goName) {
			return od
		}
	}
	return nil
}

// yamlError turns an error of the YAML reader into a ConfigError: "yaml: line 3: …".
var yamlLine = regexp.MustCompile(`yaml: line (\d+): (.*)$`)

func yamlError(err error, data []byte) *ConfigError {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		// At the end of the input the reader counts one line more than there is.
		line = min(line, yamlLines(data))
		return &ConfigError{Line: line, Column: firstColumn(data, line), Msg: "YAML: " + m[2]}
	}
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	return &ConfigError{Msg: "YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// jsonSyntaxError reports where data, which looks like JSON, stops being JSON; nil if
// it is JSON.
func jsonSyntaxError(data []byte) *ConfigError {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&v)
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return nil
		}
		if err == nil {
			err = errors.New("data after the top-level value")
		}
	}
	off := int(dec.InputOffset())
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Offset > 0 {
		off = int(se.Offset) - 1 // the offending byte
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		off = len(data)
		err = errors.New("unexpected end of JSON input")
	}
	line, col := position(data, off)
	return &ConfigError{Line: line, Column: col, Msg: "JSON: " + err.Error()}
}

// position returns the 1-based line and rune column of byte offset off in b.
func position(b []byte, off int) (line, col int) {
	off = min(max(off, 0), len(b))
	b = b[:off]
	line = bytes.Count(b, []byte("\n")) + 1
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return line, utf8.RuneCount(b) + 1
}

// yamlLines counts the lines of data as YAML does: CR LF, CR, LF, NEL, LS and PS each
// end one.
func yamlLines(data []byte) int {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	n := 1
	for _, r := range s {
		switch r {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}

// newlines turns each line break YAML knows into "\n".
var newlines = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")

// firstColumn returns the column of the first character of line in data that is not
// a space or tab (1 for an empty line): where a YAML syntax error, which the reader
// names by its line only, is placed.
func firstColumn(data []byte, line int) int {
	s := newlines.Replace(string(data))
	ls := strings.Split(s, "\n")
	if line < 1 || line > len(ls) {
		return 1
	}
	t := strings.TrimLeft(ls[line-1], " \t")
	return utf8.RuneCountInString(ls[line-1]) - utf8.RuneCountInString(t) + 1
}

// problems collects the ConfigErrors of one reading. broken are the fields whose
// values could not be read: a rule that reads one is left unchecked.
type problems struct {
	errs   []*ConfigError
	broken [][]pathElem
}

func (ps *problems) add(e *ConfigError) { ps.errs = append(ps.errs, e) }

// breaks records that the value at path could not be read.
func (ps *problems) breaks(path []pathElem) { ps.broken = append(ps.broken, path) }

// touches reports whether a broken field is at path, above it or below it.
func (ps *problems) touches(path []pathElem) bool {
	for _, b := range ps.broken {
		if related(b, path) {
			return true
		}
	}
	return false
}

// related reports whether one path is a prefix of the other, keys compared as
// [step] compares them.
func related(a, b []pathElem) bool {
	for i := range min(len(a), len(b)) {
		if a[i].key != b[i].key && normKey(a[i].key) != normKey(b[i].key) || a[i].key == "" && a[i].index != b[i].index {
			return false
		}
	}
	return true
}

// err returns the problems in the order of the input, each once: nil for none, a
// *ConfigError for one, several joined with errors.Join. Those without a place come
// last.
func (ps *problems) err() error {
	errs := slices.Clone(ps.errs)
	slices.SortStableFunc(errs, func(a, b *ConfigError) int {
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line) // 0, unplaced, after any line
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	errs = slices.CompactFunc(errs, func(a, b *ConfigError) bool {
		return a.Line == b.Line && a.Column == b.Column && a.Path == b.Path && (a.Path != "" || a.Msg == b.Msg)
	})
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}
