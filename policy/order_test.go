package policy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

// fake is a policy of any kind that passes calls through and records its bindings.
type fake struct {
	kind  policy.Placement
	binds []policy.Env
	order *[]string // shared log of Bind calls
	name  string
}

func (f *fake) Placement() policy.Placement { return f.kind }

func (f *fake) Bind(next policy.Runner, env policy.Env) policy.Runner {
	f.binds = append(f.binds, env)
	if f.order != nil {
		*f.order = append(*f.order, f.name)
	}
	return next
}

// fakeBudget is a budget fake that implements policy.RetryBudget.
type fakeBudget struct{ fake }

func (*fakeBudget) Deposit()       {}
func (*fakeBudget) Withdraw() bool { return true }
func (*fakeBudget) OnSuccess()     {}
func (*fakeBudget) OnFailure()     {}

// The placements of the built-in stages, as their packages declare them.
var (
	kDeadline = policy.Placement{Kind: "deadline", Deadline: true, Retry: policy.OutsideRetry}
	kBreaker  = policy.Placement{Kind: "breaker", Prompt: true}
	kRetry    = policy.Placement{Kind: "retry", OwnsRetries: true, Prompt: true}
	kAttempt  = policy.Placement{Kind: "attempt_timeout", Retry: policy.InsideRetry}
	kShed     = policy.Placement{Kind: "shed", Outermost: true, Once: true}
	kFree     = policy.Placement{Kind: "chaos", Free: true}
	kBudget   = policy.Placement{Kind: "budget", Retry: policy.OutsideRetry, Prompt: true}
	kFallback = policy.Placement{Kind: "fallback", Encloses: true}
	kBulkhead = policy.Placement{Kind: "bulkhead"}
	kLimiter  = policy.Placement{Kind: "rate_limit"}
)

func dl() *fake       { return &fake{kind: kDeadline} }
func br() *fake       { return &fake{kind: kBreaker} }
func rt() *fake       { return &fake{kind: kRetry} }
func at() *fake       { return &fake{kind: kAttempt} }
func sh() *fake       { return &fake{kind: kShed} }
func ot() *fake       { return &fake{kind: kFree} }
func bu() *fakeBudget { return &fakeBudget{fake{kind: kBudget}} }
func fb() *fake       { return &fake{kind: kFallback} }
func bh() *fake       { return &fake{kind: kBulkhead} }
func rl() *fake       { return &fake{kind: kLimiter} }

