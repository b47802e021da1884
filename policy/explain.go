package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/backstop-go/backstop/internal/check"
)

// A StageExplainer is a [Policy] that can say what it does, for [Pipeline.Explain].
// Every built-in policy is one; a third-party policy may be one too.
//
// Implementers: ExplainStage must be cheap and must not change the policy's state.
// It describes the policy as built (its options), not a moment of its state.
type StageExplainer interface {
	ExplainStage() Stage
}

// Stage is what one policy of a pipeline does, as [StageExplainer] says it.
type Stage struct {
	// Kind is the stage's Placement.Kind.
	Kind string `json:"-"`
	// Place is the stage's placement.
	Place Placement `json:"-"`
	// Summary says what the stage does, in a sentence or two.
	Summary string `json:"summary"`
	// Limit is the stage's time limit: an overall deadline or a per-attempt timeout;
	// 0 for other kinds.
	Limit time.Duration `json:"-"`
	// Attempts is, for a retry, the most attempts a call makes, the first included.
	Attempts int `json:"attempts,omitempty"`
	// Sleeps are, for a retry, the sleeps before retries 1, 2, …. Those come before
	// attempts 2, 3, …. Server hints are left out.
	Sleeps []Sleep `json:"sleeps,omitempty"`
	// MoreSleeps is, for a retry, how many more sleeps follow those listed, each like
	// the last listed.
	MoreSleeps int `json:"more_sleeps,omitempty"`
	// MaxHint is, for a retry, the longest server hint it waits for (Retry-After,
	// pushback). Jitter is included. It is 0 if the retry never waits for one.
	MaxHint time.Duration `json:"-"`
	// Overlapping is set for a retry whose attempts may run at once (a hedge). Each
	// of Sleeps is then the most one attempt's start may lag the last's. A call then
	// lasts at most those sleeps and one attempt, not every attempt end to end.
	Overlapping bool `json:"-"`
	// Refusal says how the stage may end a call without running it; "" if it never does.
	Refusal string `json:"refusal,omitempty"`
	// Wait is the longest the stage may hold a call before letting it run: a
	// queue, a wait for a token. Inside the retry, it is how long each attempt may
	// be held. Wait is 0 if the stage never waits. It is 0 too if only the call's
	// deadline bounds the wait; then WaitUnbounded is set.
	Wait time.Duration `json:"-"`
	// WaitUnbounded is set for a stage that may hold a call as long as its deadline
	// allows. Without an overall deadline, nothing then bounds how long a call takes.
	WaitUnbounded bool `json:"wait_unbounded,omitempty"`
}

// Sleep is the range of one backoff sleep.
type Sleep struct {
	Min, Mean, Max time.Duration
}

// MarshalJSON writes a Sleep in seconds.
func (s Sleep) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Min  float64 `json:"min_seconds"`
		Mean float64 `json:"mean_seconds"`
		Max  float64 `json:"max_seconds"`
	}{s.Min.Seconds(), s.Mean.Seconds(), s.Max.Seconds()})
}

// Explanation says what a pipeline will do, worked out from its bound stack. It
// says how many attempts reach the dependency and how long a call can take. It
// says when retries stop and what ends a call. Build it with [Pipeline.Explain].
// String gives it as text. It marshals to JSON with max_attempts and
// worst_case_seconds at the top.
type Explanation struct {
	Pipeline string
	// Stack is each stage, outermost first.
	Stack []Stage
	// MaxAttempts is the most attempts one call makes: the retry's MaxAttempts, or 1.
	MaxAttempts int
	// MaxAttemptsPerCallPath is the most attempts a call makes under a retry that
	// owns the call path further up. It is 1, by the owner rule. A pipeline without
	// a retry has MaxAttempts here; the owner's attempts multiply them anyway.
	MaxAttemptsPerCallPath int
	// WorstCase is the longest a call can take, sleeps and waits included. It is 0
	// if nothing bounds it. Without an overall deadline, that is so when there is no
	// per-attempt timeout. It is so too when a stage may wait as long as the call's
	// deadline allows.
	WorstCase time.Duration
	// WorstCaseFrom says what bounds it: "deadline", "attempts", or "" if unbounded.
	WorstCaseFrom string
	// Refusals lists how stages may end a call without an attempt, outermost first.
	Refusals []string
	// Unexplained names the stages that cannot say what they do: third-party
	// policies that are no StageExplainer. The figures above leave them out.
	Unexplained []string
}

