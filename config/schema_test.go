package config_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/backstop-go/backstop/config"
)

var update = flag.Bool("update", false, "rewrite schema.json from the model")

// descriptions are the schema's words for the fields, by their path in a stack or
// in the file.
var descriptions = map[string]string{
	"defaults":             "The stack every stack inherits from, field by field.",
	"stacks":               "The named stacks, one per dependency. Names start with a letter; letters, digits, _ and - follow.",
	"http":                 "Routes that pick a stack per HTTP request.",
	"grpc":                 "Routes that pick a stack per gRPC method.",
	"order":                "The stages outermost first. Without it: rate_limit, deadline, bulkhead, throttle, breaker, budget, retry, hedge, attempt_timeout.",
	"deadline":             "The overall deadline of a call, sleeps included, e.g. \"2s\"; \"off\" for none.",
	"attempt_timeout":      "The limit of each attempt, e.g. \"300ms\"; needs a retry or hedge (rule O3); \"off\" for none.",
	"breaker":              "A circuit breaker named after its stack. Defaults: 5 consecutive failures, then 1 probe every 750ms to 825ms until one succeeds.",
	"budget":               "A retry budget: exactly one of token_bucket and ratio.",
	"retry":                "The retry. Defaults: 3 attempts, strategy full, base 100ms, cap 5s, max_hint 30s.",
	"hedge":                "Hedged attempts. Defaults: 2 attempts, delay 2s. A stack has a retry or a hedge (rule O2).",
	"throttle":             "Client-side adaptive throttling. Defaults: k 2, window 2m.",
	"bulkhead":             "A cap on concurrent calls. Defaults: 10, no queue.",
	"rate_limit":           "A client-side rate limiter; rate is required.",
	"enabled":              "false leaves the stage out, even if the defaults have it.",
	"consecutive_failures": "Trip after this many failures in a row.",
	"failure_ratio":        "Trip on this share of failures over window instead, in (0, 1].",
	"min_requests":         "Calls the window needs before the ratio can trip (default 20).",
	"window":               "A rolling window, e.g. \"10s\".",
	"open_timeout":         "How long the breaker stays open when it trips, and the interval between its probes (default 750ms).",
	"max_open_timeout":     "The longest probe interval, as failed probes double it (default: open_timeout, no doubling).",
	"half_open_probes":     "Calls the half-open breaker lets through (default 1).",
	"slow_call":            "A success slower than this counts as a failure.",
	"token_bucket":         "gRFC A6 retryThrottling.",
	"max_tokens":           "The bucket's size, in (0, 1000].",
	"token_ratio":          "Tokens a success refunds.",
	"ratio":                "Retries at most this share of recent calls.",
	"min_per_second":       "A floor of retries per second (default 10).",
	"attempts":             "Attempts per call, the first included.",
	"strategy":             "The backoff strategy (default full); envoy is Envoy's retry_back_off.",
	"base":                 "The first backoff window (default 100ms).",
	"cap":                  "The largest backoff window (default 5s).",
	"multiplier":           "Strategy grpc's growth per retry (default 1.6).",
	"max_hint":             "The longest server hint (Retry-After, pushback) waited for (default 30s); \"off\" waits for none.",
	"http_statuses":        "HTTP statuses retried, replacing 408, 429, 502, 503, 504.",
	"grpc_codes":           "gRPC status codes retried (for a hedge: after which it goes on hedging), replacing UNAVAILABLE.",
	"delay":                "How long an attempt may go unanswered before the next starts (default 2s).",
	"k":                    "Requests per accepted request before refusing (default 2).",
	"max_concurrent":       "Calls at once (default 10).",
	"max_queue":            "Calls that may wait for a slot (default 0).",
	"max_wait":             "The longest a call waits.",
	"rate":                 "Calls per second.",
	"burst":                "Calls at once after a quiet spell (default one second's worth).",
	"mode":                 "What a call that finds no token does (default wait).",
	"default":              "The stack of calls no route matches. Without one, an HTTP request no route matches fails with policy.ErrNoPipeline; a gRPC call is sent once, as gRPC sends a method with no retry policy.",
	"routes":               "The routes.",
	"match":                "An http.ServeMux pattern (Go 1.22): \"[METHOD ][HOST]/[PATH]\".",
	"stack":                "The stack the route runs.",
	"name":                 "\"pkg.Service/Method\", or \"pkg.Service\" for every method of the service.",
}

var enums = map[string][]string{
	"strategy":   {"full", "equal", "decorrelated", "none", "grpc", "envoy"},
	"mode":       {"wait", "refuse"},
	"order":      {"rate_limit", "deadline", "bulkhead", "throttle", "breaker", "budget", "retry", "hedge", "attempt_timeout"},
	"grpc_codes": {"CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"},
}

