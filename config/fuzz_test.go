package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policyenvoy"
)

// FuzzParse: whatever the file and the environment, Parse returns a configuration or
// an *Error with at least one problem, each placed in the file (a line ≥ 1) or at a
// variable, with a fix; it never panics. A configuration it returns explains itself and routes.
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
				if p.Msg == "" || p.Fix == "" {
					t.Fatalf("problem %q says nothing, or no fix", p)
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

// FuzzImportEnvoy: whatever Envoy route config policyenvoy accepts, ImportEnvoy
// converts it into a configuration that builds — never a problem, never a panic —
// with one stack per route, each placed in the original, whose pipeline explains as
// the route's own does; every note is placed and says something.
func FuzzImportEnvoy(f *testing.F) {
	for _, path := range []string{"../cmd/backstop/testdata/seed-envoy-route.yaml", "../cmd/backstop/testdata/route.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data)) // the seed as pasted; the CLI's example routes
	}
	f.Add(`{"cluster": "a", "retry_policy": {"retry_on": "5xx,5xxx,envoy-ratelimited", "num_retries": 4294967295}}`)   // a huge num_retries
	f.Add("route: {cluster: a, timeout: 0s, retry_policy: {retry_on: reset, per_try_timeout: 1s}}")                    // no timeout
	f.Add("route: {cluster: a, retry_policy: {retriable_status_codes: [200, 503], retry_on: retriable-status-codes}}") // a 200
	f.Add("route:\n  cluster: a\n  retry_policy:\n    rate_limited_retry_back_off: {reset_headers: [{name: r, format: UNIX_TIMESTAMP}], max_interval: 1s}")
	f.Add(`virtual_hosts:
- name: v
  domains: ["a.example.com:8080", "*"]
  routes:
  - {match: {prefix: "/"}, route: {cluster: a}}
  - {match: {prefix: "/x"}, route: {cluster: a}}
  - {match: {path: "/x/"}, route: {cluster: a}}
  - {match: {path: "/{y}"}, route: {cluster: a}}
  - {match: {path_separated_prefix: "/z"}, route: {cluster: a}}
  - {match: {safe_regex: {regex: "/r.*"}, headers: [{name: h, present_match: true}]}, route: {cluster: a}}
`) // every kind of match
	f.Fuzz(func(t *testing.T, src string) {
		routes, err := policyenvoy.Parse([]byte(src))
		if err != nil {
			return // policyenvoy's own fuzz target checks its refusals
		}
		im := config.ImportEnvoy("e.yaml", routes)
		c, err := im.Build(config.Options{})
		if err != nil {
			t.Fatalf("ImportEnvoy(%q).Build = %v; want a configuration", src, err)
		}
		if len(c.Stacks()) != len(routes) {
			t.Fatalf("%d stacks for %d routes", len(c.Stacks()), len(routes))
		}
		for i, r := range routes {
			got, want := c.Pipeline(c.Stacks()[i]).Explain(), r.Explain()
			if got.MaxAttempts != want.MaxAttempts || got.WorstCase != want.WorstCase || got.WorstCaseFrom != want.WorstCaseFrom {
				t.Fatalf("route %s: the stack explains as %d attempts, worst case %v (%s); the route as %d, %v (%s)",
					r.Name, got.MaxAttempts, got.WorstCase, got.WorstCaseFrom, want.MaxAttempts, want.WorstCase, want.WorstCaseFrom)
			}
		}
		for _, n := range im.Notes {
			if n.Pos.File != "e.yaml" || n.Pos.Line < 0 || n.Msg == "" || n.Field == "" {
				t.Fatalf("note %+v is placed nowhere or says nothing", n)
			}
		}
		_ = c.Explain().String()
	})
}
