package bulkhead

import "github.com/backstop-go/backstop/policy"

const Kind = "bulkhead"

type Options struct{ MaxConcurrent int }
type Bulkhead struct{}

func New(string, Options) (*Bulkhead, error) { return nil, nil }
func MustNew(string, Options) *Bulkhead      { return nil }

func (b *Bulkhead) Placement() policy.Placement                         { return policy.Placement{Kind: Kind} }
func (b *Bulkhead) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
