package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyk8s"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/sim"
)

const simUsage = `usage:
  backstop sim -scenario FILE [-envoy route.yaml [-route NAME]] [-grpc service_config.json [-method /pkg.Service/Method]]
               [-k8s DIR [-k8s-route NAME]] [-stack a,b,...] [-seeds 1-5] [-out DIR] [-progress]

sim plays a scenario file (a service graph, its load and its faults; see sim/README.md)
in virtual time with Backstop's real stages, once per stack and seed, prints the median
and worst of each figure, and writes each run's summary.json, each stack's spread.json
and charts (PNG) to -out. A service on stack envoy calls its dependencies through the
route -envoy gives (its timeouts and retry_policy), one on stack grpc through the
-grpc service config's method, one on stack k8s through the -k8s route rule (a
Gateway API, Istio or Linkerd route) as a mesh retries: knowing no call path owner,
so that every hop on the stack retries. -stack replaces the file's stack (the services that
name their own keep it); without it the file's stack runs, then envoy, grpc and k8s
if given.
It exits 2 on bad flags or files, 1 if a run fails.
`

// simConfig is what backstop sim was asked to do.
type simConfig struct {
	file     string
	sc       sim.Scenario
	stacks   []sim.Stack
	seeds    []uint64
	out      string
	progress bool
}

// parseSim reads backstop sim's flags and files; it prints what is wrong to stderr
// and returns nil and the exit code.
func parseSim(args []string, stdin io.Reader, stderr io.Writer, terminal bool) (*simConfig, int) {
	fs := flag.NewFlagSet("backstop sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simUsage, "\nflags:\n")
		fs.PrintDefaults()
	}
	file := fs.String("scenario", "", "the scenario file, YAML; - for standard input")
	envoyPath := fs.String("envoy", "", "an Envoy route configuration, YAML or JSON, for stack envoy")
	route := fs.String("route", "", "the route of -envoy stack envoy uses; empty means the first that retries, else the first")
	grpcPath := fs.String("grpc", "", "a gRPC service config, JSON, for stack grpc")
	method := fs.String("method", "", "the method of -grpc stack grpc calls, /pkg.Service/Method; empty means the config's first entry")
	k8sPath := fs.String("k8s", "", "Kubernetes manifests, a YAML file or a directory: Gateway API, Istio or Linkerd routes, for stack k8s")
	k8sRoute := fs.String("k8s-route", "", `the route rule of -k8s stack k8s uses, as explain names it ("VirtualService shop/orders http[0]"); empty means the first that retries, else the first`)
	stacks := fs.String("stack", "", "stacks to run, comma-separated; empty means the file's, then envoy, grpc and k8s if given")
	seeds := fs.String("seeds", "", `seeds: one, a range "1-5" or a list "1,4,7"; empty means the file's seed`)
	out := fs.String("out", "sim-report", "folder for summary.json, spread.json and the charts; empty means none")
	progress := fs.Bool("progress", terminal, "show progress on standard error (default: when it is a terminal)")
	if err := fs.Parse(args); err != nil {
		return nil, exitUsage
	}
	fail := func(format string, a ...any) (*simConfig, int) {
		fmt.Fprintf(stderr, "backstop sim: "+format+"\n", a...)
		return nil, exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0))
	case *file == "":
		return fail("give -scenario FILE")
	case *route != "" && *envoyPath == "":
		return fail("-route needs -envoy")
	case *method != "" && *grpcPath == "":
		return fail("-method needs -grpc")
	case *k8sRoute != "" && *k8sPath == "":
		return fail("-k8s-route needs -k8s")
	case *k8sPath == "-":
		return fail("-k8s reads a file or a directory, not standard input")
	case (*file == "-" && (*envoyPath == "-" || *grpcPath == "-")) || (*envoyPath == "-" && *grpcPath == "-"):
		return fail("only one file can be standard input")
	}
	c := &simConfig{out: *out, progress: *progress}
	custom := map[sim.Stack]sim.ClientFunc{}
	var extra []sim.Stack
	if *envoyPath != "" {
		name, data, err := read(stdin, *envoyPath)
		if err != nil {
			return fail("%v", err)
		}
		fn, err := envoyStack(data, *route)
		if err != nil {
			fmt.Fprintln(stderr, placed(name, err))
			return nil, exitUsage
		}
		custom["envoy"] = fn
		extra = append(extra, "envoy")
	}
	if *grpcPath != "" {
		name, data, err := read(stdin, *grpcPath)
		if err != nil {
			return fail("%v", err)
		}
		fn, err := grpcStack(data, *method)
		if err != nil {
			fmt.Fprintln(stderr, placed(name, err))
			return nil, exitUsage
		}
		custom["grpc"] = fn
		extra = append(extra, "grpc")
	}
	if *k8sPath != "" {
		fn, err := k8sStack(*k8sPath, *k8sRoute)
		if err != nil {
			fmt.Fprintln(stderr, placed(*k8sPath, err))
			return nil, exitUsage
		}
		custom["k8s"] = fn
		extra = append(extra, "k8s")
	}
	name, data, err := read(stdin, *file)
	if err != nil {
		return fail("%v", err)
	}
	c.file = name
	if c.sc, err = sim.ParseScenario(data, custom); err != nil {
		for _, e := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "%s:%s\n", name, e)
		}
		return nil, exitUsage
	}
	if *stacks == "" {
		c.stacks = append([]sim.Stack{c.sc.Stack}, extra...)
		c.stacks = slices.Compact(c.stacks)
	} else {
		for _, s := range strings.Split(*stacks, ",") {
			st := sim.Stack(strings.TrimSpace(s))
			probe := c.sc
			probe.Stack = st
			if probe.Validate() != nil {
				return fail("-stack %q: want naive, owner_only, backstop, or envoy with -envoy, grpc with -grpc, k8s with -k8s", s)
			}
			c.stacks = append(c.stacks, st)
		}
	}
	c.seeds = []uint64{c.sc.Seed}
	if *seeds != "" {
		if c.seeds, err = sim.ParseSeeds(*seeds); err != nil {
			return fail("-seeds %q: %v", *seeds, err)
		}
	}
	return c, exitOK
}

