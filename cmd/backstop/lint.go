package main

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
)

// Severities of a finding.
const (
	sevError   = "error"
	sevWarning = "warning"
	sevInfo    = "info"
)

// finding is one thing lint says.
type finding struct {
	Severity string `json:"severity"`
	Check    string `json:"check"`
	File     string `json:"file"`
	Where    string `json:"where"` // the route or method
	Message  string `json:"message"`
}

func (f finding) String() string {
	return fmt.Sprintf("%s: %s: %s: %s [%s]", f.File, f.Where, f.Severity, f.Message, f.Check)
}

func lint(in *input) []finding {
	var fs []finding
	add := func(sev, check, file, where, format string, args ...any) {
		fs = append(fs, finding{Severity: sev, Check: check, File: file, Where: where, Message: fmt.Sprintf(format, args...)})
	}
	for _, r := range in.routes {
		e := r.Explain()
		if r.Retrying {
			checkFit(add, in.envoyFile, r.Name, e, r.Timeout, r.PerTryTimeout)
			checkJitter(add, in.envoyFile, r.Name, e)
			add(sevWarning, "budget", in.envoyFile, r.Name,
				"retries with no retry budget in the route; bound them with the cluster's circuit_breakers retry_budget")
			for _, c := range r.RetryOn {
				if c == "5xx" {
					add(sevWarning, "retry-500", in.envoyFile, r.Name,
						"retry_on 5xx retries 500, which usually reports a bug a retry hits again; gateway-error retries 502, 503 and 504 only")
				}
			}
		}
		for _, u := range r.Unsupported {
			add(sevInfo, "unsupported", in.envoyFile, r.Name, "not honoured by Backstop: %s", u)
		}
	}
	if in.grpc != nil {
		for _, en := range in.grpc.Entries() {
			where := joinNames(en.Names)
			e := en.Pipeline.Explain()
			if !en.Retrying {
				continue
			}
			checkFit(add, in.grpcFile, where, e, en.Timeout, 0)
			checkJitter(add, in.grpcFile, where, e)
			if en.MaxAttempts > policygrpc.MaxServiceConfigAttempts {
				add(sevWarning, "max-attempts", in.grpcFile, where,
					"retryPolicy.maxAttempts is %d; gRPC silently caps it at %d", en.MaxAttempts, policygrpc.MaxServiceConfigAttempts)
			}
			if in.grpc.Budget() == nil {
				add(sevWarning, "budget", in.grpcFile, where,
					"retries with no retryThrottling: add {\"maxTokens\": 10, \"tokenRatio\": 0.1} so retries stop in an outage")
			}
			for _, c := range en.RetryableCodes {
				if c == codes.Internal || c == codes.Unknown {
					add(sevWarning, "retry-500", in.grpcFile, where,
						"retryableStatusCodes has %v, which usually reports a bug a retry hits again", c)
				}
			}
		}
	}
	// Two owners: a retrying Envoy route in front of a retrying gRPC method on the same path.
	if in.grpc != nil {
		for _, r := range in.routes {
			if !r.Retrying {
				continue
			}
			for _, en := range in.grpc.Entries() {
				if !en.Retrying {
					continue
				}
				for _, name := range en.Names {
					if routeCovers(r.Name, name) {
						add(sevError, "two-owners", in.envoyFile+" + "+in.grpcFile, r.Name+" ~ "+name,
							"the mesh retries (%d attempts) and the app retries (%d attempts) on one call path: up to %d attempts "+
								"per call; if the mesh retries, the app must not (or the reverse)",
							r.Explain().MaxAttempts, en.Pipeline.Explain().MaxAttempts, r.Explain().MaxAttempts*en.Pipeline.Explain().MaxAttempts)
					}
				}
			}
		}
	}
	return fs
}

// checkFit reports attempts that cannot run to their per-attempt timeout before the
// overall timeout ends, when every attempt before them runs to its timeout and every
// sleep is of its mean length: the case the per-attempt timeout is there for.
func checkFit(add func(sev, check, file, where, format string, args ...any), file, where string, e policy.Explanation,
	timeout, perTry time.Duration) {
	if timeout <= 0 || perTry <= 0 || e.MaxAttempts < 2 {
		return
	}
	var sleeps []policy.Sleep
	for _, st := range e.Stack {
		if st.Kind == policy.KindRetry {
			sleeps = st.Sleeps
		}
	}
	start, fit := time.Duration(0), 0
	for k := 1; k <= e.MaxAttempts; k++ {
		if k > 1 && k-2 < len(sleeps) {
			start += sleeps[k-2].Mean
		}
		if start+perTry > timeout {
			break
		}
		fit = k
		start += perTry
	}
	if fit < e.MaxAttempts {
		add(sevError, "attempts-fit", file, where,
			"%d attempts × %v per try plus back-off do not fit in the %v timeout: when attempts time out, only %d of %d can run",
			e.MaxAttempts, perTry, timeout, fit, e.MaxAttempts)
	}
}

// checkJitter reports retries whose sleeps have no spread.
func checkJitter(add func(sev, check, file, where, format string, args ...any), file, where string, e policy.Explanation) {
	for _, st := range e.Stack {
		for _, s := range st.Sleeps {
			if s.Max > 0 && s.Min == s.Max {
				add(sevWarning, "jitter", file, where, "retries sleep without jitter: clients that fail together retry together")
				return
			}
		}
	}
}

// routeCovers reports whether an Envoy route named by its match ("prefix /api",
// "path /x") sends the gRPC path given (/pkg.Service/Method, /pkg.Service/, /).
func routeCovers(route, grpcPath string) bool {
	switch {
	case strings.HasPrefix(route, "prefix "):
		p := strings.TrimPrefix(route, "prefix ")
		return strings.HasPrefix(grpcPath, p) || grpcPath == "/" || strings.HasPrefix(p, grpcPath)
	case strings.HasPrefix(route, "path "):
		p := strings.TrimPrefix(route, "path ")
		return p == grpcPath || grpcPath == "/" || (strings.HasSuffix(grpcPath, "/") && strings.HasPrefix(p, grpcPath))
	}
	return true // a named or regex route: assume it may carry the call
}
