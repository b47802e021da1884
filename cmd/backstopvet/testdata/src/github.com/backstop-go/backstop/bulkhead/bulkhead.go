package bulkhead

import "github.com/backstop-go/backstop/policy"

const Kind = "bulkhead"

type Options struct {
	Name          string
	MaxConcurrent int
}
type Bulkhead struct{}

func New(Options) (*Bulkhead, error) { return nil, nil }

func (b *Bulkhead) Placement() policy.Placement                         { return policy.Placement{Kind: Kind} }
func (b *Bulkhead) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
