package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// parse loads a file given as a string, with env as its environment.
func parse(t *testing.T, src string, env ...string) (*config.Config, error) {
	t.Helper()
	return config.Parse("backstop.yaml", []byte(src), config.Options{Env: env})
}

// problems returns the problems of a refused file, one string each.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var ce *config.Error
	require.ErrorAs(t, err, &ce, "want a *config.Error")
	require.ErrorIs(t, err, config.ErrInvalid)
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.String())
	}
	return out
}

func TestLoad_WorkedExample(t *testing.T) {
	c, err := config.Load("testdata/backstop.yaml", config.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"payments", "search", "reports"}, c.Stacks())
	require.Equal(t, []string{"deadline", "breaker", "budget", "retry", "attempt_timeout"}, c.Order("payments"))
	require.Equal(t, []string{"deadline", "breaker", "hedge", "attempt_timeout"}, c.Order("search"))
	require.Equal(t, []string{"deadline", "bulkhead", "breaker", "retry"}, c.Order("reports"))
	e := c.Pipeline("payments").Explain()
	require.Equal(t, 4, e.MaxAttempts, "payments: attempts 4 overrides the default 3")
	require.Equal(t, "3s", e.WorstCase.String(), "payments: its deadline 3s overrides the default 2s")
	b := c.Stage("payments", "breaker").(*breaker.Breaker)
	require.Equal(t, "payments", b.Name())
}

// TestParse_InheritsFieldByField: a stack that sets one field of a stage keeps the
// defaults' other fields.
func TestParse_InheritsFieldByField(t *testing.T) {
	c, err := parse(t, `
defaults:
  retry: {attempts: 5, base: 10ms, cap: 20ms, strategy: none}
stacks:
  a:
    retry: {attempts: 2}
  b: {}
`)
	require.NoError(t, err)
	require.Equal(t, 2, c.Pipeline("a").Explain().MaxAttempts)
	require.Equal(t, 5, c.Pipeline("b").Explain().MaxAttempts)
	sleeps := c.Pipeline("a").Explain().Stack[0].Sleeps
	require.Len(t, sleeps, 1)
	require.Equal(t, "10ms", sleeps[0].Max.String(), "a inherits base 10ms and strategy none")
}

// TestParse_EveryProblemAtOnce: a file with many faults reports each, in file
// order, at its line and column with its field path.
func TestParse_EveryProblemAtOnce(t *testing.T) {
	_, err := parse(t, `defaults:
  deadline: 250
  retry:
    attemps: 3
stacks:
  payments:
    retry:
      strategy: fulll
      base: soon
    breaker:
      consecutive_failures: -1
    budget: {ratio: {ratio: 2}}
  orders:
    attempt_timeout: 1s
    retry: {enabled: false}
http:
  routes:
    - match: "GET /x/{id"
      stack: payments
    - match: "GET /y/"
      stack: paymnts
`)
	require.Equal(t, []string{
		`backstop.yaml:2:13: defaults.deadline: is the bare number 250; write a duration with its unit, such as "250ms" or "250s"`,
		`backstop.yaml:4:5: defaults.retry.attemps: unknown field; rename it "attempts"`,
		`backstop.yaml:8:17: stacks.payments.retry.strategy: is "fulll"; use one of full, equal, decorrelated, none, grpc, envoy (did you mean "full"?)`,
		`backstop.yaml:9:13: stacks.payments.retry.base: is "soon", not a duration; want one such as "250ms", "2s" or "1m30s"`,
		`backstop.yaml:11:29: stacks.payments.breaker.consecutive_failures: is -1; want ≥ 1, such as consecutive_failures: 5`,
		`backstop.yaml:12:29: stacks.payments.budget.ratio.ratio: is 2; want a number in (0, 1], such as ratio: 0.1`,
		`backstop.yaml:14:22: stacks.orders.attempt_timeout: O3: attempt_timeout at position 1 has no retry to stand inside (positions: 1 attempt_timeout); use deadline for a single attempt`,
		`backstop.yaml:18:14: http.routes[0].match: parsing "GET /x/{id": at offset 7: bad wildcard segment (must end with '}'); want an http.ServeMux pattern, "[METHOD ][HOST]/[PATH]", such as "GET /v1/items/{id}"`,
		`backstop.yaml:21:14: http.routes[1].stack: names no stack "paymnts"; use one of payments, orders (did you mean "payments"?)`,
	}, problems(t, err))
}