func TestWrap_Order(t *testing.T) {
	same := br()
	tests := []struct {
		name  string
		stack []policy.Policy
		rule  string // "" = accepted
		pos   [2]int
		fix   string // a phrase the message must hold
	}{
		// Accepted stacks.
		{name: "deadline, breaker, retry", stack: []policy.Policy{dl(), br(), rt()}},
		{name: "deadline, retry, breaker", stack: []policy.Policy{dl(), rt(), br()}},
		{name: "deadline, budget, retry, attempt_timeout", stack: []policy.Policy{dl(), bu(), rt(), at()}},
		{name: "shed, deadline, breaker", stack: []policy.Policy{sh(), dl(), br()}},
		{name: "breaker, budget, retry", stack: []policy.Policy{br(), bu(), rt()}},
		{name: "others anywhere", stack: []policy.Policy{ot(), dl(), ot(), rt(), ot(), at(), ot()}},
		{name: "empty", stack: nil},
		{name: "fallback outermost, bulkhead and rate limit either side of the retry",
			stack: []policy.Policy{fb(), dl(), bh(), br(), bu(), rt(), rl(), at()}},
		{name: "bulkhead and rate limit inside the retry", stack: []policy.Policy{fb(), dl(), rt(), bh(), rl(), at()}},
		{name: "others and a shedder outside the fallback", stack: []policy.Policy{ot(), sh(), fb(), bh(), rl()}},

		// O1: one deadline, outside the retry.
		{name: "deadline inside retry", stack: []policy.Policy{br(), rt(), dl()}, rule: "O1", pos: [2]int{3, 2},
			fix: "deadline at position 3 is inside retry at position 2; move the deadline outward or use deadline.NewPerAttempt"},
		{name: "two deadlines", stack: []policy.Policy{dl(), br(), dl()}, rule: "O1", pos: [2]int{1, 3}, fix: "keep one overall deadline"},
		// O2: one retry.
		{name: "two retries", stack: []policy.Policy{rt(), br(), rt()}, rule: "O2", pos: [2]int{1, 3}, fix: "keep one retry per pipeline"},
		// O3: attempt timeout inside the retry, and only with one.
		{name: "attempt timeout outside retry", stack: []policy.Policy{at(), rt()}, rule: "O3", pos: [2]int{1, 2}, fix: "move it inside the retry"},
		{name: "attempt timeout without retry", stack: []policy.Policy{br(), at()}, rule: "O3", pos: [2]int{2, 0}, fix: "use deadline.New"},
		// O4: budget outside its retry, never alone.
		{name: "budget inside retry", stack: []policy.Policy{rt(), bu()}, rule: "O4", pos: [2]int{2, 1}, fix: "move the budget outward"},
		{name: "budget without retry", stack: []policy.Policy{dl(), bu(), br()}, rule: "O4", pos: [2]int{2, 0}, fix: "add a retry after it"},
		{name: "two budgets", stack: []policy.Policy{bu(), bu(), rt()}, rule: "O4", pos: [2]int{1, 2}, fix: "one budget per retry"},
		{name: "outside-retry stage inside the retry", stack: []policy.Policy{rt(), &fake{kind: policy.Placement{Kind: "cache", Retry: policy.OutsideRetry}}}, rule: "O4", pos: [2]int{2, 1}, fix: "move the cache outward"},
		// O5: shedder outermost, never with a retry.
		{name: "shed not outermost", stack: []policy.Policy{dl(), sh()}, rule: "O5", pos: [2]int{2, 1}, fix: "move the shed outward"},
		{name: "shed with retry", stack: []policy.Policy{sh(), dl(), rt()}, rule: "O5", pos: [2]int{1, 3}, fix: "retries belong on the client call path"},
		// O7: one fallback, outside every stage whose failures it answers.
		{name: "fallback inside retry", stack: []policy.Policy{dl(), rt(), fb()}, rule: "O7", pos: [2]int{3, 1},
			fix: "fallback at position 3 is inside deadline at position 1; move the fallback outward"},
		{name: "fallback inside breaker", stack: []policy.Policy{br(), fb(), rt()}, rule: "O7", pos: [2]int{2, 1}, fix: "inside breaker at position 1"},
		{name: "fallback inside bulkhead", stack: []policy.Policy{bh(), fb()}, rule: "O7", pos: [2]int{2, 1}, fix: "inside bulkhead at position 1"},
		{name: "fallback inside rate limit", stack: []policy.Policy{ot(), rl(), fb()}, rule: "O7", pos: [2]int{3, 2}, fix: "inside rate_limit at position 2"},
		{name: "two fallbacks", stack: []policy.Policy{fb(), fb(), dl()}, rule: "O7", pos: [2]int{1, 2}, fix: "keep one fallback"},
		{name: "fallback outside shed", stack: []policy.Policy{fb(), sh()}, rule: "O5", pos: [2]int{2, 1}, fix: "move the shed outward"},
		// O6: nil and duplicates.
		{name: "nil policy", stack: []policy.Policy{dl(), nil}, rule: "O6", pos: [2]int{2, 0}, fix: "is nil"},
		{name: "same object twice", stack: []policy.Policy{same, rt(), same}, rule: "O6", pos: [2]int{1, 3}, fix: "create a second one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := policy.Wrap(tt.stack...)
			if tt.rule == "" {
				require.NoError(t, err, "Wrap(%s)", tt.name)
				require.NotNil(t, p)
				return
			}
			require.Error(t, err, "Wrap(%s) accepted a stack that breaks %s", tt.name, tt.rule)
			require.Nil(t, p)
			if !errors.Is(err, policy.ErrOrder) {
				t.Errorf("Wrap(%s) = %v; want an error matching ErrOrder", tt.name, err)
			}
			var oe *policy.OrderError
			require.ErrorAs(t, err, &oe)
			if oe.Rule != tt.rule || [2]int{oe.First, oe.Second} != tt.pos {
				t.Errorf("Wrap(%s) = rule %s at %d,%d; want %s at %d,%d", tt.name, oe.Rule, oe.First, oe.Second, tt.rule, tt.pos[0], tt.pos[1])
			}
			if !strings.HasPrefix(err.Error(), "policy: "+tt.rule+": ") || !strings.Contains(err.Error(), tt.fix) {
				t.Errorf("Wrap(%s) message %q; want it to start with %q and hold %q", tt.name, err, "policy: "+tt.rule+": ", tt.fix)
			}
		})
	}
}

