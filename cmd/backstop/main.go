// Command backstop explains and lints retry configurations — Envoy routes and gRPC
// service configs — by building the Backstop pipelines that behave the same and
// saying what they will do: attempts per call, the worst-case time, the sleeps, what
// ends a call; and what is wrong with them: attempts that cannot run before the
// timeout, no jitter, gRPC's silent cap of 5 attempts, no retry budget, 500 retried,
// and two retry owners on one call path.
//
// Usage:
//
//	backstop explain [-json] [-envoy route.yaml] [-grpc service_config.json]
//	backstop lint [-json] [-envoy route.yaml] [-grpc service_config.json]
//
// -envoy takes a RouteConfiguration, a VirtualHost, a Route (with or without match: a
// pasted route: block loads as it is) or a RouteAction; a file it refuses is named
// with the line, column and field path of the fault.
//
// lint exits 1 when it finds an error, 2 on bad input or usage, 0 otherwise.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit codes.
const (
	exitOK       = 0
	exitFindings = 1 // lint found an error
	exitUsage    = 2 // bad flags or input
)

const usage = `usage:
  backstop explain [-json] [-envoy route.yaml] [-grpc service_config.json]
  backstop lint    [-json] [-envoy route.yaml] [-grpc service_config.json]

explain says what each route or method will do: attempts, worst-case time, sleeps,
what ends a call. lint reports what is wrong, with a severity; it exits 1 if any
finding is an error. Give -envoy, -grpc or both (lint then also checks that one call
path does not have two retry owners).
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "explain" && args[0] != "lint") {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd := args[0]
	fs := flag.NewFlagSet("backstop "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	envoyPath := fs.String("envoy", "", "an Envoy route configuration, YAML or JSON")
	grpcPath := fs.String("grpc", "", "a gRPC service config, JSON")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "backstop %s: unexpected argument %q\n%s", cmd, fs.Arg(0), usage)
		return exitUsage
	}
	if *envoyPath == "" && *grpcPath == "" {
		fmt.Fprintf(stderr, "backstop %s: give -envoy FILE, -grpc FILE or both\n", cmd)
		return exitUsage
	}
	in, err := load(*envoyPath, *grpcPath)
	if err != nil {
		fmt.Fprintf(stderr, "backstop %s: %v\n", cmd, err)
		return exitUsage
	}
	if cmd == "explain" {
		return explain(in, *asJSON, stdout, stderr)
	}
	return lintCmd(in, *asJSON, stdout, stderr)
}

// input is what the files said.
type input struct {
	envoyFile, grpcFile string
	routes              []*policyenvoy.Route
	grpc                *policygrpc.ServiceConfig
}

func load(envoyPath, grpcPath string) (*input, error) {
	in := &input{envoyFile: envoyPath, grpcFile: grpcPath}
	if envoyPath != "" {
		data, err := os.ReadFile(envoyPath)
		if err != nil {
			return nil, err
		}
		if in.routes, err = policyenvoy.Parse(data); err != nil {
			return nil, fmt.Errorf("%s: %w", envoyPath, err)
		}
	}
	if grpcPath != "" {
		data, err := os.ReadFile(grpcPath)
		if err != nil {
			return nil, err
		}
		if in.grpc, err = policygrpc.ParseServiceConfig(data); err != nil {
			return nil, fmt.Errorf("%s: %w", grpcPath, err)
		}
	}
	return in, nil
}

// explained is one route or method's explanation, for -json.
type explained struct {
	File string `json:"file"`
	policy.Explanation
}

func (e explained) MarshalJSON() ([]byte, error) {
	inner, err := json.Marshal(e.Explanation)
	if err != nil {
		return nil, err
	}
	file, _ := json.Marshal(e.File)
	return append([]byte(`{"file":`+string(file)+`,`), inner[1:]...), nil
}

func explanations(in *input) []explained {
	var out []explained
	for _, r := range in.routes {
		out = append(out, explained{in.envoyFile, r.Explain()})
	}
	if in.grpc != nil {
		for _, e := range in.grpc.Entries() {
			out = append(out, explained{in.grpcFile, e.Pipeline.Explain()})
		}
	}
	return out
}

func explain(in *input, asJSON bool, stdout, stderr io.Writer) int {
	es := explanations(in)
	if asJSON {
		return writeJSON(stdout, stderr, es)
	}
	for i, e := range es {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s\n%s", e.File, e.Explanation)
	}
	for _, r := range in.routes {
		for _, u := range r.Unsupported {
			fmt.Fprintf(stdout, "%s: %s: not honoured by Backstop: %s\n", in.envoyFile, r.Name, u)
		}
	}
	return exitOK
}

func lintCmd(in *input, asJSON bool, stdout, stderr io.Writer) int {
	fs := lint(in)
	if asJSON {
		if code := writeJSON(stdout, stderr, fs); code != exitOK {
			return code
		}
	} else {
		for _, f := range fs {
			fmt.Fprintln(stdout, f)
		}
		errs := 0
		for _, f := range fs {
			if f.Severity == sevError {
				errs++
			}
		}
		fmt.Fprintf(stdout, "%d findings, %d errors\n", len(fs), errs)
	}
	for _, f := range fs {
		if f.Severity == sevError {
			return exitFindings
		}
	}
	return exitOK
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(stderr, "backstop:", err)
		return exitUsage
	}
	return exitOK
}

// joinNames is for messages.
func joinNames(ns []string) string { return strings.Join(ns, ", ") }