// envoyStack is stack envoy: each hop runs the route's pipeline, read again for the
// hop on the run's clock and jitter, and judges answers with the route's retry_on.
func envoyStack(data []byte, name string) (sim.ClientFunc, error) {
	routes, err := policyenvoy.Parse(data)
	if err != nil {
		return nil, err
	}
	pick := func(routes []*policyenvoy.Route) *policyenvoy.Route {
		for _, r := range routes {
			if r.Name == name {
				return r
			}
		}
		if name != "" {
			return nil
		}
		for _, r := range routes {
			if r.Retrying {
				return r
			}
		}
		return routes[0]
	}
	if len(routes) == 0 || pick(routes) == nil {
		var names []string
		for _, r := range routes {
			names = append(names, strconv.Quote(r.Name))
		}
		return nil, fmt.Errorf("no route %q; the routes are %s", name, strings.Join(names, ", "))
	}
	return func(h sim.Hop) (sim.Client, error) {
		routes, err := policyenvoy.ParseWith(data, policyenvoy.Options{Clock: h.Clock, Rand: h.Rand})
		if err != nil {
			return sim.Client{}, err
		}
		r := pick(routes)
		return sim.Client{Pipeline: r.Pipeline, Classifier: r.Classifier}, nil
	}, nil
}

// grpcStack is stack grpc: each hop runs the method's entry of the service config.
// policygrpc builds an entry's pipeline on the system clock and jitter; the hop's is
// built again from the entry as read, with the same stages (the timeout's deadline,
// retryThrottling's token bucket, a retry with the GRPC strategy or a hedge) on the
// run's clock and jitter, so that a run is repeatable. Answers are judged by gRPC's
// mapping of HTTP statuses to codes (429, 502, 503 and 504 are UNAVAILABLE).
func grpcStack(data []byte, method string) (sim.ClientFunc, error) {
	c, err := policygrpc.ParseServiceConfig(data)
	if err != nil {
		return nil, err
	}
	entries := c.Entries()
	if len(entries) == 0 {
		return nil, errors.New("no methodConfig entry")
	}
	e := entries[0]
	if method != "" {
		var ok bool
		if e, ok = entryFor(entries, method); !ok {
			return nil, fmt.Errorf("no methodConfig entry names %q, its service or the default", method)
		}
	}
	th, throttled := c.Throttling()
	return func(h sim.Hop) (sim.Client, error) {
		var stack []policy.Policy
		if e.Timeout > 0 {
			stack = append(stack, policy.Must(deadline.New(deadline.Options{Timeout: e.Timeout})))
		}
		var owner policy.Policy
		switch {
		case e.Retrying:
			base, ceiling, strategy := e.Backoff()
			owner, err = retry.New(retry.Options{MaxAttempts: min(e.MaxAttempts, policygrpc.MaxServiceConfigAttempts),
				Base: base, Cap: ceiling, Strategy: strategy, Clock: h.Clock, Rand: h.Rand})
		case e.Hedging:
			delay := e.HedgingDelay
			if delay == 0 {
				delay = -1 // A6: no hedgingDelay, every attempt at once
			}
			owner, err = retry.NewHedge(retry.HedgeOptions{MaxAttempts: min(e.MaxAttempts, retry.HedgeMaxAttemptsLimit),
				Delay: delay, Clock: h.Clock})
		}
		if err != nil {
			return sim.Client{}, err
		}
		if owner != nil {
			if throttled {
				b, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: th.MaxTokens, TokenRatio: th.TokenRatio})
				if err != nil {
					return sim.Client{}, err
				}
				stack = append(stack, b)
			}
			stack = append(stack, owner)
		}
		p, err := policy.Wrap(stack...)
		if err != nil {
			return sim.Client{}, err
		}
		return sim.Client{Pipeline: p, Classifier: grpcClassifier(e.RetryableCodes)}, nil
	}, nil
}