// TestParse_OrderRulesAsWrap: a stack in an order Wrap refuses is refused at load
// with Wrap's rule number, at the entry of order that breaks it.
func TestParse_OrderRulesAsWrap(t *testing.T) {
	for _, c := range []struct {
		stack, want string
	}{
		{"{deadline: 1s, retry: {}, order: [retry, deadline]}", "stacks.s.order[1]: O1: deadline at position 2 is inside retry at position 1"},
		{"{retry: {}, hedge: {}}", "stacks.s.retry: O2: retries at positions 1 and 2"},
		{"{attempt_timeout: 1s, retry: {}, order: [attempt_timeout, retry]}", "stacks.s.order[0]: O3: attempt_timeout at position 1 is outside retry at position 2"},
		{"{budget: {ratio: {}}}", "stacks.s.budget: O4: budget at position 1 has no retry inside it"},
		{"{budget: {ratio: {}}, retry: {}, order: [retry, budget]}", "stacks.s.order[1]: O4: budget at position 2 is inside retry at position 1"},
		{"{retry: {}, order: [retry, retry]}", "stacks.s.order[1]: O6: retry is listed at positions 1 and 2"},
	} {
		_, err := parse(t, "stacks:\n  s: "+c.stack+"\n")
		ps := problems(t, err)
		require.Len(t, ps, 1, "stack %s", c.stack)
		require.Contains(t, ps[0], c.want, "stack %s", c.stack)
		if strings.Contains(c.want, ": O") {
			require.ErrorIs(t, err, policy.ErrOrder, "stack %s", c.stack)
		}
	}
	// The same placements, given to CheckPlacements, give the same rule: the loader
	// asks it.
	rt, err := retry.New(retry.Options{})
	require.NoError(t, err)
	dl, err := deadline.New(deadline.Options{Timeout: time.Second})
	require.NoError(t, err)
	err = policy.CheckPlacements(rt.Placement(), dl.Placement())
	var oe *policy.OrderError
	require.True(t, errors.As(err, &oe))
	require.Equal(t, "O1", oe.Rule)
}

// TestParse_Environment: PREFIX_STACK_FIELD overrides a field; a problem in a value
// from the environment names the variable.
func TestParse_Environment(t *testing.T) {
	src := "defaults:\n  retry: {attempts: 3}\nstacks:\n  payments-eu: {}\n  orders: {retry: {attempts: 2}}\n"
	c, err := parse(t, src,
		"BACKSTOP_PAYMENTS_EU_RETRY_ATTEMPTS=6",
		"BACKSTOP_DEFAULTS_DEADLINE=750ms",
		"BACKSTOP_ORDERS_BREAKER_CONSECUTIVE_FAILURES=2",
		"BACKSTOP_CONFIG=/etc/backstop.yaml", // names no stack and no field: left alone
		"PATH=/bin")
	require.NoError(t, err)
	require.Equal(t, 6, c.Pipeline("payments-eu").Explain().MaxAttempts)
	require.Equal(t, "750ms", c.Pipeline("orders").Explain().WorstCase.String())
	require.Equal(t, []string{"deadline", "breaker", "retry"}, c.Order("orders"))

	_, err = parse(t, src, "BACKSTOP_ORDERS_RETRY_ATTEMPTS=0", "BACKSTOP_ORDERS_RETRY_ATTEMPT=2",
		"BACKSTOP_PAYMENTS_RETRY_ATTEMPTS=2", "BACKSTOP_DEFAULTS_DEADLINE=5", "BACKSTOP_ORDERS=1")
	require.Equal(t, []string{
		`$BACKSTOP_DEFAULTS_DEADLINE: defaults.deadline: is the bare number 5; write a duration with its unit, such as "5ms" or "5s"`,
		`$BACKSTOP_ORDERS: names stack orders but no field; want BACKSTOP_ORDERS_FIELD, such as BACKSTOP_ORDERS_RETRY_ATTEMPTS`,
		`$BACKSTOP_ORDERS_RETRY_ATTEMPT: names no field of stack orders; rename it BACKSTOP_ORDERS_RETRY_ATTEMPTS`,
		`$BACKSTOP_ORDERS_RETRY_ATTEMPTS: stacks.orders.retry.attempts: is 0; want ≥ 1, such as attempts: 3 (1 never retries)`,
		`$BACKSTOP_PAYMENTS_RETRY_ATTEMPTS: names no stack of the file; want BACKSTOP_STACK_RETRY_ATTEMPTS, with STACK one of DEFAULTS, ORDERS, PAYMENTS_EU`,
	}, problems(t, err))
}

