package policygrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
)

// a6Example is the service config of gRFC A6's examples: a retryPolicy for one
// service, a timeout, and retryThrottling.
const a6Example = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "grpc.testing.TestService"}],
    "timeout": "1.5s",
    "waitForReady": true,
    "retryPolicy": {
      "maxAttempts": 4,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }, {
    "name": [{"service": "grpc.testing.TestService", "method": "UnaryCall"}],
    "retryPolicy": {
      "maxAttempts": 9,
      "initialBackoff": "0.01s",
      "maxBackoff": "0.01s",
      "backoffMultiplier": 1,
      "retryableStatusCodes": ["ABORTED", 14]
    }
  }, {
    "name": [{}],
    "timeout": "30s"
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

func TestParseServiceConfig_A6Example(t *testing.T) {
	c, err := policygrpc.ParseServiceConfig([]byte(a6Example))
	require.NoError(t, err)
	require.NotNil(t, c.Budget())
	require.Equal(t, 10.0, c.Budget().MaxTokens())
	require.Equal(t, "deadline → budget → retry", c.Pipeline("/grpc.testing.TestService/EmptyCall").String(), "service entry")
	require.Equal(t, "budget → retry", c.Pipeline("/grpc.testing.TestService/UnaryCall").String(), "method entry beats service entry")
	require.Equal(t, "deadline", c.Pipeline("/other.Service/Call").String(), "default entry")

	// End to end on a real server, through the service entry: 4 attempts.
	s := serve(t, &server{answer: always(status.Error(codes.Unavailable, "down"))})
	client := dial(t, s.addr, c.DialOptions()...)
	_, err = client.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	// 10 tokens: the budget allows retries while tokens > 5, so of EmptyCall's 4
	// attempts all run (tokens 10 → 6 after 4 failures).
	require.Equal(t, 4, s.calls())
	require.InDelta(t, 6.0, c.Budget().Tokens(), 1e-9)

	// Through the method entry: its maxAttempts 9 is capped at 5, and its codes, given
	// by name (ABORTED) and by number (14, UNAVAILABLE), are both retried. The bucket
	// is the channel's, shared: it is refilled first so that it allows the retries.
	for range 40 {
		c.Budget().OnSuccess()
	}
	for _, code := range []codes.Code{codes.Aborted, codes.Unavailable} {
		s := serve(t, &server{answer: always(status.Error(code, "busy"))})
		client := dial(t, s.addr, c.DialOptions()...)
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		require.Equal(t, code, status.Code(err))
		require.Equal(t, policygrpc.MaxServiceConfigAttempts, s.calls(), "%v: maxAttempts 9 capped at 5", code)
		for range 60 {
			c.Budget().OnSuccess()
		}
	}
}

func TestParseServiceConfig_RefusesWhatA6Refuses(t *testing.T) {
	rp := func(body string) string {
		return `{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {` + body + `}}]}`
	}
	const ok = `"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]`
	for _, tt := range []struct{ json, field string }{
		{rp(strings.Replace(ok, `"maxAttempts": 3`, `"maxAttempts": 1`, 1)), "methodConfig[0].retryPolicy.maxAttempts is 1"},
		{rp(strings.Replace(ok, `"maxAttempts": 3, `, ``, 1)), "methodConfig[0].retryPolicy.maxAttempts is missing"},
		{rp(strings.Replace(ok, `"0.1s"`, `"0s"`, 1)), "initialBackoff is \"0s\""},
		{rp(strings.Replace(ok, `"0.1s"`, `"100ms"`, 1)), "initialBackoff is \"100ms\""},
		{rp(strings.Replace(ok, `"0.1s"`, `"s"`, 1)), "initialBackoff is \"s\""},
		{rp(strings.Replace(ok, `"0.1s"`, `".s"`, 1)), "initialBackoff is \".s\""},
		{rp(strings.Replace(ok, `"0.1s"`, `"0.1234567891s"`, 1)), "initialBackoff is \"0.1234567891s\""},
		{rp(strings.Replace(ok, `"backoffMultiplier": 2`, `"backoffMultiplier": 0`, 1)), "backoffMultiplier is 0"},
		{rp(strings.Replace(ok, `["UNAVAILABLE"]`, `[]`, 1)), "retryableStatusCodes is empty"},
		{rp(strings.Replace(ok, `["UNAVAILABLE"]`, `["OK"]`, 1)), "retryableStatusCodes[0] is OK"},
		{rp(strings.Replace(ok, `["UNAVAILABLE"]`, `["NOT_A_CODE"]`, 1)), `retryableStatusCodes[0] is "NOT_A_CODE"; want a gRPC status code`},
		{rp(strings.Replace(ok, `["UNAVAILABLE"]`, `[17]`, 1)), `retryableStatusCodes[0] is 17; want`},
		{rp(strings.Replace(ok, `["UNAVAILABLE"]`, `["unavailable"]`, 1)), `retryableStatusCodes[0] is "unavailable"; gRPC's Go implementation reads status names in upper case only: write "UNAVAILABLE"`},
		{rp(strings.Replace(ok, `"maxAttempts": 3`, `"maxAttempts": "3"`, 1)), `methodConfig[0].retryPolicy.maxAttempts is a JSON string; want an integer`},
		{`{"methodConfig": [{"name": [{"method": "m"}]}]}`, "methodConfig[0].name[0] has method \"m\" but no service"},
		{`{"methodConfig": [{"name": [{"service": "s"}]}, {"name": [{"service": "s"}]}]}`, "methodConfig[1].name[0] names \"s/\" again"},
		{`{"methodConfig": [{"name": [], "retryPolicy": {"maxAttempts": 1}}]}`, "methodConfig[0].retryPolicy.maxAttempts is 1"}, // an empty name list is still read, as grpc-go reads it
		{`{"methodConfig": [{"name": [{"service": "s"}], "timeout": "-1s"}]}`, "methodConfig[0].timeout is \"-1s\""},
		{`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 2}, "retryPolicy": {}}]}`, "methodConfig[0].hedgingPolicy is set with retryPolicy"},
		{`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {}}]}`, "methodConfig[0].hedgingPolicy.maxAttempts is missing"},
		{`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 1}}]}`, "hedgingPolicy.maxAttempts is 1"},
		{`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "-1s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`, "hedgingPolicy.hedgingDelay is \"-1s\""},
		{`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 2, "nonFatalStatusCodes": ["OK"]}}]}`, "nonFatalStatusCodes[0] is OK"},
		{`{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}`, "retryThrottling"},
		{`{"methodConfig": 5}`, "invalid service config"},
		{`{} {}`, "data after the object"},
	} {
		_, err := policygrpc.ParseServiceConfig([]byte(tt.json))
		if !errors.Is(err, policygrpc.ErrServiceConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("ParseServiceConfig(%s) = %v; want ErrServiceConfig naming %q", tt.json, err, tt.field)
		}
	}
}

// TestParseServiceConfig_DurationsAsA6WritesThem: a proto3 Duration's whole seconds
// and fraction are each optional, not both — A6's own examples write ".1s" and ".5s".
func TestParseServiceConfig_DurationsAsA6WritesThem(t *testing.T) {
	const cfg = `{"methodConfig": [{"name": [{"service": "s"}], "timeout": ".5s", "retryPolicy": {"maxAttempts": 4,
  "initialBackoff": ".1s", "maxBackoff": "1.s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}},
  {"name": [{"service": "h"}], "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": ".5s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`
	c, err := policygrpc.ParseServiceConfig([]byte(cfg))
	require.NoError(t, err)
	e := c.Entries()
	require.Equal(t, 500*time.Millisecond, e[0].Timeout)
	require.Equal(t, 100*time.Millisecond, e[0].InitialBackoff)
	require.Equal(t, time.Second, e[0].MaxBackoff)
	require.Equal(t, 500*time.Millisecond, e[1].HedgingDelay)
}

// TestParseServiceConfig_BackoffAsA6Computes: A6 asks only that the backoffs and the
// multiplier be > 0; retry N waits min(initialBackoff·multiplier^(N−1), maxBackoff)
// ±20 %. A maxBackoff below initialBackoff holds every wait at maxBackoff, and a
// multiplier below 1 shrinks the waits.
func TestParseServiceConfig_BackoffAsA6Computes(t *testing.T) {
	policyOf := func(initial, maxB string, mult float64) string {
		return fmt.Sprintf(`{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 4,
  "initialBackoff": %q, "maxBackoff": %q, "backoffMultiplier": %v, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`, initial, maxB, mult)
	}
	for _, tt := range []struct {
		initial, maxB string
		mult          float64
		centres       []time.Duration // of retries 1, 2, 3
	}{
		{"2s", "1s", 2, []time.Duration{time.Second, time.Second, time.Second}},
		{"0.4s", "1s", 0.5, []time.Duration{400 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond}},
	} {
		c, err := policygrpc.ParseServiceConfig([]byte(policyOf(tt.initial, tt.maxB, tt.mult)))
		require.NoError(t, err, "%s/%s×%v", tt.initial, tt.maxB, tt.mult)
		st := c.Pipeline("/s/M").Explain().Stack
		var sleeps []policy.Sleep
		for _, s := range st {
			if len(s.Sleeps) > 0 {
				sleeps = s.Sleeps
			}
		}
		require.Len(t, sleeps, 3, "%s/%s×%v", tt.initial, tt.maxB, tt.mult)
		for i, want := range tt.centres {
			lo, hi := time.Duration(0.8*float64(want)), time.Duration(1.2*float64(want)) // A6 and grpc-go: up to 1.2·maxBackoff
			require.InDelta(t, float64(lo), float64(sleeps[i].Min), float64(time.Millisecond), "retry %d min", i+1)
			require.InDelta(t, float64(hi), float64(sleeps[i].Max), float64(time.Millisecond), "retry %d max", i+1)
		}
	}
}

// Every refusal names the line and column of the field at fault, and the rule it
// breaks where tools tell it apart.
func TestParseServiceConfig_ErrorsArePlaced(t *testing.T) {
	const cfg = `{
  "methodConfig": [{
    "name": [{ "service": "s" }],
    "retryPolicy": {
      "maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE", %s]
    }%s
  }]
}`
	for _, tt := range []struct {
		code, timeout string
		line, col     int
		path          string
		rule          error
		want          string
	}{
		{`"NOT_A_CODE"`, "", 6, 47, "methodConfig[0].retryPolicy.retryableStatusCodes[1]", policygrpc.ErrStatusCode,
			`policygrpc: invalid service config: line 6, column 47: methodConfig[0].retryPolicy.retryableStatusCodes[1] is "NOT_A_CODE"; ` +
				`want a gRPC status code: a name such as "UNAVAILABLE", or its number 1–16`},
		{`"OK"`, "", 6, 47, "methodConfig[0].retryPolicy.retryableStatusCodes[1]", policygrpc.ErrStatusCode, "is OK; want a status code other than OK"},
		{`0`, "", 6, 47, "methodConfig[0].retryPolicy.retryableStatusCodes[1]", policygrpc.ErrStatusCode, "is OK"},
		{`"ABORTED"`, `, "timeout": "-2s"`, 7, 8, "methodConfig[0].timeout", policygrpc.ErrNegativeDuration, `methodConfig[0].timeout is "-2s"; want a positive duration`},
		{`"ABORTED"`, `, "timeout": 2`, 7, 19, "methodConfig[0].timeout", nil, `methodConfig[0].timeout is a JSON number; want a string`},
		{`"ABORTED"`, `, "timeout": "2s",`, 8, 3, "", nil, "is not JSON: invalid character '}'"},
	} {
		_, err := policygrpc.ParseServiceConfig(fmt.Appendf(nil, cfg, tt.code, tt.timeout))
		var ce *policygrpc.ServiceConfigError
		if !errors.As(err, &ce) || !errors.Is(err, policygrpc.ErrServiceConfig) {
			t.Fatalf("code %s, timeout %q: err = %v; want a *ServiceConfigError", tt.code, tt.timeout, err)
		}
		if ce.Line != tt.line || ce.Column != tt.col || ce.Path != tt.path || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("code %s, timeout %q: %v (at %d:%d, path %q); want %d:%d, %q, holding %q",
				tt.code, tt.timeout, err, ce.Line, ce.Column, ce.Path, tt.line, tt.col, tt.path, tt.want)
		}
		if tt.rule != nil && !errors.Is(err, tt.rule) {
			t.Errorf("code %s, timeout %q: %v does not match %v", tt.code, tt.timeout, err, tt.rule)
		}
		if strings.Contains(err.Error(), `"\"`) {
			t.Errorf("%v quotes a value twice", err)
		}
	}

	c, err := policygrpc.ParseServiceConfig(fmt.Appendf(nil, cfg, `"ABORTED"`, `, "timeout": "2s"`))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Entries()[0]
	for _, tt := range []struct {
		path      string
		line, col int
	}{
		{e.Field, 2, 20}, {e.Field + ".timeout", 7, 8}, {e.Field + ".retryPolicy.maxAttempts", 5, 7},
		{e.Field + ".retryPolicy.retryableStatusCodes[1]", 6, 47}, {e.Field + ".retryPolicy.nowhere", 4, 5}, {"retryThrottling", 1, 1},
	} {
		if l, col := c.Position(tt.path); l != tt.line || col != tt.col {
			t.Errorf("Position(%q) = %d:%d; want %d:%d", tt.path, l, col, tt.line, tt.col)
		}
	}
	if e.InitialBackoff != 100*time.Millisecond || e.MaxBackoff != time.Second || e.BackoffMultiplier != 2 || e.Timeout != 2*time.Second {
		t.Errorf("entry = %+v; want the retryPolicy's backoff and the timeout as written", e)
	}
}

