package ratelimit

type Options struct{ Rate float64 }
type Limiter struct{}
type Registry struct{}

func New(string, Options) (*Limiter, error)             { return nil, nil }
func MustNew(string, Options) *Limiter                  { return nil }
func (*Registry) Get(string, Options) (*Limiter, error) { return nil, nil }