func TestWrap_O1MessageIsExact(t *testing.T) {
	_, err := policy.Wrap(br(), rt(), dl())
	want := "policy: O1: deadline at position 3 is inside retry at position 2; move the deadline outward or use deadline.NewPerAttempt"
	if err == nil || err.Error() != want {
		t.Errorf("Wrap(breaker, retry, deadline) = %v; want %q", err, want)
	}
}

// uncomparable is a policy whose dynamic type cannot be compared with ==.
type uncomparable struct{ _ []string }

func (uncomparable) Placement() policy.Placement                         { return kFree }
func (uncomparable) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

func TestWrap_UncomparablePolicyDoesNotPanic(t *testing.T) {
	p, err := policy.Wrap(uncomparable{}, uncomparable{})
	require.NoError(t, err)
	require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }))
}

func TestMust_PanicsWithWrapsError(t *testing.T) {
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !errors.Is(err, policy.ErrOrder) {
			t.Errorf("Must(Wrap(retry, retry)) panicked with %v; want an error matching ErrOrder", r)
		}
	}()
	policy.Must(policy.Wrap(rt(), rt()))
	t.Error("Must(Wrap(retry, retry)) did not panic")
}

func TestWrap_BindsInnermostFirstWithEnv(t *testing.T) {
	var order []string
	d := &fake{kind: kDeadline, name: "deadline", order: &order}
	b := &fakeBudget{fake{kind: kBudget, name: "budget", order: &order}}
	r := &fake{kind: kRetry, name: "retry", order: &order}
	a := &fake{kind: kAttempt, name: "attempt", order: &order}
	p, err := policy.Wrap(d, b, r, a)
	require.NoError(t, err)
	require.Equal(t, []string{"attempt", "retry", "budget", "deadline"}, order, "Bind order")
	require.Same(t, b, r.binds[0].Budget, "the retry's Env.Budget is the budget outside it")
	require.Nil(t, d.binds[0].Budget, "only the retry gets the budget")
	require.Equal(t, 1, d.binds[0].Position)
	require.Equal(t, 4, a.binds[0].Position)

	obs := event.ObserverFunc(func(event.Event) {})
	q := p.With(policy.Name("orders"), policy.Observe(obs))
	require.Len(t, r.binds, 2, "With re-binds every stage")
	require.Equal(t, "orders", r.binds[1].Pipeline)
	require.NotNil(t, r.binds[1].Observer)
	require.Equal(t, "", p.Name(), "With leaves the original unchanged")
	require.Equal(t, "orders", q.Name())
	require.Equal(t, "orders: deadline → budget → retry → attempt_timeout", q.String())
}

// nilBinder returns a nil Runner, breaking the Policy contract.
type nilBinder struct{}

func (nilBinder) Placement() policy.Placement                  { return kFree }
func (nilBinder) Bind(policy.Runner, policy.Env) policy.Runner { return nil }

func TestWrap_RefusesNilRunner(t *testing.T) {
	_, err := policy.Wrap(nilBinder{})
	if err == nil || !strings.Contains(err.Error(), "nil Runner") {
		t.Errorf("Wrap(policy whose Bind returns nil) = %v; want an error naming the nil Runner", err)
	}
}

// maxFake is a fake retry that says how many attempts it makes.
type maxFake struct {
	fake
	n int
}

func (m *maxFake) MaxAttempts() int { return m.n }

func TestWrap_O2CountsTheRealAttempts(t *testing.T) {
	_, err := policy.Wrap(&maxFake{fake{kind: kRetry}, 3}, br(), &maxFake{fake{kind: kRetry}, 4})
	want := "policy: O2: retries at positions 1 and 3; keep one retry per pipeline, since nested retries multiply: 3 × 4 = 12 attempts per call"
	if err == nil || err.Error() != want {
		t.Errorf("Wrap(retry(3), breaker, retry(4)) = %v; want %q", err, want)
	}
	// Retries that do not say their attempts get no made-up product.
	_, err = policy.Wrap(rt(), rt())
	if err == nil || strings.Contains(err.Error(), "×") {
		t.Errorf("Wrap(retry, retry) = %v; want an O2 error with no product", err)
	}
}

func TestWrap_TwoRetriesWithTheirBudgetsIsO2(t *testing.T) {
	_, err := policy.Wrap(dl(), bu(), rt(), bu(), rt())
	var oe *policy.OrderError
	require.ErrorAs(t, err, &oe)
	if oe.Rule != "O2" || oe.First != 3 || oe.Second != 5 {
		t.Errorf("Wrap(deadline, budget, retry, budget, retry) = %v; want O2 at positions 3 and 5", err)
	}
}