// Explain works out what p will do. A nil Pipeline explains an empty one.
func (p *Pipeline) Explain() Explanation {
	e := Explanation{MaxAttempts: 1}
	if p == nil {
		e.MaxAttemptsPerCallPath = 1
		return e
	}
	e.Pipeline = p.name
	var overall, perAttempt time.Duration
	var sleeps time.Duration
	overlapping := false                      // the retry is a hedge: its attempts may run at once
	var callWaits, attemptWaits time.Duration // what waiting stages add, once per call or per attempt
	unboundedWait := false
	for i, pol := range p.policies {
		pl := p.places[i]
		x, ok := pol.(StageExplainer)
		if !ok {
			e.Unexplained = append(e.Unexplained, fmt.Sprintf("%s at position %d (%T)", pl.Kind, i+1, pol))
			e.Stack = append(e.Stack, Stage{Kind: pl.Kind, Place: pl, Summary: fmt.Sprintf("a %T: it does not say what it does", pol)})
			continue
		}
		st := x.ExplainStage()
		st.Kind, st.Place = pl.Kind, pl
		e.Stack = append(e.Stack, st)
		switch {
		case pl.Deadline:
			overall = st.Limit
		case pl.Retry == InsideRetry:
			perAttempt = st.Limit
		case pl.OwnsRetries:
			e.MaxAttempts = max(st.Attempts, 1)
			overlapping = st.Overlapping
			for _, s := range st.Sleeps {
				sleeps = check.AddSat(sleeps, max(s.Max, st.MaxHint))
			}
			if n := len(st.Sleeps); n > 0 && st.MoreSleeps > 0 {
				sleeps = check.AddSat(sleeps, check.MulSat(max(st.Sleeps[n-1].Max, st.MaxHint), st.MoreSleeps))
			}
		}
		if st.Refusal != "" {
			e.Refusals = append(e.Refusals, st.Refusal)
		}
		unboundedWait = unboundedWait || st.WaitUnbounded
		if p.retry >= 0 && i > p.retry {
			attemptWaits = check.AddSat(attemptWaits, st.Wait)
		} else {
			callWaits = check.AddSat(callWaits, st.Wait)
		}
	}
	e.MaxAttemptsPerCallPath = e.MaxAttempts
	if p.retry >= 0 {
		e.MaxAttemptsPerCallPath = 1
	}
	if perAttempt > 0 && !unboundedWait {
		ends := e.MaxAttempts // attempts run end to end
		if overlapping {
			ends = 1 // the last starts after the sleeps at the latest; the others end before it
		}
		e.WorstCase, e.WorstCaseFrom = check.AddSat(check.AddSat(check.MulSat(check.AddSat(perAttempt, attemptWaits), ends), sleeps), callWaits), "attempts"
	}
	if overall > 0 && (e.WorstCase == 0 || overall <= e.WorstCase) {
		e.WorstCase, e.WorstCaseFrom = overall, "deadline"
	}
	return e
}

// String gives the explanation as a few lines of text.
func (e Explanation) String() string {
	var b strings.Builder
	name := e.Pipeline
	if name == "" {
		name = "pipeline"
	}
	fmt.Fprintf(&b, "%s:", name)
	if len(e.Stack) == 0 {
		b.WriteString(" no policies: fn runs once, as it is\n")
		return b.String()
	}
	for i, st := range e.Stack {
		if i > 0 {
			b.WriteString(" →")
		}
		fmt.Fprintf(&b, " %s", st.Kind)
	}
	b.WriteString("\n")
	for _, st := range e.Stack {
		fmt.Fprintf(&b, "  %-16s %s\n", st.Kind+":", st.Summary)
		for i, s := range st.Sleeps {
			fmt.Fprintf(&b, "  %-16s before attempt %d: %v–%v, mean %v\n", "", i+2, s.Min, s.Max, s.Mean)
		}
		if st.MoreSleeps > 0 {
			fmt.Fprintf(&b, "  %-16s and %d more sleeps like the last\n", "", st.MoreSleeps)
		}
	}
	fmt.Fprintf(&b, "  attempts:        at most %d per call; %d per call when another layer owns retries on the call path\n",
		e.MaxAttempts, e.MaxAttemptsPerCallPath)
	switch e.WorstCaseFrom {
	case "deadline":
		fmt.Fprintf(&b, "  worst case:      %v, the overall deadline\n", e.WorstCase)
	case "attempts":
		fmt.Fprintf(&b, "  worst case:      %v: every attempt to its timeout, every sleep and wait at its longest\n", e.WorstCase)
	default:
		if e.unboundedWait() {
			b.WriteString("  worst case:      unbounded: no overall deadline, and a stage may wait as long as the call's deadline allows\n")
		} else {
			b.WriteString("  worst case:      unbounded: no overall deadline and no per-attempt timeout\n")
		}
	}
	for _, r := range e.Refusals {
		fmt.Fprintf(&b, "  ends a call:     %s\n", r)
	}
	for _, u := range e.Unexplained {
		fmt.Fprintf(&b, "  unexplained:     %s\n", u)
	}
	return b.String()
}

// unboundedWait reports whether a stage may wait as long as the call's deadline allows.
func (e Explanation) unboundedWait() bool {
	for _, st := range e.Stack {
		if st.WaitUnbounded {
			return true
		}
	}
	return false
}

// MarshalJSON writes the explanation with durations in seconds. Its
// worst_case_seconds is null when nothing bounds a call.
func (e Explanation) MarshalJSON() ([]byte, error) {
	type stage struct {
		Kind         string  `json:"kind"`
		LimitSeconds float64 `json:"limit_seconds,omitempty"`
		WaitSeconds  float64 `json:"wait_seconds,omitempty"`
		Stage
	}
	stack := make([]stage, len(e.Stack))
	for i, st := range e.Stack {
		stack[i] = stage{Kind: st.Kind, LimitSeconds: st.Limit.Seconds(), WaitSeconds: st.Wait.Seconds(), Stage: st}
	}
	var worst *float64
	if e.WorstCaseFrom != "" {
		v := e.WorstCase.Seconds()
		worst = &v
	}
	return json.Marshal(struct {
		Pipeline               string   `json:"pipeline"`
		MaxAttempts            int      `json:"max_attempts"`
		MaxAttemptsPerCallPath int      `json:"max_attempts_per_call_path"`
		WorstCaseSeconds       *float64 `json:"worst_case_seconds"`
		WorstCaseFrom          string   `json:"worst_case_from,omitempty"`
		Stack                  []stage  `json:"stack"`
		Refusals               []string `json:"refusals,omitempty"`
		Unexplained            []string `json:"unexplained,omitempty"`
	}{e.Pipeline, e.MaxAttempts, e.MaxAttemptsPerCallPath, worst, e.WorstCaseFrom, stack, e.Refusals, e.Unexplained})
}