// TestParse_JSON: JSON is YAML; its positions are as exact.
func TestParse_JSON(t *testing.T) {
	c, err := parse(t, `{"stacks": {"a": {"retry": {"attempts": 2}, "deadline": "1s"}}}`)
	require.NoError(t, err)
	require.Equal(t, 2, c.Pipeline("a").Explain().MaxAttempts)
	_, err = parse(t, "{\n  \"stacks\": {\"a\": {\"deadline\": 1}}\n}")
	require.Equal(t, []string{`backstop.yaml:2:32: stacks.a.deadline: is the bare number 1; write a duration with its unit, such as "1ms" or "1s"`}, problems(t, err))
}

func TestParse_RefusesMalformedFiles(t *testing.T) {
	for src, want := range map[string]string{
		"":                          "backstop.yaml:1:1: stacks: the file names no stack",
		"stacks: [a, b]":            "backstop.yaml:1:9: stacks: is a list; want a mapping of stack names to stacks",
		"stacks:\n  a: {}\n  a: {}": "backstop.yaml:3:3: stacks.a: is given twice",
		"stacks:\n  defaults: {}":   `backstop.yaml:2:3: stacks.defaults: "defaults" is reserved`,
		"stacks: {a: {}}\nx: 1":     "backstop.yaml:2:1: x: unknown field; remove it, or use one of defaults, stacks, http, grpc",
		"stacks: {a: {\n":           "backstop.yaml:1:1: not YAML or JSON: did not find expected node content",
		"stacks:\n  a: {}\n b: {}":  "backstop.yaml:2:1: not YAML or JSON: did not find expected key",
		"stacks: {a: {deadline: 1s}, b-c: {}, b_c: {}}": "stacks.b_c: has the environment name B_C, as stack \"b-c\" has",
	} {
		_, err := parse(t, src)
		ps := problems(t, err)
		require.Contains(t, strings.Join(ps, "\n"), want, "file %q", src)
	}
}

// TestParse_EnvironmentLeavesAnchorsAlone: an override of a stack written with an
// alias changes that stack only.
func TestParse_EnvironmentLeavesAnchorsAlone(t *testing.T) {
	c, err := parse(t, "stacks:\n  a: &base {retry: {attempts: 3}}\n  b: *base\n", "BACKSTOP_B_RETRY_ATTEMPTS=5")
	require.NoError(t, err)
	require.Equal(t, 3, c.Pipeline("a").Explain().MaxAttempts)
	require.Equal(t, 5, c.Pipeline("b").Explain().MaxAttempts)
}

func TestConfig_ExplainCoversTheRoutingTable(t *testing.T) {
	c, err := config.Load("testdata/backstop.yaml", config.Options{})
	require.NoError(t, err)
	got := c.Explain().String()
	for _, want := range []string{
		"HTTP routes (the most specific pattern wins, as in http.ServeMux; then the default):\n" +
			"  (default)                       → reports   (testdata/backstop.yaml:40:12)\n" +
			"  POST api.example.com/v1/charges → payments   (testdata/backstop.yaml:42:14)\n" +
			"  GET /v1/search/                 → search   (testdata/backstop.yaml:44:14)\n",
		"gRPC routes (a method's route wins over its service's; then the default):\n" +
			"  (default)              → reports   (testdata/backstop.yaml:48:12)\n" +
			"  payments.v1.Payments/* → payments   (testdata/backstop.yaml:50:13)\n" +
			"  search.v1.Search/Query → search   (testdata/backstop.yaml:52:13)\n",
		"stack payments (testdata/backstop.yaml:16:3)\npayments: deadline → breaker → budget → retry → attempt_timeout\n",
		"stack search (testdata/backstop.yaml:26:3)\nsearch: deadline → breaker → retry → attempt_timeout\n",
	} {
		require.Contains(t, got, want)
	}
}