// k8sStack is stack k8s: each hop runs the route rule's stack as policyk8s.Import
// converts it (its timeout, tries, per-try timeout, back-off and budget), built again
// for the hop on the run's clock and jitter, and judges answers by the statuses the
// rule retries.
func k8sStack(path, name string) (sim.ClientFunc, error) {
	set, err := policyk8s.Load(path)
	if err != nil {
		return nil, err
	}
	var pick *policyk8s.Route
	for _, r := range set.Routes {
		if name != "" && k8sWhere(r) == name || name == "" && pick == nil && r.Tries != 1 {
			pick = r
		}
	}
	if pick == nil && name == "" && len(set.Routes) > 0 {
		pick = set.Routes[0]
	}
	if pick == nil {
		names := make([]string, len(set.Routes))
		for i, r := range set.Routes {
			names[i] = strconv.Quote(k8sWhere(r))
		}
		if len(names) == 0 {
			return nil, errors.New("no route rule: give HTTPRoute, GRPCRoute or VirtualService manifests")
		}
		return nil, fmt.Errorf("no route rule %q; the rules are %s", name, strings.Join(names, ", "))
	}
	im := policyk8s.Import(path, set)
	stack := ""
	for s, o := range im.Origins {
		if o.Source == pick {
			stack = s
		}
	}
	if _, err := im.Build(config.Options{}); err != nil {
		return nil, err
	}
	return func(h sim.Hop) (sim.Client, error) {
		c, err := im.Build(config.Options{Clock: h.Clock, Rand: h.Rand})
		if err != nil {
			return sim.Client{}, err
		}
		p, err := c.Lookup(stack)
		if err != nil {
			return sim.Client{}, err
		}
		return sim.Client{Pipeline: p, Classifier: c.Classifier(stack), Mesh: true}, nil
	}, nil
}

// entryFor picks the entry for method by gRPC's precedence: the method's own name,
// then its service's, then the default.
func entryFor(entries []policygrpc.Entry, method string) (policygrpc.Entry, bool) {
	svc := method
	if i := strings.LastIndex(method, "/"); i > 0 {
		svc = method[:i+1]
	}
	for _, want := range []string{method, svc, "/"} {
		for _, e := range entries {
			if slices.Contains(e.Names, want) {
				return e, true
			}
		}
	}
	return policygrpc.Entry{}, false
}

