package policyenvoy

import (
	"bytes"
	"encoding/json"
	"errors"
)

// jsonNode is one value of the JSON that protojson reads. It remembers where it was
// last written. A field protojson refuses can then be found and cut out, and
// decoding goes on past it.
type jsonNode struct {
	obj, arr bool
	raw      []byte      // a scalar, as JSON
	keys     []string    // an object's keys, beside vals
	vals     []*jsonNode // an object's values, or an array's elements
	index    int         // its index in its parent array, as the input has it
	// from, start and end are its span in the JSON last written. from is its key's
	// start for an object's field, else start.
	from, start, end int
}

// readTree reads js into a tree.
func readTree(js []byte) (*jsonNode, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	return readNode(dec, 0)
}

func readNode(dec *json.Decoder, depth int) (*jsonNode, error) {
	if depth > 10000 {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	n := &jsonNode{}
	switch tok {
	case json.Delim('{'):
		n.obj = true
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			v, err := readNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.keys, n.vals = append(n.keys, key), append(n.vals, v)
		}
	case json.Delim('['):
		n.arr = true
		for i := 0; dec.More(); i++ {
			v, err := readNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			v.index = i
			n.vals = append(n.vals, v)
		}
	default:
		n.raw, err = json.Marshal(tok)
		return n, err
	}
	_, err = dec.Token() // the closing delimiter
	return n, err
}

// write writes the tree as compact JSON, noting each node's span.
func (n *jsonNode) write() []byte {
	var b bytes.Buffer
	n.writeTo(&b, -1)
	return b.Bytes()
}

func (n *jsonNode) writeTo(b *bytes.Buffer, from int) {
	n.start = b.Len()
	n.from = n.start
	if from >= 0 {
		n.from = from
	}
	switch {
	case n.obj:
		b.WriteByte('{')
		for i, v := range n.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			k := b.Len()
			key, _ := json.Marshal(n.keys[i])
			b.Write(key)
			b.WriteByte(':')
			v.writeTo(b, k)
		}
		b.WriteByte('}')
	case n.arr:
		b.WriteByte('[')
		for i, v := range n.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			v.writeTo(b, -1)
		}
		b.WriteByte(']')
	default:
		b.Write(n.raw)
	}
	n.end = b.Len()
}

// cut removes the deepest field or element of n that byte offset off falls in.
// Inside a value's braces, it looks deeper first. It returns the path it removed,
// with indexes as the input has them; false if off is in no field.
func (n *jsonNode) cut(off int) ([]pathElem, bool) {
	for i, v := range n.vals {
		if off < v.from || off >= v.end {
			continue
		}
		step := pathElem{index: v.index}
		if n.obj {
			step = pathElem{key: n.keys[i]}
		}
		if (v.obj || v.arr) && off > v.start {
			if p, ok := v.cut(off); ok {
				return append([]pathElem{step}, p...), true
			}
		}
		if n.obj {
			n.keys = append(n.keys[:i], n.keys[i+1:]...)
		}
		n.vals = append(n.vals[:i], n.vals[i+1:]...)
		return []pathElem{step}, true
	}
	return nil, false
}