// TestParse_BreakerSlowStart: slow_start reaches the breaker.
func TestParse_BreakerSlowStart(t *testing.T) {
	c, err := parse(t, "stacks:\n  s: {breaker: {slow_start: 10s}}\n")
	require.NoError(t, err)
	require.Contains(t, c.Stage("s", "breaker").(*breaker.Breaker).ExplainStage().Summary, "10s")
}

// TestPipeline_AnUnknownStackNeverRunsBare: a name the file does not hold (a typo:
// users_db for users-db) gets a pipeline that fails every call without running it,
// naming the stacks there are; Lookup says so at start-up.
func TestPipeline_AnUnknownStackNeverRunsBare(t *testing.T) {
	cfg, err := parse(t, "stacks:\n  users-db:\n    retry: {attempts: 3}\n  payments:\n    retry: {attempts: 2}\n")
	require.NoError(t, err)
	ran := false
	err = cfg.Pipeline("users_db").Do(context.Background(), func(context.Context) error { ran = true; return nil })
	require.False(t, ran, "the call ran bare")
	require.ErrorIs(t, err, config.ErrNoStack)
	require.EqualError(t, err, `config: no such stack: "users_db"; the stacks are users-db, payments`)
	_, err = cfg.Lookup("users_db")
	require.ErrorIs(t, err, config.ErrNoStack)
	p, err := cfg.Lookup("users-db")
	require.NoError(t, err)
	require.Equal(t, 3, p.Explain().MaxAttempts)
}

// TestParse_OrderHidesNoFieldProblem: a stack whose order is refused still has
// every field checked; several stacks' problems come in one run.
func TestParse_OrderHidesNoFieldProblem(t *testing.T) {
	_, err := parse(t, `stacks:
  payments:
    order: [retry, deadline]
    deadline: 2s
    retry: {attempts: 0, http_statuses: [200]}
  search:
    order: [hedge, hedge]
    hedge: {attempts: 20, grpc_codes: [UNAVALABLE]}
  orders:
    breaker: {failure_ratio: 2}
`)
	require.Equal(t, []string{
		`backstop.yaml:3:20: stacks.payments.order[1]: O1: deadline at position 2 is inside retry at position 1 (positions: 1 retry, 2 deadline); move the deadline outward or use attempt_timeout, as in order: [deadline, retry]`,
		`backstop.yaml:5:23: stacks.payments.retry.attempts: is 0; want ≥ 1, such as attempts: 3 (1 never retries)`,
		`backstop.yaml:5:42: stacks.payments.retry.http_statuses[0]: is 200; want a status from 400 to 599, such as 503`,
		`backstop.yaml:7:20: stacks.search.order[1]: O6: hedge is listed at positions 1 and 2; list it once: a stack has one of each stage`,
		`backstop.yaml:8:23: stacks.search.hedge.attempts: is 20; want 2 to 5, such as attempts: 2`,
		`backstop.yaml:8:40: stacks.search.hedge.grpc_codes[0]: is "UNAVALABLE"; rename it "UNAVAILABLE"`,
		`backstop.yaml:10:30: stacks.orders.breaker.failure_ratio: is 2; want a number in (0, 1], such as failure_ratio: 0.5`,
	}, problems(t, err))
}

