// Command backstop explains and lints retry configurations — Backstop's own
// configuration files, Envoy routes and gRPC service configs — in their own words:
// what each route or method will do (tries, timeouts, the back-off as Envoy or gRFC
// A6 documents it, whether a server's Retry-After or pushback is honoured, the worst
// case), and what is dangerous in them, each finding with its file:line:column, a
// one-line why and the fix.
//
// Usage:
//
//	backstop explain [-json] [-config backstop.yaml [-env]] [-envoy route.yaml] [-grpc service_config.json] [-k8s DIR]
//	backstop lint [-json] [-max-worst-case 30s] [-config backstop.yaml [-env]] [-envoy route.yaml] [-grpc service_config.json] [-k8s DIR [-service NAME]]
//	backstop sim -scenario FILE [-envoy route.yaml] [-grpc service_config.json] [-k8s DIR] [-out DIR]
//
// -config takes a Backstop configuration file (package config of the config module):
// explain prints its HTTP and gRPC routing tables and what every stack does; lint
// reports every problem the loader finds (an ordering rule under its number, O1–O7)
// and the same findings as for the other configs (no-timeout, worst-case,
// attempts-fit, retry-500), plus no-budget. The file is checked as written, unless
// -env applies this process's BACKSTOP_<STACK>_<FIELD> overrides to it.
//
// sim plays a scenario file in virtual time with Backstop's real stages (module sim):
// what a route or a service config does to a database during an outage. See sim.go.
//
// -envoy takes a RouteConfiguration, a VirtualHost, a Route (with or without match: a
// pasted route: block loads as it is) or a RouteAction, in YAML or JSON; -grpc a
// service config in JSON; -k8s Kubernetes manifests, a YAML file or a directory, of
// Gateway API, Istio and Linkerd routes and policies (module policyk8s). A file named
// - is read from standard input (one at most).
//
// lint matches every source given into call paths, outermost first: a gateway's route,
// the app's stacks (-config, -grpc), the sidecar's route (-envoy, the mesh's -k8s
// routes). For each path of more than one layer it reports the owners and the attempts
// per user request (call-path), two layers that retry (two-owners, with the owner to
// keep), and a layer whose try ends before the one beneath it stops retrying
// (path-timeouts). -service names the Service the app runs as, so that gateway routes
// to it are in front of its stacks. See path.go and docs/mesh.md.
//
// One path explains and lints all three: an Envoy config is read by policyenvoy and a
// service config by policygrpc (so what Envoy or gRPC refuses is refused), then each is
// imported into the config package's model (config.ImportEnvoy,
// config.ImportServiceConfig) as a -config file is loaded into it; explain and lint
// then read every stack of the model alike, speaking of an imported stack in its
// original's words and placing what they say in its original file. What the model
// says otherwise than the original is a config.Note: lint reports the notes that are
// findings (unknown-retry-on, not-honoured, status-codes-ignored, max-attempts), and
// explain prints the others on a "Backstop's stack" row. Every finding and error is placed at file:line:column, a finding about a
// file as a whole at its 1:1.
//
// lint exits 1 when it finds an error (a config Envoy or gRPC refuses is one), 2 on
// bad usage or a file it cannot read, 0 otherwise; explain exits 2 on a config it
// cannot read or that is refused.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyk8s"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sim" {
		simMain(os.Args[2:]) // exits
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK       = 0
	exitFindings = 1 // lint found an error
	exitUsage    = 2 // bad flags or input
)

const usage = `usage:
  backstop explain [-json] [-config backstop.yaml [-env]] [-envoy route.yaml] [-grpc service_config.json] [-k8s DIR]
  backstop lint    [-json] [-max-worst-case 30s] [-config backstop.yaml [-env]] [-envoy route.yaml] [-grpc service_config.json]
                   [-k8s DIR [-service NAME]]
  backstop sim     -scenario FILE [-envoy route.yaml] [-grpc service_config.json] [-k8s DIR] [-out DIR]

explain says what each Backstop stack and route, Envoy route or gRPC method will do:
tries, timeouts, back-off, Retry-After and pushback, the worst case. lint reports what
is dangerous, each finding at file:line:column with why and the fix; it exits 1 if any
finding is an error. Give -config, -envoy, -grpc, -k8s or several: lint then matches
them into call paths (gateway, app, sidecar) and checks that each has one retry owner. A file named -
is standard input. sim plays a scenario in virtual time with the real stages
(backstop sim -h).
`

