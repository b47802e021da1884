package policygrpc

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
)

// The rules a refused service config can break that tools tell apart; a
// [*ServiceConfigError] matches the one it breaks, if any, as well as
// [ErrServiceConfig].
var (
	// ErrStatusCode: a retryableStatusCodes or nonFatalStatusCodes entry that is not a
	// gRPC status code, or is OK.
	ErrStatusCode = errors.New("policygrpc: not a retryable status code")
	// ErrNegativeDuration: a duration below zero.
	ErrNegativeDuration = errors.New("policygrpc: negative duration")
)

// A ServiceConfigError is one problem of a service config [ParseServiceConfig]
// refuses, with where in the JSON it is. It matches [ErrServiceConfig], and the rule
// it breaks ([ErrStatusCode], [ErrNegativeDuration]) if it is one of those.
type ServiceConfigError struct {
	// Line and Column are the 1-based position in the input of the field or token at
	// fault (the field's name, for a field of an object); 0 when unknown.
	Line, Column int
	// Path is the field at fault, e.g. "methodConfig[0].retryPolicy.maxAttempts"; ""
	// when the error is not about one field.
	Path string
	// Msg says what is wrong, following Path: "is 1; want > 1".
	Msg string
	// Rule is ErrStatusCode or ErrNegativeDuration, or nil.
	Rule error
}

func (e *ServiceConfigError) Error() string {
	var b strings.Builder
	b.WriteString(ErrServiceConfig.Error())
	b.WriteString(": ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteByte(' ')
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrServiceConfig or the rule the error breaks.
func (e *ServiceConfigError) Is(target error) bool {
	return target == ErrServiceConfig || (e.Rule != nil && target == e.Rule)
}

// jsonToken is one token of the input: its byte span and the path of the field or
// element it belongs to (a key belongs to its field).
type jsonToken struct {
	start, end int
	path       string
}

// jsonIndex places the fields of a JSON document: each path ("methodConfig[0].name",
// keys lower-cased as encoding/json matches them) at the start of its key, or of its
// value for an array element or the root.
type jsonIndex struct {
	data   []byte
	at     map[string]int
	val    map[string]int // path → the start of its value
	tokens []jsonToken
}

func newJSONIndex(data []byte) *jsonIndex {
	ix := &jsonIndex{data: data, at: map[string]int{}, val: map[string]int{}}
	type frame struct {
		obj     bool
		key     string
		index   int
		wantKey bool
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			switch {
			case f.obj && !f.wantKey:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(strings.ToLower(f.key))
			case !f.obj:
				fmt.Fprintf(&b, "[%d]", f.index)
			}
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		start := skipSeparators(data, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return ix
		}
		end := int(dec.InputOffset())
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			ix.tokens = append(ix.tokens, jsonToken{start, end, path()})
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			k, _ := tok.(string)
			stack[n-1].key, stack[n-1].wantKey = k, false
			p := path()
			ix.at[p] = start
			ix.tokens = append(ix.tokens, jsonToken{start, end, p})
			continue
		}
		p := path()
		if _, ok := ix.at[p]; !ok || len(stack) == 0 || !stack[len(stack)-1].obj {
			ix.at[p] = start
		}
		ix.val[p] = start // a value's first token: the last of a name wins, as in encoding/json
		ix.tokens = append(ix.tokens, jsonToken{start, end, p})
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		default:
			valueDone()
		}
	}
}