// TestParseServiceConfig_TheSeedLoads: the seed's service config, as pasted, loads.
func TestParseServiceConfig_TheSeedLoads(t *testing.T) {
	data, err := os.ReadFile("testdata/seed-grpc-service-config.json")
	require.NoError(t, err)
	c, err := policygrpc.ParseServiceConfig(data)
	require.NoError(t, err)
	require.Equal(t, "budget → retry", c.Pipeline("/orders.v1.OrderService/Get").String())
	require.Equal(t, 4, c.Entries()[0].MaxAttempts)
}

// problems returns each problem of err, in order.
func problems(t *testing.T, err error) []*policygrpc.ServiceConfigError {
	t.Helper()
	require.ErrorIs(t, err, policygrpc.ErrServiceConfig)
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []*policygrpc.ServiceConfigError
	for _, e := range errs {
		var ce *policygrpc.ServiceConfigError
		require.ErrorAs(t, e, &ce)
		out = append(out, ce)
	}
	return out
}

// TestParseServiceConfig_ReportsEveryProblemAtOnce: a bad timeout, a maxAttempts of
// the wrong type and a status code in lower case come back in one error. They are
// in the file's order, each placed and saying what to write instead. The
// maxAttempts of the wrong type is not also "missing".
func TestParseServiceConfig_ReportsEveryProblemAtOnce(t *testing.T) {
	data, err := os.ReadFile("testdata/three-problems.json")
	require.NoError(t, err)
	_, err = policygrpc.ParseServiceConfig(data)
	require.Error(t, err)
	const prefix = "policygrpc: invalid service config: "
	require.Equal(t, []string{
		prefix + `line 4, column 5: methodConfig[0].timeout is "2"; want a positive duration such as "1.5s"`,
		prefix + `line 6, column 22: methodConfig[0].retryPolicy.maxAttempts is a JSON string; want an integer`,
		prefix + `line 10, column 47: methodConfig[0].retryPolicy.retryableStatusCodes[1] is "unavailable"; ` +
			`gRPC's Go implementation reads status names in upper case only: write "UNAVAILABLE"`,
	}, strings.Split(err.Error(), "\n"))
	ps := problems(t, err)
	require.Len(t, ps, 3)
	require.ErrorIs(t, ps[2], policygrpc.ErrStatusCode)
	require.NotErrorIs(t, ps[0], policygrpc.ErrStatusCode)
}

