package stacks

import (
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// gatekeeper is a third party's stage, placed like a shedder: outermost.
type gatekeeper struct{}

func (*gatekeeper) Placement() policy.Placement { // want Placement:`^Placement\{Kind: "my_stage", Outermost: true\}$`
	return policy.Placement{Kind: "my_stage", Outermost: true}
}

func (*gatekeeper) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// It is checked as a built-in stage is.
func thirdParty() {
	_ = policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "x"})), &gatekeeper{})) // want `policy: O5: my_stage at position 2 is not outermost \(position 1 holds breaker\); move the my_stage outward`
	_ = policy.Must(policy.Wrap(&gatekeeper{}, policy.Must(breaker.New(breaker.Options{Name: "x"}))))
	_ = policy.Must(policy.Wrap(&gatekeeper{}, policy.Name("x"), policy.Must(retry.New(retry.Options{})))) // want `policy: O5: my_stage at position 1 shares a pipeline with retry at position 2`
}

// gate is placed two ways, by a field its constructors set.
type gate struct{ outer bool }

func (g *gate) Placement() policy.Placement { // want Placement:`^outer \? Placement\{Kind: "gate", Outermost: true\} : Placement\{Kind: "gate", Prompt: true\}$`
	if !g.outer {
		return policy.Placement{Kind: "gate", Prompt: true}
	}
	return policy.Placement{Kind: "gate", Outermost: true}
}

func (*gate) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

func newOuterGate() *gate { return &gate{outer: true} } // want newOuterGate:`^Placement\{Kind: "gate", Outermost: true\}$`

func newGate() *gate { return &gate{} } // want newGate:`^Placement\{Kind: "gate", Prompt: true\}$`

// newSomeGate's stage is either: its stacks are left alone.
func newSomeGate(outer bool) *gate { return &gate{outer: outer} }

func gates(g *gate) {
	_ = policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "x"})), newOuterGate())) // want `policy: O5: gate at position 2 is not outermost`
	_ = policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "x"})), newGate()))
	_ = policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "x"})), newSomeGate(true)))
	_ = policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "x"})), g))
}

// moody's placement depends on more than a field: its stacks are left alone.
type moody struct{}

func (m *moody) Placement() policy.Placement {
	if time.Now().Hour() < 12 {
		return policy.Placement{Kind: "moody", Outermost: true}
	}
	return policy.Placement{Kind: "moody"}
}

func (*moody) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// outside stands outside the retry but is no budget: CheckPlacements would take it for
// one and ask for a retry inside it, so its stacks are left alone.
type outside struct{}

func (*outside) Placement() policy.Placement { // want Placement:`Kind: "outside", Retry: 1`
	return policy.Placement{Kind: "outside", Retry: policy.OutsideRetry}
}

func (*outside) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

func leftAlone() {
	_ = policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "x"})), &moody{}))
	_ = policy.Must(policy.Wrap(&outside{}, policy.Must(breaker.New(breaker.Options{Name: "x"}))))
	_ = policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), &outside{}, policy.Must(retry.New(retry.Options{})), policy.Must(deadline.New(deadline.Options{Timeout: time.Second}))))
}
