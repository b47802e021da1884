package fallback

import "github.com/backstop-go/backstop/policy"

const Kind = "fallback"

type Options[T any] struct {
	Name  string
	Value T
}
type Fallback[T any] struct{}

func New[T any](Options[T]) (*Fallback[T], error) { return nil, nil }

func (f *Fallback[T]) Placement() policy.Placement {
	return policy.Placement{Kind: Kind, Encloses: true}
}
func (f *Fallback[T]) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