// TestParseServiceConfig_ReportsEveryEntrysProblems: problems of several entries, of
// their names and of retryThrottling come back together, in the input's order.
func TestParseServiceConfig_ReportsEveryEntrysProblems(t *testing.T) {
	const cfg = `{
  "methodConfig": [
    {"name": [{"service": "a"}], "retryPolicy": {"maxAttempts": 3}},
    {"name": [{"service": "a"}, {"method": "m"}], "timeout": "-1s",
     "hedgingPolicy": {"maxAttempts": 2, "nonFatalStatusCodes": ["OK", 99]}},
    {"name": 5}
  ],
  "retryThrottling": {"maxTokens": 0, "tokenRatio": -1}
}`
	_, err := policygrpc.ParseServiceConfig([]byte(cfg))
	var got []string
	for _, p := range problems(t, err) {
		got = append(got, fmt.Sprintf("%d:%d %s %s", p.Line, p.Column, p.Path, p.Msg))
	}
	require.Equal(t, []string{
		`3:34 methodConfig[0].retryPolicy.initialBackoff is missing; want a duration > 0 such as "0.1s"`, // placed at retryPolicy
		`3:34 methodConfig[0].retryPolicy.maxBackoff is missing; want a duration > 0 such as "1s"`,
		`3:34 methodConfig[0].retryPolicy.backoffMultiplier is missing; want a number > 0`,
		`3:34 methodConfig[0].retryPolicy.retryableStatusCodes is empty; want at least one code, e.g. ["UNAVAILABLE"]`,
		`4:15 methodConfig[1].name[0] names "a/" again (first at methodConfig[0].name[0]); want each name once`,
		`4:33 methodConfig[1].name[1] has method "m" but no service; want a service with a method`,
		`4:51 methodConfig[1].timeout is "-1s"; want a positive duration such as "1.5s"`,
		`5:66 methodConfig[1].hedgingPolicy.nonFatalStatusCodes[0] is OK; want a status code other than OK: OK is a success, never retried`,
		`5:72 methodConfig[1].hedgingPolicy.nonFatalStatusCodes[1] is 99; want a gRPC status code: a name such as "UNAVAILABLE", or its number 1–16`,
		`6:14 methodConfig[2].name is a JSON number; want an array`,
		`8:23 retryThrottling.maxTokens is refused: MaxTokens is 0; want a number in (0, 1000]`,
		`8:39 retryThrottling.tokenRatio is refused: TokenRatio is -1; want a finite number > 0`,
	}, got, "%v", err)
	require.ErrorIs(t, err, policygrpc.ErrNegativeDuration)
	require.ErrorIs(t, err, policygrpc.ErrStatusCode)
}

