package breaker

import "github.com/backstop-go/backstop/policy"

const Kind = "breaker"

type Options struct{ Name string }
type Breaker struct{}

func New(Options) (*Breaker, error) { return nil, nil }

func (b *Breaker) Placement() policy.Placement                         { return policy.Placement{Kind: Kind, Prompt: true} }
func (b *Breaker) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
