package breaker

type Options struct{}
type Breaker struct{}

func New(string, Options) (*Breaker, error) { return nil, nil }
func MustNew(string, Options) *Breaker      { return nil }
