package policy

import (
	"errors"
	"fmt"
)

// CheckPublisher checks what an observer that keeps series needs of a
// [Publisher]: a Placement().Kind to label its series with, and gauges each with a
// snake_case name, given once, and a Value. It returns nil if p is fit, else an
// error naming the stage and the gauge at fault, for the observer to wrap.
func CheckPublisher(p Publisher) error {
	if p == nil {
		return errors.New("AddStage(nil)")
	}
	kind, name := p.Placement().Kind, p.Name()
	if kind == "" {
		return fmt.Errorf("the stage %q has no Placement().Kind", name)
	}
	gauges := p.Gauges()
	seen := make(map[string]bool, len(gauges))
	for _, g := range gauges {
		if seen[g.Name] {
			return fmt.Errorf("%s %q publishes two gauges named %q", kind, name, g.Name)
		}
		seen[g.Name] = true
		if !snakeCase(g.Name) || g.Value == nil {
			return fmt.Errorf("%s %q publishes the gauge %q; want a snake_case name and a Value", kind, name, g.Name)
		}
	}
	return nil
}

// snakeCase reports whether s is a snake_case word: a lower-case letter, then
// lower-case letters, digits and underscores.
func snakeCase(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