// skipSeparators returns the offset of the first byte at or after off that is not
// white space, a comma or a colon.
func skipSeparators(data []byte, off int) int {
	for off < len(data) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// Position returns the 1-based line and column of path in the input
// ("methodConfig[0].retryPolicy.maxAttempts", matched as encoding/json matches keys),
// or of the deepest field of path that the input has; 0, 0 if none.
func (ix *jsonIndex) Position(path string) (line, col int) {
	p := strings.ToLower(path)
	for {
		if off, ok := ix.at[p]; ok {
			return position(ix.data, off)
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			if off, ok := ix.at[""]; ok {
				return position(ix.data, off)
			}
			return 0, 0
		}
		p = p[:i]
	}
}

// errAt is a ServiceConfigError for path, placed where the input has it.
func (ix *jsonIndex) errAt(path string, rule error, format string, args ...any) *ServiceConfigError {
	line, col := ix.Position(path)
	return &ServiceConfigError{Line: line, Column: col, Path: path, Msg: fmt.Sprintf(format, args...), Rule: rule}
}

// problems collects the ServiceConfigErrors of one reading.
type problems struct {
	ix   *jsonIndex
	errs []*ServiceConfigError
}

// add reports a problem of the field at path, placed where the input has it.
func (ps *problems) add(path string, rule error, format string, args ...any) {
	ps.errs = append(ps.errs, ps.ix.errAt(path, rule, format, args...))
}

// read decodes raw, the value at path, into v with encoding/json. A value of the
// wrong type is reported at the value, and read returns false; an absent raw
// leaves v alone.
func (ps *problems) read(path string, raw json.RawMessage, v any) bool {
	if len(raw) == 0 {
		return true
	}
	err := json.Unmarshal(raw, v)
	if err == nil {
		return true
	}
	reflect.ValueOf(v).Elem().SetZero() // encoding/json may have set part of it
	e := &ServiceConfigError{Path: path, Msg: err.Error()}
	if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
		e.Msg = fmt.Sprintf("is a JSON %s; want %s", te.Value, jsonKind(te.Type.String()))
	}
	if off, ok := ps.ix.val[strings.ToLower(path)]; ok {
		e.Line, e.Column = position(ps.ix.data, off)
	} else {
		e.Line, e.Column = ps.ix.Position(path)
	}
	ps.errs = append(ps.errs, e)
	return false
}

// err returns the problems in the order of the input: nil for none, a
// *ServiceConfigError for one, several joined with errors.Join.
func (ps *problems) err() error {
	slices.SortStableFunc(ps.errs, func(a, b *ServiceConfigError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	switch len(ps.errs) {
	case 0:
		return nil
	case 1:
		return ps.errs[0]
	}
	errs := make([]error, len(ps.errs))
	for i, e := range ps.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// decodeError places an error of encoding/json reading the input.
func (ix *jsonIndex) decodeError(err error) *ServiceConfigError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(ix.data, int(se.Offset)-1)
		return &ServiceConfigError{Line: line, Column: col, Msg: "the input is not JSON: " + se.Error()}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		line, col := position(ix.data, len(ix.data))
		return &ServiceConfigError{Line: line, Column: col, Msg: "the input is not JSON: unexpected end of input"}
	case errors.As(err, &te):
		// The value ends at te.Offset: the token that ends there is the one refused.
		for _, t := range ix.tokens {
			if t.end == int(te.Offset) || (t.start < int(te.Offset) && int(te.Offset) < t.end) {
				line, col := position(ix.data, t.start)
				return &ServiceConfigError{Line: line, Column: col, Path: ix.spelled(t.path),
					Msg: fmt.Sprintf("is a JSON %s; want %s", te.Value, jsonKind(te.Type.String()))}
			}
		}
		return &ServiceConfigError{Path: te.Field, Msg: fmt.Sprintf("is a JSON %s; want %s", te.Value, jsonKind(te.Type.String()))}
	}
	return &ServiceConfigError{Msg: err.Error()}
}

// spelled returns an index path as the input spells its keys.
func (ix *jsonIndex) spelled(path string) string {
	var b strings.Builder
	p := ""
	for _, step := range splitPath(path) {
		if strings.HasPrefix(step, "[") {
			p += step
			b.WriteString(step)
			continue
		}
		if p != "" {
			p += "."
		}
		p += step
		name := step
		if o, ok := ix.at[p]; ok {
			var s string
			if json.Unmarshal(keyAt(ix.data, o), &s) == nil {
				name = s
			}
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(name)
	}
	return b.String()
}

// splitPath splits "a[0].b" into "a", "[0]", "b".
func splitPath(p string) []string {
	var out []string
	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
		case p[0] == '[':
			i := strings.IndexByte(p, ']')
			if i < 0 {
				return append(out, p)
			}
			out = append(out, p[:i+1])
			p = p[i+1:]
		default:
			i := strings.IndexAny(p, ".[")
			if i < 0 {
				return append(out, p)
			}
			out = append(out, p[:i])
			p = p[i:]
		}
	}
	return out
}

// keyAt returns the JSON string token that starts at off.
func keyAt(data []byte, off int) []byte {
	if off >= len(data) || data[off] != '"' {
		return nil
	}
	for i := off + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return data[off : i+1]
		}
	}
	return nil
}

// jsonKind names a Go type as the JSON it wants.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string" || goType == "*string":
		return "a string"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case strings.Contains(goType, "RawMessage"):
		return "a value"
	}
	return "an object"
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
