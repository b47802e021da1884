package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policy"
)

// configView is a Backstop configuration explained: its routing tables and stacks.
type configView struct{ e config.Explanation }

func (v configView) text(w io.Writer) { io.WriteString(w, v.e.String()) }

func (v configView) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Config string                    `json:"config"` // "backstop"
		File   string                    `json:"file"`
		HTTP   []config.RouteExplanation `json:"http_routes"`
		GRPC   []config.RouteExplanation `json:"grpc_routes"`
		Stacks []config.StackExplanation `json:"stacks"`
	}{"backstop", v.e.File, v.e.HTTP, v.e.GRPC, v.e.Stacks})
}

// configRefused turns each problem of a refused Backstop configuration into a
// finding: "order" for a broken ordering rule, "refused" for the rest.
func (l *linter) configRefused(file string, err error) {
	var ce *config.Error
	if !errors.As(err, &ce) {
		l.add("refused", file, 0, 0, "", "", "", "%v", err)
		return
	}
	for _, p := range ce.Problems {
		id, fix, msg := "refused", "correct the field as the config package's documentation says", p.Msg
		if p.Rule != "" {
			id, fix, msg = "order", "reorder the stack's order field, or leave it out for the canonical order, which obeys every rule", p.Rule+": "+p.Msg
		}
		where := p.Pos.File
		if p.Path != "" {
			msg = p.Path + ": " + msg
		}
		if p.Pos.Env != "" { // a value from the environment: the file as a whole, naming the variable
			where, msg = file, "$"+p.Pos.Env+": "+msg
		}
		l.add(id, where, p.Pos.Line, p.Pos.Column, "", p.Path, fix, "%s", msg)
	}
}

// stack lints one stack of a Backstop configuration.
func (l *linter) stack(c *config.Config, se config.StackExplanation) {
	s, _ := c.Settings(se.Name)
	where := "stack " + se.Name
	add := func(id, rel, fix, format string, args ...any) {
		pos, field := positionOf(c, se.Name, rel)
		l.add(id, c.File(), pos.Line, pos.Column, where, field, fix, format, args...)
	}
	e := se.Explanation
	retrying := e.MaxAttempts > 1
	if !retrying {
		return
	}
	retryField := "retry"
	if slices.Contains(se.Order, "hedge") {
		retryField = "hedge"
	}
	if !slices.Contains(se.Order, "deadline") {
		add("no-timeout", retryField, "give the stack a deadline, e.g. deadline: 2s, that its callers can wait",
			"%d attempts with no deadline: unbounded unless every caller sets one", e.MaxAttempts)
	}
	if e.WorstCaseFrom == "attempts" {
		l.worstCase(e, func(fix, format string, args ...any) { add("worst-case", "attempt_timeout", fix, format, args...) },
			fmt.Sprintf("give the stack a deadline of %v or less", l.maxWorstCase))
	} else {
		l.worstCase(e, func(fix, format string, args ...any) { add("worst-case", "deadline", fix, format, args...) },
			fmt.Sprintf("lower the deadline to %v or less", l.maxWorstCase))
	}
	if s.Deadline != nil && !s.Deadline.Off && s.AttemptTimeout != nil && !s.AttemptTimeout.Off {
		fitAttempts(e, s.Deadline.D, s.AttemptTimeout.D, func(fit int, need time.Duration) {
			add("attempts-fit", "attempt_timeout", fmt.Sprintf("raise the deadline to %v, or lower %s.attempts to %d", need, retryField, max(fit, 1)),
				"%d attempts of attempt_timeout %v and their back-off do not fit in the deadline %v: when attempts time out, only %d of %d run",
				e.MaxAttempts, s.AttemptTimeout.D, s.Deadline.D, fit, e.MaxAttempts)
		})
	}
	if !slices.Contains(se.Order, "budget") {
		add("no-budget", retryField, "add a budget, e.g. budget: {token_bucket: {max_tokens: 10, token_ratio: 0.1}}",
			"retries with no budget: in an outage every call makes all %d attempts", e.MaxAttempts)
	}
	if s.Retry != nil {
		for i, code := range s.Retry.HTTPStatuses {
			if code == 500 {
				add("retry-500", fmt.Sprintf("retry.http_statuses[%d]", i), "retry 502, 503 and 504, the statuses of a server that may answer next time",
					"http_statuses 500 usually reports a bug that a retry hits again")
			}
		}
		for i, code := range s.Retry.GRPCCodes {
			if code == "INTERNAL" || code == "UNKNOWN" {
				add("retry-500", fmt.Sprintf("retry.grpc_codes[%d]", i), "retry UNAVAILABLE, the code of a server that may answer next time",
					"grpc_codes %s usually reports a bug that a retry hits again", code)
			}
		}
	}
}

// positionOf returns where a stack's field was written: in the stack, else in the
// defaults, else the stack's name.
func positionOf(c *config.Config, stack, rel string) (config.Pos, string) {
	for p := rel; p != ""; {
		for _, full := range []string{"stacks." + stack + "." + p, "defaults." + p} {
			if pos, ok := c.Position(full); ok {
				return pos, full
			}
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	pos, _ := c.Position("stacks." + stack)
	return pos, "stacks." + stack
}

// fitAttempts calls report when the attempts cannot all run to their timeout, with
// their mean back-off, before the deadline: fit is how many can, need the deadline
// they all need.
func fitAttempts(e policy.Explanation, deadline, perTry time.Duration, report func(fit int, need time.Duration)) {
	if e.MaxAttempts < 2 {
		return
	}
	var sleeps []policy.Sleep
	for _, st := range e.Stack {
		if st.Kind == policy.KindRetry {
			sleeps = st.Sleeps
		}
	}
	start, fit, need := time.Duration(0), 0, time.Duration(0)
	for k := 1; k <= e.MaxAttempts; k++ {
		if k > 1 && k-2 < len(sleeps) {
			start += sleeps[k-2].Mean
		}
		need = start + perTry
		if need <= deadline {
			fit = k
		}
		start += perTry
	}
	if fit < e.MaxAttempts {
		report(fit, need)
	}
}