// stdinName is how standard input is named in output.
const stdinName = "<stdin>"

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, usage)
		return exitUsage
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case args[0] != "explain" && args[0] != "lint":
		fmt.Fprintf(stderr, "backstop: unknown command %q; want explain, lint or sim\n\n%s", args[0], usage)
		return exitUsage
	}
	cmd := args[0]
	fs := flag.NewFlagSet("backstop "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	envoyPath := fs.String("envoy", "", "an Envoy route configuration, YAML or JSON; - for standard input")
	grpcPath := fs.String("grpc", "", "a gRPC service config, JSON; - for standard input")
	k8sPath := fs.String("k8s", "", "Kubernetes manifests, a YAML file or a directory of them: Gateway API, Istio and Linkerd routes and policies; - for standard input")
	configPath := fs.String("config", "", "a Backstop configuration file, YAML or JSON; - for standard input")
	service := fs.String("service", "", "the Kubernetes Service the app of -config and -grpc runs as: gateway routes that send to it are upstream of its stacks")
	useEnv := fs.Bool("env", false, "apply this process's BACKSTOP_ environment overrides to -config, as a program that passes os.Environ() would")
	asJSON := fs.Bool("json", false, "print JSON")
	maxWorst := DefaultMaxWorstCase
	if cmd == "lint" {
		fs.DurationVar(&maxWorst, "max-worst-case", DefaultMaxWorstCase, "report a worst case above this")
	}
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "backstop %s: unexpected argument %q\n%s", cmd, fs.Arg(0), usage)
		return exitUsage
	}
	switch {
	case *envoyPath == "" && *grpcPath == "" && *configPath == "" && *k8sPath == "":
		fmt.Fprintf(stderr, "backstop %s: give -config FILE, -envoy FILE, -grpc FILE, -k8s PATH or several\n", cmd)
		return exitUsage
	case stdinCount(*envoyPath, *grpcPath, *configPath, *k8sPath) > 1:
		fmt.Fprintf(stderr, "backstop %s: only one of -config, -envoy, -grpc and -k8s can read standard input\n", cmd)
		return exitUsage
	case maxWorst <= 0:
		fmt.Fprintf(stderr, "backstop %s: -max-worst-case is %v; want a duration > 0\n", cmd, maxWorst)
		return exitUsage
	}
	var o config.Options
	if *useEnv {
		o.Env = os.Environ()
	}
	in, err := load(stdin, *configPath, o, *envoyPath, *grpcPath)
	if err != nil {
		fmt.Fprintf(stderr, "backstop %s: %v\n", cmd, err)
		return exitUsage
	}
	in.service = *service
	if *k8sPath != "" {
		src, err := loadK8s(stdin, *k8sPath)
		if err != nil {
			fmt.Fprintf(stderr, "backstop %s: %v\n", cmd, err)
			return exitUsage
		}
		in.sources = append(in.sources, src)
	}
	if cmd == "explain" {
		return explain(in, *asJSON, stdout, stderr)
	}
	return lintCmd(in, maxWorst, *asJSON, stdout, stderr)
}

// input is what the files said, each in the config package's model.
type input struct {
	sources []*source // -config, then -envoy, then -grpc, then -k8s, as given
	// service is -service: the Kubernetes Service the app of -config and -grpc runs as.
	service string
}

// The formats of a source: a Backstop file, or the formats the config package imports.
const (
	formatBackstop = "backstop"
	formatEnvoy    = config.FormatEnvoy
	formatGRPC     = config.FormatGRPC
)

// source is one file given: its configuration in the model, or why it was refused.
type source struct {
	format string
	file   string
	data   []byte
	config *config.Config
	// k8s is what a -k8s source read: its route rules and policies.
	k8s *policyk8s.Set
	// err is why the file was refused: by its own parser (a *policyenvoy.ConfigError,
	// a *policygrpc.ServiceConfigError) or by the model's loader (a *config.Error).
	err error
}

func stdinCount(paths ...string) int {
	n := 0
	for _, p := range paths {
		if p == "-" {
			n++
		}
	}
	return n
}

func read(stdin io.Reader, path string) (name string, data []byte, err error) {
	if path == "-" {
		data, err = io.ReadAll(stdin)
		if err != nil {
			return stdinName, nil, fmt.Errorf("reading standard input: %w", err)
		}
		return stdinName, data, nil
	}
	data, err = os.ReadFile(path)
	return path, data, err
}

// load reads the files given ("" names none) into the model; a file that is refused
// is kept as its error, for lint to report and explain to print.
func load(stdin io.Reader, configPath string, o config.Options, envoyPath, grpcPath string) (*input, error) {
	var names [3]string
	var data [3][]byte
	for i, path := range []string{configPath, envoyPath, grpcPath} {
		if path == "" {
			continue
		}
		var err error
		if names[i], data[i], err = read(stdin, path); err != nil {
			return nil, err
		}
	}
	in := parse(names[1], data[1], names[2], data[2])
	if names[0] != "" {
		c, err := config.Parse(names[0], data[0], o)
		in.sources = append([]*source{{format: formatBackstop, file: names[0], data: data[0], config: c, err: err}}, in.sources...)
	}
	return in, nil
}

