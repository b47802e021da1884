package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/config"
)

// FuzzParse: whatever the file and the environment, Parse returns a configuration or
// an *Error with at least one problem, each placed in the file (a line ≥ 1) or at a
// variable; it never panics. A configuration it returns explains itself and routes.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/backstop.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example), "")                                                    // the worked example
	f.Add(string(example), "BACKSTOP_PAYMENTS_RETRY_ATTEMPTS=2")                  // with an override
	f.Add("stacks: {a: {retry: {attempts: 3}, deadline: 1s}}", "")                // flow style
	f.Add(`{"stacks": {"a": {"breaker": {"failure_ratio": 0.5}}}}`, "")           // JSON
	f.Add("stacks: {a: {order: [retry, deadline], retry: {}, deadline: 1s}}", "") // O1
	f.Add("stacks: {a: &x {retry: {}}, b: *x}", "BACKSTOP_B_RETRY_ATTEMPTS=[1]")  // an alias and a bad override
	f.Add("a: &a [*a, *a]\nstacks: {s: {}}", "")                                  // a recursive alias
	f.Add("stacks: {s: {}}\nhttp: {default: s, routes: [{match: 'GET /{x', stack: s}]}", "")
	f.Add("stacks: {s: {}}\ngrpc: {routes: [{name: a/b/c, stack: s}]}", "")
	f.Add("defaults: {deadline: 250}\nstacks: {s: {rate_limit: {rate: 1e309}}}", "BACKSTOP_DEFAULTS_DEADLINE=off")
	f.Fuzz(func(t *testing.T, src, env string) {
		c, err := config.Parse("f.yaml", []byte(src), config.Options{Env: strings.Split(env, "\n")})
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("Parse = %v (%T), want an *Error with problems", err, err)
			}
			for _, p := range ce.Problems {
				if p.Pos.Env == "" && (p.Pos.File != "f.yaml" || p.Pos.Line < 0) {
					t.Fatalf("problem %q is placed nowhere", p)
				}
				if p.Msg == "" {
					t.Fatalf("problem at %s says nothing", p.Pos)
				}
			}
			return
		}
		_ = c.Explain().String()
		for _, s := range c.Stacks() {
			if c.Pipeline(s) == nil {
				t.Fatalf("stack %s has no pipeline", s)
			}
		}
	})
}
