package policyk8s

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is matched by every error of [Parse] and [Load]: a [*ConfigError], or
// several joined.
var ErrInvalid = errors.New("policyk8s: invalid manifest")

// A ConfigError is one problem of a manifest [Parse] or [Load] refuses, placed in
// its file. It matches [ErrInvalid].
type ConfigError struct {
	// File is the file's name, as given to Parse or found by Load.
	File string
	// Line and Column are the 1-based position of the field or token at fault; 0
	// when the reader does not know it. A YAML syntax error, which the YAML reader
	// names by its line only, is placed at that line's first character.
	Line, Column int
	// Path is the field at fault as the manifest spells it, from the document's
	// root: "spec.rules[0].retry.attempts"; "" when the error is not about one
	// field.
	Path string
	// Msg says what is wrong and how to fix it.
	Msg string
}

// Error returns "policyk8s: invalid manifest: file:line:column: path: message".
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	b.WriteString(": ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	switch {
	case e.Line > 0 && e.Column > 0:
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Column)
	case e.Line > 0:
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.String()[b.Len()-1] == ':' {
		b.WriteByte(' ')
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalid }

// problems collects the ConfigErrors of one reading.
type problems struct{ errs []*ConfigError }

func (ps *problems) add(e *ConfigError) { ps.errs = append(ps.errs, e) }

// maxProblems bounds the problems one reading reports: past it, the rest of the
// input is not read.
const maxProblems = 1000

func (ps *problems) full() bool { return len(ps.errs) >= maxProblems }

// err returns the problems in the order of the input, file by file, each once: nil
// for none, a *ConfigError for one, several joined with errors.Join.
func (ps *problems) err() error {
	errs := slices.Clone(ps.errs)
	slices.SortStableFunc(errs, func(a, b *ConfigError) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	errs = slices.CompactFunc(errs, func(a, b *ConfigError) bool { return *a == *b })
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