// grpcCode is gRPC's mapping of an HTTP status to a status code
// (doc/http-grpc-status-mapping.md).
func grpcCode(status int) codes.Code {
	switch status {
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}

func grpcClassifier(retryable []codes.Code) func(*http.Response, time.Time) error {
	return func(res *http.Response, _ time.Time) error {
		if res.StatusCode < 300 {
			return nil
		}
		c := grpcCode(res.StatusCode)
		err := fmt.Errorf("sim: HTTP %d as gRPC %v", res.StatusCode, c)
		if slices.Contains(retryable, c) {
			return fault.Retryable(err)
		}
		return err
	}
}

// simulate runs every stack and seed of c, writing progress to progress (nil: none),
// the table to stdout and the files to c.out.
func simulate(t *testing.T, c *simConfig, stdout, progress io.Writer) error {
	sc := c.sc
	name := c.file
	if sc.Name != "" {
		name += " (" + sc.Name + ")"
	}
	fmt.Fprintf(stdout, "backstop sim: %s, stacks %v, seeds %v\n", name, c.stacks, c.seeds)
	if c.out != "" {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			return err
		}
	}
	var rows []sim.Row
	var first []sim.Summary // each stack's first seed, for the charts
	for _, stack := range c.stacks {
		var runs []sim.Summary
		for _, seed := range c.seeds {
			sc.Stack, sc.Seed = stack, seed
			var o sim.Options
			label := fmt.Sprintf("%s seed %d", stack, seed)
			if progress != nil {
				until := sc.Until().Seconds()
				o.Progress = func(v time.Duration, calls int) {
					fmt.Fprintf(progress, "\r  %s: %.0f of ~%.0f s virtual, %d calls ", label, v.Seconds(), until, calls)
				}
			}
			start := time.Now()
			s, err := sim.RunWith(t, sc, o)
			if err != nil {
				return err
			}
			if progress != nil {
				el := time.Since(start)
				fmt.Fprintf(progress, "\r  %s: %d calls, %.1f s virtual in %v          \n", label, s.Calls, s.Virtual, el.Round(time.Millisecond))
			}
			runs = append(runs, s)
			if c.out != "" {
				if err := sim.WriteRun(c.out, s); err != nil {
					return err
				}
			}
		}
		sp := sim.SpreadOf(runs)
		rows = append(rows, sim.Row{Stack: stack, Spread: sp})
		first = append(first, runs[0])
		if c.out != "" {
			if err := sim.WriteSpread(c.out, stack, sp); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(stdout)
	sim.WriteTable(stdout, rows)
	if o := first[0].Outage; o != nil {
		fmt.Fprintf(stdout, "\n%s's requests per call started during its fault (%.3g–%.3g s), the first seed:", o.Service, o.From, o.To)
		for _, s := range first {
			fmt.Fprintf(stdout, " %s %.2f (%d in all);", s.Stack, s.Outage.PerCall, s.Requests[o.Service])
		}
		fmt.Fprintln(stdout)
	}
	if c.out == "" {
		return nil
	}
	files, err := writeCharts(c.out, first)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s: summary.json per run, spread.json per stack, %s\n", c.out, strings.Join(files, ", "))
	return nil
}

// simMain is backstop sim, run from main: it exits the process.
func simMain(args []string) {
	terminal := false
	if fi, err := os.Stderr.Stat(); err == nil {
		terminal = fi.Mode()&os.ModeCharDevice != 0
	}
	c, code := parseSim(args, os.Stdin, os.Stderr, terminal)
	if c == nil {
		os.Exit(code)
	}
	sim.Main(func(t *testing.T) int {
		var progress io.Writer
		if c.progress {
			progress = os.Stderr
		}
		if err := simulate(t, c, os.Stdout, progress); err != nil {
			fmt.Fprintln(os.Stderr, "backstop sim:", err)
			return 1
		}
		return exitOK
	})
}
