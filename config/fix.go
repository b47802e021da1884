package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A problem's fix names what to write. The helpers here phrase the common ones:
// a name meant, a list to choose from, an example value.

// renameTo is the fix of an unknown name: the name meant, else the names known.
func renameTo(key string, names []string) string {
	if n := meant(key, names); n != "" {
		return fmt.Sprintf("rename it %q", n)
	}
	return "remove it, or use one of " + strings.Join(names, ", ")
}

// oneOf is the fix of a value not in names: the names, and the one meant.
func oneOf(got string, names []string) string {
	return "use one of " + strings.Join(names, ", ") + suggest(got, names)
}

// twice is the fix of a key given twice, first where it was given first.
func twice(first *yaml.Node) string {
	if first.Line > 0 {
		return fmt.Sprintf("keep one: it is also at line %d", first.Line)
	}
	return "keep one of the two"
}

// offable reports whether the duration at path may be "off".
func offable(path string) bool {
	return strings.HasSuffix(path, "deadline") || strings.HasSuffix(path, "attempt_timeout") || strings.HasSuffix(path, "max_hint")
}

// such returns ", such as field: value" for a stack's field at path
// ("stacks.payments.retry.attempts", "defaults.deadline"); "" where the stage
// table has no example.
func such(path string) string {
	rel, ok := stackRel(path)
	if !ok {
		return ""
	}
	return suchRel(rel)
}

// suchRel is such for a path within a stack: "retry.attempts", "deadline".
func suchRel(rel string) string {
	elem := false
	if i := strings.LastIndexByte(rel, '['); i > 0 && strings.HasSuffix(rel, "]") {
		rel, elem = rel[:i], true
	}
	if rel == "order" {
		if elem {
			return fmt.Sprintf(", such as %s", StageRetry)
		}
		return fmt.Sprintf(", such as order: [%s, %s, %s]", StageDeadline, StageBreaker, StageRetry)
	}
	stage, field, _ := strings.Cut(rel, ".")
	d := stageNamed(stage)
	if d == nil {
		return ""
	}
	for _, f := range d.fields {
		switch {
		case f.name != field || f.example == "":
		case elem && f.item != "":
			return ", such as " + f.item
		case !elem:
			return fmt.Sprintf(", such as %s: %s", rel[strings.LastIndexByte(rel, '.')+1:], f.example)
		}
	}
	return ""
}

// stackRel returns the path within its stack of a stack's or the defaults' field.
func stackRel(path string) (string, bool) {
	if rest, ok := strings.CutPrefix(path, "defaults."); ok {
		return rest, true
	}
	if rest, ok := strings.CutPrefix(path, "stacks."); ok {
		_, rel, ok := strings.Cut(rest, ".")
		return rel, ok
	}
	return "", false
}
