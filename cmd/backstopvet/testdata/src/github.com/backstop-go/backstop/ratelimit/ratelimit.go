package ratelimit

import "github.com/backstop-go/backstop/policy"

const Kind = "rate_limit"

type Options struct {
	Name string
	Rate float64
}
type Limiter struct{}
type Registry struct{}

func New(Options) (*Limiter, error)             { return nil, nil }
func (*Registry) Get(Options) (*Limiter, error) { return nil, nil }

func (l *Limiter) Placement() policy.Placement                         { return policy.Placement{Kind: Kind} }
func (l *Limiter) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