// parse reads an Envoy route configuration and a gRPC service config ("" names
// none) into the model: each is read by its own parser, which refuses what Envoy or
// gRPC refuses, then imported (config.ImportEnvoy, config.ImportServiceConfig), so
// that every format is explained and linted by one path.
func parse(envoyName string, envoyData []byte, grpcName string, grpcData []byte) *input {
	in := &input{}
	if envoyName != "" {
		src := &source{format: formatEnvoy, file: envoyName, data: envoyData}
		var routes []*policyenvoy.Route
		if routes, src.err = policyenvoy.Parse(envoyData); src.err == nil {
			src.config, src.err = config.ImportEnvoy(envoyName, routes).Build(config.Options{})
		}
		in.sources = append(in.sources, src)
	}
	if grpcName != "" {
		src := &source{format: formatGRPC, file: grpcName, data: grpcData}
		var sc *policygrpc.ServiceConfig
		if sc, src.err = policygrpc.ParseServiceConfig(grpcData); src.err == nil {
			src.config, src.err = config.ImportServiceConfig(grpcName, sc).Build(config.Options{})
		}
		in.sources = append(in.sources, src)
	}
	return in
}

// placed prints each problem of a refusal at file:line:column, one a line.
func placed(file string, err error) string {
	ps := problems(err)
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = placedOne(file, p)
	}
	return strings.Join(lines, "\n")
}

// placedOne prints one problem at file:line:column.
func placedOne(file string, err error) string {
	var ee *policyenvoy.ConfigError
	var ge *policygrpc.ServiceConfigError
	var ke *policyk8s.ConfigError
	line, col, msg := 1, 1, err.Error()
	switch {
	case errors.As(err, &ke):
		if ke.File != "" {
			file = ke.File
		}
		if ke.Line > 0 {
			line, col = ke.Line, max(ke.Column, 1)
		}
		msg = ke.Msg
		if ke.Path != "" {
			msg = ke.Path + ": " + msg
		}
	case errors.As(err, &ee):
		if ee.Line > 0 {
			line, col = ee.Line, max(ee.Column, 1)
		}
		msg = ee.Msg
		if ee.Path != "" {
			msg = ee.Path + ": " + msg
		}
	case errors.As(err, &ge):
		if ge.Line > 0 {
			line, col = ge.Line, max(ge.Column, 1)
		}
		msg = ge.Msg
		if ge.Path != "" {
			msg = ge.Path + " " + msg
		}
	}
	return fmt.Sprintf("%s:%d:%d: %s", file, line, col, msg)
}

func explain(in *input, asJSON bool, stdout, stderr io.Writer) int {
	failed := false
	for _, src := range in.sources {
		var ce *config.Error
		switch {
		case src.err == nil:
			continue
		case errors.As(src.err, &ce):
			for _, p := range ce.Problems {
				fmt.Fprintln(stderr, p)
			}
		case src.format == formatBackstop:
			fmt.Fprintf(stderr, "%s:1:1: %v\n", src.file, src.err)
		default:
			fmt.Fprintln(stderr, placed(src.file, src.err))
		}
		failed = true
	}
	if failed {
		return exitUsage
	}
	var views []any
	for _, src := range in.sources {
		if src.format == formatK8s {
			views = append(views, k8sViews(src.k8s)...)
			continue
		}
		views = append(views, viewsOf(src.config)...)
	}
	if asJSON {
		return writeJSON(stdout, stderr, views)
	}
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		v.(interface{ text(io.Writer) }).text(stdout)
	}
	// What -k8s read and did not use: kinds skipped, annotations its mesh ignores.
	for _, src := range in.sources {
		if src.k8s == nil {
			continue
		}
		for i, n := range src.k8s.Notes {
			if i == 0 && len(views) > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "note: %s\n", n)
		}
	}
	return exitOK
}

func lintCmd(in *input, maxWorst time.Duration, asJSON bool, stdout, stderr io.Writer) int {
	fs := lint(in, maxWorst)
	errs := 0
	for _, f := range fs {
		if f.Level == levelError {
			errs++
		}
	}
	if asJSON {
		if fs == nil {
			fs = []finding{}
		}
		if code := writeJSON(stdout, stderr, fs); code != exitOK {
			return code
		}
	} else {
		for _, f := range fs {
			fmt.Fprintln(stdout, f)
		}
		fmt.Fprintf(stdout, "%s, %s\n", plural(len(fs), "finding"), plural(errs, "error"))
	}
	if errs > 0 {
		return exitFindings
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

// plural is "1 finding", "2 findings".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
