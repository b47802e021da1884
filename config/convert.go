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
// read it, into this package's model: one stack per methodConfig entry (named
// method_config_0, method_config_1, …) and a gRPC route for each of its names, so that
// a channel configured for grpc-go can move to a Backstop file, and be explained and
// linted as one. The conversion follows what policygrpc builds:
//   - timeout becomes the stack's deadline;
//   - retryPolicy becomes a retry with strategy grpc: attempts maxAttempts (at most
//     policygrpc.MaxServiceConfigAttempts), base initialBackoff, cap maxBackoff,
//     multiplier backoffMultiplier (below 1 read as 1, as policygrpc does), and
//     grpc_codes retryableStatusCodes;
//   - hedgingPolicy becomes a hedge of maxAttempts and hedgingDelay (its
//     nonFatalStatusCodes have no field in a hedge and are left out);
//   - retryThrottling becomes each retrying stack's token bucket. One difference: the
//     service config's bucket is the channel's, shared by every method, while each
//     stack of a file has its own.
func FromServiceConfig(sc *policygrpc.ServiceConfig) File {
	var f File
	routes := &GRPCRoutes{}
	thr, throttled := sc.Throttling()
	for i, en := range sc.Entries() {
		name := fmt.Sprintf("method_config_%d", i)
		var s Stack
		if en.Timeout > 0 {
			s.Deadline = &Duration{D: en.Timeout}
		}
		switch {
		case en.Retrying:
			r := &Retry{Attempts: ptr(min(en.MaxAttempts, policygrpc.MaxServiceConfigAttempts)), Strategy: ptr("grpc"),
				Base: &Duration{D: en.InitialBackoff}, Cap: &Duration{D: en.MaxBackoff}, Multiplier: ptr(max(en.BackoffMultiplier, 1))}
			for _, c := range en.RetryableCodes {
				r.GRPCCodes = append(r.GRPCCodes, policygrpc.StatusCodeName(c))
			}
			if r.GRPCCodes == nil {
				r.GRPCCodes = []string{}
			}
			s.Retry = r
		case en.Hedging:
			s.Hedge = &Hedge{Attempts: ptr(min(en.MaxAttempts, policygrpc.MaxServiceConfigAttempts)), Delay: &Duration{D: en.HedgingDelay}}
		}
		if throttled && (en.Retrying || en.Hedging) {
			s.Budget = &Budget{TokenBucket: &TokenBucket{MaxTokens: ptr(thr.MaxTokens), TokenRatio: ptr(thr.TokenRatio)}}
		}
		f.Stacks = append(f.Stacks, NamedStack{Name: name, Stack: s})
		for _, n := range en.Names {
			n = strings.Trim(n, "/")
			if n == "" {
				routes.Default = ptr(name)
				continue
			}
			routes.Routes = append(routes.Routes, GRPCRoute{Name: ptr(n), Stack: ptr(name)})
		}
	}
	f.GRPC = routes
	return f
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