const durationPattern = `^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`

// schemaOf builds the schema of a type of the model; defs collects the stages and the
// stack as named definitions.
func schemaOf(t reflect.Type, name string, defs map[string]any) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := map[string]any{}
	if d, ok := descriptions[name]; ok {
		s["description"] = d
	}
	switch {
	case t == reflect.TypeFor[config.Duration]():
		s["type"] = "string"
		s["pattern"] = durationPattern
		if name == "deadline" || name == "attempt_timeout" || name == "max_hint" {
			s["pattern"] = `^(off|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
		}
	case t == reflect.TypeFor[[]config.NamedStack]():
		s["type"] = "object"
		s["patternProperties"] = map[string]any{`^[A-Za-z][A-Za-z0-9_-]*$`: map[string]any{"$ref": "#/$defs/stack"}}
		s["additionalProperties"] = false
	case t == reflect.TypeFor[config.Stack]() && name != "":
		defs["stack"] = schemaOf(t, "", defs)
		s["$ref"] = "#/$defs/stack"
	case t.Kind() == reflect.Struct:
		s["type"] = "object"
		s["additionalProperties"] = false
		props := map[string]any{}
		for i := range t.NumField() {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			props[tag] = schemaOf(t.Field(i).Type, tag, defs)
		}
		s["properties"] = props
		if t == reflect.TypeFor[config.Budget]() {
			s["anyOf"] = []any{map[string]any{"required": []string{"token_bucket"}}, map[string]any{"required": []string{"ratio"}},
				map[string]any{"properties": map[string]any{"enabled": map[string]any{"const": false}}, "required": []string{"enabled"}}}
		}
	case t.Kind() == reflect.Slice:
		s["type"] = "array"
		s["items"] = schemaOf(t.Elem(), "", defs)
		if e, ok := enums[name]; ok {
			s["items"] = map[string]any{"enum": e}
		}
	case t.Kind() == reflect.String:
		s["type"] = "string"
		if e, ok := enums[name]; ok {
			s["enum"] = e
		}
	case t.Kind() == reflect.Int:
		s["type"] = "integer"
	case t.Kind() == reflect.Float64:
		s["type"] = "number"
	case t.Kind() == reflect.Bool:
		s["type"] = "boolean"
	}
	return s
}

func generateSchema() []byte {
	defs := map[string]any{}
	root := schemaOf(reflect.TypeFor[config.File](), "", defs)
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = "https://github.com/backstop-go/backstop/config/schema.json"
	root["title"] = "Backstop configuration"
	root["description"] = "Named resilience stacks per dependency, the defaults they inherit field by field, and the HTTP and gRPC routes that pick one. Durations are Go duration strings."
	root["$defs"] = defs
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// TestSchema_MatchesTheModel: schema.json is what the model's types say, field for
// field; run with -update after changing the model.
func TestSchema_MatchesTheModel(t *testing.T) {
	want := generateSchema()
	if *update {
		require.NoError(t, os.WriteFile("schema.json", want, 0o644))
	}
	require.Equal(t, string(want), string(config.Schema()), "schema.json is stale: go test -run TestSchema -update")
}

// TestSchema_AcceptsTheWorkedExample checks the worked example against the schema's
// properties: every field it writes is one the schema names.
func TestSchema_AcceptsTheWorkedExample(t *testing.T) {
	var s map[string]any
	require.NoError(t, json.Unmarshal(config.Schema(), &s))
	data, err := os.ReadFile("testdata/backstop.yaml")
	require.NoError(t, err)
	var doc any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	defs := s["$defs"].(map[string]any)
	var check func(path string, v any, sch map[string]any)
	check = func(path string, v any, sch map[string]any) {
		if ref, ok := sch["$ref"].(string); ok {
			sch = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		switch v := v.(type) {
		case map[string]any:
			props, _ := sch["properties"].(map[string]any)
			pat, _ := sch["patternProperties"].(map[string]any)
			for k, x := range v {
				p, ok := props[k].(map[string]any)
				if !ok {
					for _, ps := range pat {
						p, ok = ps.(map[string]any), true
					}
				}
				require.True(t, ok, "%s.%s: not in the schema", path, k)
				check(path+"."+k, x, p)
			}
		case []any:
			items, _ := sch["items"].(map[string]any)
			for i, x := range v {
				check(path+"["+string(rune('0'+i))+"]", x, items)
			}
		case string:
			require.Contains(t, []any{"string", nil}, sch["type"], "%s: a string", path)
		}
	}
	check("", doc, s)
}
