package policyenvoy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/backstop-go/backstop/internal/textdist"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// fixFor says how to mend the field at path, under md, that protojson refused with
// msg; "" if it cannot tell.
func fixFor(md protoreflect.MessageDescriptor, path []pathElem, msg string) string {
	holder, fd, elem := fieldAt(md, path)
	switch {
	case strings.HasPrefix(msg, "unknown field"):
		if holder == nil || len(path) == 0 {
			return "remove it"
		}
		name := path[len(path)-1].key
		if m := nearestField(holder, name); m != "" {
			return "did you mean " + m + "?"
		}
		return fmt.Sprintf("remove it: Envoy's %s has no field so named", holder.Name())
	case fd == nil:
		return ""
	case strings.Contains(msg, "oneof") && fd.ContainingOneof() != nil:
		od := fd.ContainingOneof()
		var names []string
		for i := range od.Fields().Len() {
			names = append(names, string(od.Fields().Get(i).Name()))
		}
		return fmt.Sprintf("keep one field of %s: %s", od.Name(), strings.Join(names, ", "))
	}
	return wantFor(fd, elem)
}

// fieldAt walks path from md. It returns the field path ends at and the message
// that holds it. elem says path ends at one element of a list or a map. fd is nil
// when path's last key names no field; holder is nil when path leaves md.
func fieldAt(md protoreflect.MessageDescriptor, path []pathElem) (holder protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, elem bool) {
	holder = md
	for i, p := range path {
		if fd != nil && (fd.IsList() || fd.IsMap()) && !elem {
			elem = true // p is an index or a map's key
			continue
		}
		if fd != nil {
			holder = fd.Message()
			if fd.IsMap() {
				holder = fd.MapValue().Message()
			}
		}
		if holder == nil || p.key == "" {
			return nil, nil, false
		}
		if fd, elem = fieldNamed(holder, p.key), false; fd == nil && i < len(path)-1 {
			return nil, nil, false
		}
	}
	return holder, fd, elem
}

// fieldNamed finds md's field spelled key, as protojson reads it: its name or its
// JSON name.
func fieldNamed(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByName(protoreflect.Name(key)); fd != nil {
		return fd
	}
	return md.Fields().ByJSONName(key)
}

// wantFor says what value fd, or one element of it, wants.
func wantFor(fd protoreflect.FieldDescriptor, elem bool) string {
	switch {
	case fd.IsList() && !elem:
		return "want a list, each " + strings.TrimPrefix(wantValue(fd), "want ")
	case fd.IsMap() && !elem:
		return "want a mapping"
	case fd.IsMap():
		fd = fd.MapValue()
	}
	return wantValue(fd)
}

// wantValue says what one value of fd's kind is.
func wantValue(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch md := fd.Message(); md.FullName() {
		case "google.protobuf.Duration":
			return `want a duration such as "1.5s"`
		case "google.protobuf.UInt32Value", "google.protobuf.UInt64Value":
			return "want a whole number ≥ 0"
		case "google.protobuf.Int32Value", "google.protobuf.Int64Value":
			return "want a whole number"
		case "google.protobuf.BoolValue":
			return "want true or false"
		case "google.protobuf.StringValue":
			return "want a string"
		case "google.protobuf.DoubleValue", "google.protobuf.FloatValue":
			return "want a number"
		default:
			return "want a mapping (Envoy's " + string(md.Name()) + ")"
		}
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		var names []string
		for i := range min(vs.Len(), 12) {
			names = append(names, string(vs.Get(i).Name()))
		}
		if vs.Len() > len(names) {
			names = append(names, "…")
		}
		return "want one of " + strings.Join(names, ", ")
	case protoreflect.BoolKind:
		return "want true or false"
	case protoreflect.StringKind:
		return "want a string"
	case protoreflect.BytesKind:
		return "want base64 text"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return "want a number"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "want a whole number ≥ 0"
	}
	return "want a whole number"
}

// nearestField returns the field of md spelled most like name, in name's style
// (snake or camel case). It is at most two edits away; "" if none is.
func nearestField(md protoreflect.MessageDescriptor, name string) string {
	camel := strings.ToLower(name) != name
	var names []string
	fs := md.Fields()
	for i := range fs.Len() {
		if camel {
			names = append(names, fs.Get(i).JSONName())
		} else {
			names = append(names, string(fs.Get(i).Name()))
		}
	}
	return nearest(name, names)
}

// nearest returns the word of known spelled most like w, at most two edits away,
// case and underscores ignored; "" if none is.
func nearest(w string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := textdist.Distance(normKey(w), normKey(k)); d < bestD && d < utf8.RuneCountInString(w) {
			best, bestD = k, d
		}
	}
	return best
}

// wordColumn returns the column of word on line of the input, at or after col, as a
// whole item of a comma-separated list; col if it is not there.
func (s *source) wordColumn(line, col int, word string) int {
	ls := strings.Split(newlines.Replace(string(s.data)), "\n")
	if line < 1 || line > len(ls) || col < 1 {
		return col
	}
	r := []rune(ls[line-1])
	w := []rune(word)
	edge := func(i int) bool { return i < 0 || i >= len(r) || strings.ContainsRune(" \t,\"'", r[i]) }
	for i := col - 1; i+len(w) <= len(r); i++ {
		if string(r[i:i+len(w)]) == word && edge(i-1) && edge(i+len(w)) {
			return i + 1
		}
	}
	return col
}
