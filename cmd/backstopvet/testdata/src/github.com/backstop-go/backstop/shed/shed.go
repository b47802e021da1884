package shed

import "github.com/backstop-go/backstop/policy"

const Kind = "shed"

type Options struct{ Name string }
type Shedder struct{}

func New(Options) (*Shedder, error) { return nil, nil }

func (s *Shedder) Placement() policy.Placement {
	return policy.Placement{Kind: Kind, Outermost: true, Once: true}
}
func (s *Shedder) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