// FuzzParseServiceConfig: any input either fails with a ServiceConfigError placed
// inside the input, or gives a config whose pipelines can be looked up for any method
// and whose entries are placed inside the input.
func FuzzParseServiceConfig(f *testing.F) {
	for _, s := range []string{
		a6Example, `{}`, `null`, `[]`,
		`{"methodConfig": [{"name": [{}], "timeout": "0.000000001s"}]}`,
		`{"methodConfig": [{"name": [{"service": "s", "method": "m"}], "timeout": "99999999999999999999s"}]}`,
		`{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 1000000, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 1e308, "retryableStatusCodes": [16]}}]}`,
		`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 1000000, "hedgingDelay": "0.5s", "nonFatalStatusCodes": ["UNAVAILABLE", 4]}}]}`,
		`{"methodConfig": [{"retryPolicy": {"maxAttempts": 1}}, {"name": [], "timeout": "1s"}]}`, // no name: skipped; empty: read
		`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 2}}]}`,  // no nonFatalStatusCodes
		`{"retryThrottling": {"MaxTokens": 10, "tokenRatio": 0.1, "surprise": {"x": [1]}}}`,      // unknown field
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := policygrpc.ParseServiceConfig([]byte(s))
		lines := strings.Count(s, "\n") + 1
		if err != nil {
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			prev := [2]int{}
			for _, e := range errs {
				var ce *policygrpc.ServiceConfigError
				if !errors.Is(e, policygrpc.ErrServiceConfig) || !errors.As(e, &ce) {
					t.Fatalf("ParseServiceConfig(%q) = %v; want ServiceConfigErrors", s, err)
				}
				if ce.Line < 0 || ce.Line > lines || (ce.Line > 0) != (ce.Column > 0) {
					t.Fatalf("ParseServiceConfig(%q) = %v: placed at %d:%d, outside the input's %d lines", s, err, ce.Line, ce.Column, lines)
				}
				// In the input's order.
				if at := [2]int{ce.Line, ce.Column}; at[0] < prev[0] || at[0] == prev[0] && at[1] < prev[1] {
					t.Fatalf("ParseServiceConfig(%q) = %v: %d:%d after %d:%d", s, err, at[0], at[1], prev[0], prev[1])
				}
				prev = [2]int{ce.Line, ce.Column}
			}
			return
		}
		for _, e := range c.Entries() {
			if l, col := c.Position(e.Field); l < 1 || l > lines || col < 1 {
				t.Fatalf("ParseServiceConfig(%q): entry %s placed at %d:%d", s, e.Field, l, col)
			}
		}
		for _, m := range []string{"/s/m", "/grpc.testing.TestService/EmptyCall", "", "/"} {
			_ = c.Pipeline(m).String()
		}
	})
}

