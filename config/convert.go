package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/backstop-go/backstop/policygrpc"
)

// FromServiceConfig converts a gRPC service config, as policygrpc.ParseServiceConfig
// read it, into this package's model: the file of [ImportServiceConfig], so that a
// channel configured for grpc-go can move to a Backstop file.
func FromServiceConfig(sc *policygrpc.ServiceConfig) File {
	return ImportServiceConfig("", sc).File
}

// ImportServiceConfig converts a gRPC service config, as policygrpc.ParseServiceConfig
// read it from the file name, into this package's model: one stack per methodConfig
// entry (named method_config_0, method_config_1, …) and a gRPC route for each of its
// names. The conversion follows what policygrpc builds:
//   - timeout becomes the stack's deadline;
//   - retryPolicy becomes a retry with strategy grpc: attempts maxAttempts (at most
//     policygrpc.MaxServiceConfigAttempts: a [NoteCapped] says so above it), base
//     initialBackoff (maxBackoff when that is lower, as policygrpc does), cap
//     maxBackoff, multiplier backoffMultiplier, and grpc_codes retryableStatusCodes;
//   - hedgingPolicy becomes a hedge of maxAttempts (capped alike), hedgingDelay and
//     grpc_codes nonFatalStatusCodes;
//   - retryThrottling becomes each retrying stack's token bucket. One difference, a
//     [NoteDiffers]: the service config's bucket is the channel's, shared by every
//     method, while each stack has its own.
func ImportServiceConfig(name string, sc *policygrpc.ServiceConfig) *Import {
	im := &Import{Name: name, Origins: make(map[string]Origin)}
	routes := &GRPCRoutes{}
	thr, throttled := sc.Throttling()
	for i, en := range sc.Entries() {
		stack := fmt.Sprintf("method_config_%d", i)
		o := Origin{Format: FormatGRPC, File: name, ServiceConfig: sc, Entry: en, fields: map[string]string{"": en.Field}}
		var s Stack
		if en.Timeout > 0 {
			s.Deadline = &Duration{D: en.Timeout}
			o.fields["deadline"] = en.Field + ".timeout"
		}
		codes := func() []string {
			out := []string{}
			for _, c := range en.RetryableCodes {
				out = append(out, policygrpc.StatusCodeName(c))
			}
			return out
		}
		pol, attempts := "", min(en.MaxAttempts, policygrpc.MaxServiceConfigAttempts)
		switch {
		case en.Retrying:
			pol = en.Field + ".retryPolicy"
			base, ceiling, strategy := en.Backoff()
			s.Retry = &Retry{Attempts: ptr(attempts), Strategy: ptr("grpc"), Base: &Duration{D: base},
				Cap: &Duration{D: ceiling}, Multiplier: ptr(strategy.Multiplier), GRPCCodes: codes()}
			for rel, f := range map[string]string{"retry": "", "retry.attempts": ".maxAttempts", "retry.strategy": "",
				"retry.base": ".initialBackoff", "retry.cap": ".maxBackoff", "retry.multiplier": ".backoffMultiplier",
				"retry.grpc_codes": ".retryableStatusCodes"} {
				o.fields[rel] = pol + f
			}
			for j := range en.RetryableCodes {
				o.fields[fmt.Sprintf("retry.grpc_codes[%d]", j)] = fmt.Sprintf("%s.retryableStatusCodes[%d]", pol, j)
			}
		case en.Hedging:
			pol = en.Field + ".hedgingPolicy"
			s.Hedge = &Hedge{Attempts: ptr(attempts), Delay: &Duration{D: en.HedgingDelay}, GRPCCodes: codes()}
			for rel, f := range map[string]string{"hedge": "", "hedge.attempts": ".maxAttempts", "hedge.delay": ".hedgingDelay",
				"hedge.grpc_codes": ".nonFatalStatusCodes"} {
				o.fields[rel] = pol + f
			}
			for j := range en.RetryableCodes {
				o.fields[fmt.Sprintf("hedge.grpc_codes[%d]", j)] = fmt.Sprintf("%s.nonFatalStatusCodes[%d]", pol, j)
			}
		}
		if throttled && (en.Retrying || en.Hedging) {
			s.Budget = &Budget{TokenBucket: &TokenBucket{MaxTokens: ptr(thr.MaxTokens), TokenRatio: ptr(thr.TokenRatio)}}
			o.fields["budget"] = "retryThrottling"
			o.fields["budget.token_bucket.max_tokens"] = "retryThrottling.maxTokens"
			o.fields["budget.token_bucket.token_ratio"] = "retryThrottling.tokenRatio"
		}
		im.File.Stacks = append(im.File.Stacks, NamedStack{Name: stack, Stack: s})
		im.Origins[stack] = o
		im.place(stack, o)
		if pol != "" && en.MaxAttempts > policygrpc.MaxServiceConfigAttempts {
			im.note(stack, o, NoteCapped, pol+".maxAttempts", fmt.Sprint(en.MaxAttempts),
				"maxAttempts %d, which gRPC caps at %d; the stack makes %d", en.MaxAttempts, policygrpc.MaxServiceConfigAttempts, attempts)
		}
		if s.Budget != nil {
			im.note(stack, o, NoteDiffers, "retryThrottling", "",
				"the channel's one token bucket, shared by every method; the stack has a bucket of its own, of the same size")
		}
		for j, n := range en.Names {
			n = strings.Trim(n, "/")
			_, pos := o.Field("")
			if line, col := sc.Position(fmt.Sprintf("%s.name[%d]", en.Field, j)); line > 0 {
				pos.Line, pos.Column = line, col
			}
			if n == "" {
				routes.Default = ptr(stack)
				im.pos["grpc.default"] = pos
				continue
			}
			im.pos[fmt.Sprintf("grpc.routes[%d]", len(routes.Routes))] = pos
			im.pos[fmt.Sprintf("grpc.routes[%d].name", len(routes.Routes))] = pos
			routes.Routes = append(routes.Routes, GRPCRoute{Name: ptr(n), Stack: ptr(stack)})
		}
	}
	im.File.GRPC = routes
	return im
}

func ptr[T any](v T) *T { return &v }

// Encode writes f as a configuration file, in YAML, fields in the model's order and
// the fields left unset left out. Parse reads back what it writes.
func Encode(f File) ([]byte, error) {
	n := encode(reflect.ValueOf(f))
	if n == nil {
		n = &yaml.Node{Kind: yaml.MappingNode}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func encode(v reflect.Value) *yaml.Node {
	switch {
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return encode(v.Elem())
	case v.Type() == durationType:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.Interface().(Duration).String()}
	case v.Type() == stacksType:
		if v.Len() == 0 {
			return nil
		}
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, ns := range v.Interface().([]NamedStack) {
			s := encode(reflect.ValueOf(ns.Stack))
			if s == nil {
				s = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: ns.Name}, s)
		}
		return m
	case v.Kind() == reflect.Struct:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if c := encode(v.Field(i)); c != nil {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, c)
			}
		}
		if len(m.Content) == 0 {
			return nil
		}
		return m
	case v.Kind() == reflect.Slice:
		if v.IsNil() {
			return nil
		}
		s := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			s.Content = append(s.Content, encode(v.Index(i)))
		}
		return s
	case v.Kind() == reflect.String:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.String()}
	case v.Kind() == reflect.Int:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatInt(v.Int(), 10)}
	case v.Kind() == reflect.Float64:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatFloat(v.Float(), 'g', -1, 64)}
	case v.Kind() == reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatBool(v.Bool())}
	}
	return nil
}
