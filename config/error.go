package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched by every error that refuses a configuration.
var ErrInvalid = errors.New("config: invalid configuration")

// Pos is where a value came from: a file's line and column (1-based), or an
// environment variable.
type Pos struct {
	File         string
	Line, Column int
	// Env names the environment variable the value came from; "" for the file.
	Env string
}

// String returns "file:line:column", or "$NAME" for an environment variable.
func (p Pos) String() string {
	if p.Env != "" {
		return "$" + p.Env
	}
	return fmt.Sprintf("%s:%d:%d", p.File, max(p.Line, 1), max(p.Column, 1))
}

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Pos is where: the field at fault, or the stage or list entry a rule names.
	Pos Pos
	// Path is the field at fault, e.g. "stacks.payments.retry.attempts"; "" for the
	// file as a whole.
	Path string
	// Rule is the ordering rule broken, "O1" … "O7" as policy.Wrap names them; "" for
	// other problems.
	Rule string
	// Msg says what is wrong: "is 0", "unknown field".
	Msg string
	// Fix says what to change, in one line: the range wanted and an example, the
	// name meant, the move to make.
	Fix string
	// Err is the error behind the problem where there is one: a *policy.OrderError,
	// or a constructor's error matching its package's ErrInvalidOptions.
	Err error
}

// String returns "file:line:column: path: message; fix".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Pos.String())
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	if p.Rule != "" {
		b.WriteString(p.Rule)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	if p.Fix != "" {
		b.WriteString("; ")
		b.WriteString(p.Fix)
	}
	return b.String()
}

// Error is a refused configuration: every problem found in it, in file order. It
// matches [ErrInvalid], and through its problems policy.ErrOrder and the
// constructors' ErrInvalidOptions.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	if len(e.Problems) == 1 {
		b.WriteString(": ")
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, ": %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the errors behind the problems.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, p := range e.Problems {
		if p.Err != nil {
			errs = append(errs, p.Err)
		}
	}
	return errs
}