func TestWrap_OtherMayStandOutsideTheShedder(t *testing.T) {
	if _, err := policy.Wrap(ot(), sh(), dl()); err != nil {
		t.Errorf("Wrap(other, shed, deadline) = %v; want it accepted: KindOther stands anywhere", err)
	}
	_, err := policy.Wrap(ot(), br(), sh())
	var oe *policy.OrderError
	require.ErrorAs(t, err, &oe, "Wrap(other, breaker, shed)")
	if oe.Rule != "O5" || oe.First != 3 || oe.Second != 2 {
		t.Errorf("Wrap(other, breaker, shed) = %v; want O5 naming the shed at 3 and the breaker at 2", err)
	}
}

func TestWrap_RefusesTypedNil(t *testing.T) {
	var nilRetry *fake // what a failed constructor leaves behind
	var nilBudget *fakeBudget
	for _, stack := range [][]policy.Policy{
		{dl(), nilRetry},
		{nilBudget, rt()},
		{nilRetry},
	} {
		p, err := policy.Wrap(stack...)
		var oe *policy.OrderError
		if !errors.As(err, &oe) || oe.Rule != "O6" || !strings.Contains(err.Error(), "is a nil *policy_test.fake") &&
			!strings.Contains(err.Error(), "is a nil *policy_test.fakeBudget") {
			t.Errorf("Wrap(%d policies with a typed nil) = %v, %v; want an O6 error naming the nil type", len(stack), p, err)
		}
	}
}

// funcHolder is a struct type that looks comparable but holds a func in an interface
// field: == on two of its values panics.
type funcHolder struct{ hook any }

func (funcHolder) Placement() policy.Placement                         { return kFree }
func (funcHolder) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// panicky panics in Placement.
type panicky struct{}

func (panicky) Placement() policy.Placement                         { panic("no placement") }
func (panicky) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

func TestWrap_NeverPanics(t *testing.T) {
	a, b := funcHolder{hook: func() {}}, funcHolder{hook: func() {}}
	p, err := policy.Wrap(a, b)
	require.NoError(t, err, "Wrap(two values of a struct holding a func)")
	require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }))

	p, err = policy.Wrap(dl(), panicky{})
	if err == nil || p != nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("Wrap(policy whose Placement panics) = %v, %v; want an error saying it panicked", p, err)
	}
}

func TestCheckPlacements_TheSameRulesAsWrap(t *testing.T) {
	for _, stack := range [][]policy.Policy{
		{dl(), br(), rt()}, {br(), rt(), dl()}, {rt(), rt()}, {at(), rt()}, {bu(), br()}, {dl(), sh()}, {sh(), rt()}, {ot(), sh()},
	} {
		places := make([]policy.Placement, len(stack))
		for i, p := range stack {
			places[i] = p.Placement()
		}
		_, wrapErr := policy.Wrap(stack...)
		placeErr := policy.CheckPlacements(places...)
		if (wrapErr == nil) != (placeErr == nil) || wrapErr != nil && wrapErr.Error() != placeErr.Error() {
			t.Errorf("CheckPlacements(%v) = %v; Wrap said %v", places, placeErr, wrapErr)
		}
	}
}

// TestWrap_OptionsAreNotStages: options given to Wrap, anywhere in its list, name and
// observe the pipeline, are never bound, and leave the stage positions of its errors
// counting stages only.
func TestWrap_OptionsAreNotStages(t *testing.T) {
	var order []string
	d := &fake{kind: kDeadline, name: "deadline", order: &order}
	r := &fake{kind: kRetry, name: "retry", order: &order}
	obs := event.ObserverFunc(func(event.Event) {})
	p, err := policy.Wrap(policy.Name("db"), d, r, policy.Observe(obs))
	require.NoError(t, err)
	require.Equal(t, []string{"retry", "deadline"}, order, "only stages are bound")
	require.Equal(t, "db: deadline → retry", p.String())
	require.Equal(t, "db", r.binds[0].Pipeline)
	require.NotNil(t, r.binds[0].Observer)
	require.Equal(t, 2, r.binds[0].Position, "positions count stages only")

	_, err = policy.Wrap(&fake{kind: kRetry, name: "retry"}, policy.Name("db"), &fake{kind: kDeadline, name: "deadline"})
	var oe *policy.OrderError
	require.ErrorAs(t, err, &oe)
	require.ElementsMatch(t, []int{1, 2}, []int{oe.First, oe.Second}, "the option between them takes no position")
}