// Every status code's name round-trips through the service config's reading of it.
func TestStatusCodeName_IsWhatAServiceConfigReads(t *testing.T) {
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		name := policygrpc.StatusCodeName(c)
		var back codes.Code
		if err := back.UnmarshalJSON([]byte(`"` + name + `"`)); err != nil || back != c {
			t.Errorf("StatusCodeName(%v) = %q, which reads back as %v (%v)", c, name, back, err)
		}
	}
	if got := policygrpc.StatusCodeName(codes.DeadlineExceeded); got != "DEADLINE_EXCEEDED" {
		t.Errorf("StatusCodeName(DeadlineExceeded) = %q, want DEADLINE_EXCEEDED", got)
	}
}

// FuzzParseServiceConfig_RetryThrottling checks the retryThrottling object against
// grpc-go's own parser, the oracle: in a config with a methodConfig (grpc-go checks
// retryThrottling only there), Backstop accepts what grpc-go accepts and refuses what
// it refuses.
func FuzzParseServiceConfig_RetryThrottling(f *testing.F) {
	for _, s := range []string{
		`{"maxTokens": 10, "tokenRatio": 0.1}`,
		`{"MaxTokens": 10, "TokenRatio": 0.1}`,           // encoding/json matches any case
		`{"maxTokens": 10, "tokenRatio": 0.1, "x": [1]}`, // unknown fields are ignored
		`{"maxTokens": 1000, "tokenRatio": 1e-3}`,
		`{"maxTokens": 1001, "tokenRatio": 0.1}`,
		`{"maxTokens": 10}`,
		`{"maxTokens": 10, "tokenRatio": 0.1, "maxtokens": 2000}`, // the last of a name wins
		`{"maxtokens": 2000, "tokenRatio": 0.1, "maxTokens": 10}`,
		`{"maxTokens": 10, "tokenRatio": 0.0001}`, // under 0.001: A6 reads 0, grpc-go does not
		`null`, `{}`, `[]`, `"x"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, obj string) {
		doc := `{"methodConfig": [{"name": [{"service": "s"}]}], "retryThrottling": ` + obj + `}`
		if !json.Valid([]byte(doc)) {
			return
		}
		cc, gerr := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultServiceConfig(doc))
		if cc != nil {
			_ = cc.Close()
		}
		c, berr := policygrpc.ParseServiceConfig([]byte(doc))
		if gerr == nil && berr != nil && strings.Contains(berr.Error(), "0 to three decimals") {
			// A6 supports three decimals and ignores the rest, so a value under 0.001
			// is 0 and refused; grpc-go keeps every decimal. Backstop follows A6.
			return
		}
		if (gerr == nil) != (berr == nil) {
			t.Fatalf("retryThrottling %s: grpc-go says %v, ParseServiceConfig says %v", obj, gerr, berr)
		}
		if berr != nil || bytes.Equal(bytes.TrimSpace([]byte(obj)), []byte("null")) {
			return
		}
		if th, ok := c.Throttling(); !ok || !(th.MaxTokens > 0 && th.MaxTokens <= 1000 && th.TokenRatio > 0) {
			t.Fatalf("retryThrottling %s: Throttling() = %+v, %v; want the bounds A6 sets", obj, th, ok)
		}
	})
}