// TestProblem_FixPerKind: each kind of problem says its own fix: the range and an
// example, the name meant, the names known, the move to make.
func TestProblem_FixPerKind(t *testing.T) {
	for _, c := range []struct {
		src, msg, fix string
	}{
		// A value a constructor refuses: its range, in the file's words.
		{"stacks: {s: {retry: {base: 2s, cap: 1s}}}", "is 1s, below base 2s", "want cap ≥ base, such as cap: 5s"},
		{"stacks: {s: {throttle: {k: 0.5}}}", "is 0.5", "want a finite number ≥ 1, such as k: 2"},
		// A 0 that would mean the default.
		{"stacks: {s: {rate_limit: {rate: 5, burst: 0}}}", "is 0", "leave it out for the default, or write a value, such as burst: 10"},
		// An unknown field: the name meant, else the names known.
		{"stacks: {s: {retry: {atempts: 3}}}", "unknown field", `rename it "attempts"`},
		{"stacks: {s: {bulkhead: {size: 3}}}", "unknown field", "remove it, or use one of enabled, max_concurrent, max_queue, max_wait"},
		// An order problem: the move, and an order that obeys every rule.
		{"stacks: {s: {order: [budget, attempt_timeout, retry], budget: {ratio: {}}, attempt_timeout: 1s, retry: {}}}",
			"attempt_timeout at position 2 is outside retry at position 3 (positions: 1 budget, 2 attempt_timeout, 3 retry)",
			"move it inside the retry, or use deadline for an overall deadline, as in order: [budget, retry, attempt_timeout]"},
		// A rule no order can obey: the move alone.
		{"stacks: {s: {budget: {ratio: {}}}}", "budget at position 1 has no retry inside it (positions: 1 budget)", "add a retry after it or remove the budget"},
		// A route naming no stack: the stacks there are.
		{"stacks: {a: {}, b: {}}\ngrpc: {default: orders}", `names no stack "orders"`, "use one of a, b"},
		// A value out of a closed set.
		{"stacks: {s: {rate_limit: {rate: 1, mode: refuze}}}", `is "refuze"`, `use one of wait, refuse (did you mean "refuse"?)`},
		{"stacks: {s: {budget: {}, retry: {}}}", "has neither token_bucket nor ratio",
			"add one, such as token_bucket: {max_tokens: 10, token_ratio: 0.1} or ratio: {ratio: 0.1}"},
		{"stacks: {s: {deadline: -1s}}", "is -1s", `want a duration > 0, such as deadline: 2s, or "off"`},
	} {
		_, err := parse(t, c.src)
		var ce *config.Error
		require.ErrorAs(t, err, &ce, "file %q", c.src)
		require.Len(t, ce.Problems, 1, "file %q: %v", c.src, err)
		p := ce.Problems[0]
		require.Equal(t, c.msg, p.Msg, "file %q", c.src)
		require.Equal(t, c.fix, p.Fix, "file %q", c.src)
	}
}

// TestExplain_SaysWhatEachStackRetries: a retry's line names the HTTP statuses and
// gRPC codes it retries through the routes, the defaults' when the file sets none.
func TestExplain_SaysWhatEachStackRetries(t *testing.T) {
	c, err := parse(t, `stacks:
  payments:
    retry: {attempts: 3, base: 100ms, cap: 1s, http_statuses: [504, 429, 502, 503], grpc_codes: [UNAVAILABLE, RESOURCE_EXHAUSTED]}
  plain:
    retry: {attempts: 2, base: 100ms, cap: 1s}
  search:
    hedge: {attempts: 2, delay: 150ms, grpc_codes: [UNAVAILABLE, DEADLINE_EXCEEDED]}
  once:
    retry: {attempts: 1}
`)
	require.NoError(t, err)
	lines := func(stack string) string {
		for _, se := range c.Explain().Stacks {
			if se.Name == stack {
				return se.Explanation.String()
			}
		}
		t.Fatalf("no stack %s", stack)
		return ""
	}
	require.Contains(t, lines("payments"), "  retry:           up to 3 attempts; retries transient errors only (marked retryable, timeouts, refused or reset connections); "+
		"through HTTP routes it retries statuses 429, 502, 503, 504; through gRPC routes, codes UNAVAILABLE, RESOURCE_EXHAUSTED; "+
		"Full backoff from 100ms to at most 1s;")
	require.Contains(t, lines("plain"), "; through HTTP routes it retries statuses 408, 429, 502, 503, 504; through gRPC routes, codes UNAVAILABLE; ",
		"policyhttp.DefaultClassifier's statuses, policygrpc.DefaultRetryableCode")
	require.Contains(t, lines("search"), "; through HTTP routes it goes on hedging after statuses 408, 429, 502, 503, 504; through gRPC routes, codes UNAVAILABLE, DEADLINE_EXCEEDED\n")
	require.NotContains(t, lines("once"), "through HTTP routes", "1 attempt never retries")

	se := c.Explain().Stacks[0]
	require.Equal(t, []int{429, 502, 503, 504}, se.HTTPStatuses)
	require.Equal(t, []string{"UNAVAILABLE", "RESOURCE_EXHAUSTED"}, se.GRPCCodes)
	raw, err := json.Marshal(se)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"http_statuses":[429,502,503,504],"grpc_codes":["UNAVAILABLE","RESOURCE_EXHAUSTED"]`)
}
