package config

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/backstop-go/backstop/policy"
)

// Explanation says what a configuration will do: which stack each HTTP request and
// each gRPC method runs through, and what each stack does (policy.Explanation). Build
// it with [Config.Explain]; String gives it as text, and it marshals to JSON.
type Explanation struct {
	File string `json:"file"`
	// HTTP and GRPC are the routing tables, in the file's order, the default (Match
	// "") first.
	HTTP []RouteExplanation `json:"http_routes"`
	GRPC []RouteExplanation `json:"grpc_routes"`
	// Stacks explains every stack, in the file's order.
	Stacks []StackExplanation `json:"stacks"`
}

// RouteExplanation is one route: what it matches and the stack it runs.
type RouteExplanation struct {
	// Match is the ServeMux pattern, or the gRPC name ("pkg.Service/Method",
	// "pkg.Service"); "" for the default route.
	Match string `json:"match"`
	Stack string `json:"stack"`
	Pos   Pos    `json:"-"`
}

// StackExplanation is one stack: its stages in order and what its pipeline does.
type StackExplanation struct {
	Name        string             `json:"name"`
	Order       []string           `json:"order"`
	Pos         Pos                `json:"-"`
	Explanation policy.Explanation `json:"explanation"`
	// HTTPStatuses are the statuses the stack retries through HTTP routes,
	// ascending; nil if it never retries.
	HTTPStatuses []int `json:"http_statuses,omitempty"`
	// GRPCCodes are the codes it retries through gRPC routes, as a file names
	// them; nil if it never retries.
	GRPCCodes []string `json:"grpc_codes,omitempty"`
}

// Explain works out what the configuration will do.
func (c *Config) Explain() Explanation {
	e := Explanation{File: c.file}
	for _, r := range c.httpRoutes {
		e.HTTP = append(e.HTTP, RouteExplanation(r))
	}
	for _, r := range c.grpcRoutes {
		e.GRPC = append(e.GRPC, RouteExplanation(r))
	}
	for _, st := range c.stacks {
		e.Stacks = append(e.Stacks, st.explain(c.pos["stacks."+st.name]))
	}
	return e
}

// explain explains a stack, its retry saying what it retries through the routes.
func (st *stack) explain(pos Pos) StackExplanation {
	se := StackExplanation{Name: st.name, Order: st.order, Pos: pos, Explanation: st.pipeline.Explain()}
	r := st.retried
	for i, stage := range se.Explanation.Stack {
		if !stage.Place.OwnsRetries || stage.Attempts < 2 || r.stage == "" {
			continue
		}
		se.HTTPStatuses, se.GRPCCodes = r.statuses, r.names
		se.Explanation.Stack[i].Summary = withRetried(stage.Summary, r)
	}
	return se
}

// withRetried adds to a retry's summary the statuses and codes it retries, after
// the clause that says which errors it retries.
func withRetried(summary string, r retried) string {
	list := func(one, many string, xs []string) string {
		if len(xs) == 0 {
			return "no " + one
		}
		return many + " " + strings.Join(xs, ", ")
	}
	statuses := make([]string, len(r.statuses))
	for i, code := range r.statuses {
		statuses[i] = strconv.Itoa(code)
	}
	verb := "retries"
	if r.stage == StageHedge {
		verb = "goes on hedging after"
	}
	add := fmt.Sprintf("through HTTP routes it %s %s; through gRPC routes, %s", verb,
		list("status", "statuses", statuses), list("code", "codes", r.names))
	const clause = "retries transient errors only ("
	if i := strings.Index(summary, clause); i >= 0 {
		if j := strings.Index(summary[i:], "); "); j >= 0 {
			at := i + j + len("); ")
			return summary[:at] + add + "; " + summary[at:]
		}
	}
	return summary + "; " + add
}

// String gives the explanation as text: the routing tables, then each stack.
func (e Explanation) String() string {
	var b strings.Builder
	table := func(title string, rs []RouteExplanation, what func(string) string) {
		if len(rs) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s\n", title)
		width := 0
		for _, r := range rs {
			width = max(width, len(what(r.Match)))
		}
		for _, r := range rs {
			fmt.Fprintf(&b, "  %-*s → %s   (%s)\n", width, what(r.Match), r.Stack, r.Pos)
		}
	}
	table("HTTP routes (the most specific pattern wins, as in http.ServeMux; then the default):", e.HTTP, func(m string) string {
		if m == "" {
			return "(default)"
		}
		return m
	})
	table("gRPC routes (a method's route wins over its service's; then the default):", e.GRPC, func(m string) string {
		switch {
		case m == "":
			return "(default)"
		case !strings.Contains(strings.TrimPrefix(m, "/"), "/"):
			return strings.TrimPrefix(m, "/") + "/*"
		}
		return strings.TrimPrefix(m, "/")
	})
	for i, s := range e.Stacks {
		if i > 0 || len(e.HTTP)+len(e.GRPC) > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "stack %s (%s)\n", s.Name, s.Pos)
		b.WriteString(s.Explanation.String())
	}
	return b.String()
}

// MarshalJSON writes the explanation with each stack's pipeline explained as
// policy.Explanation marshals it.
func (e Explanation) MarshalJSON() ([]byte, error) {
	type plain Explanation
	return json.Marshal(plain(e))
}

// Position returns where a field of the file was written ("stacks.payments.retry",
// "http.routes[0].match"), and whether it was.
func (c *Config) Position(path string) (Pos, bool) {
	p, ok := c.pos[path]
	return p, ok
}

// Settings returns a stack's settings with the defaults merged in, as they were
// built, and whether there is such a stack.
func (c *Config) Settings(stack string) (Stack, bool) {
	st, ok := c.byName[stack]
	if !ok {
		return Stack{}, false
	}
	return st.settings, true
}

// File returns the name the configuration was loaded under.
func (c *Config) File() string { return c.file }
