package bulkhead

type Options struct{ MaxConcurrent int }
type Bulkhead struct{}

func New(string, Options) (*Bulkhead, error) { return nil, nil }
func MustNew(string, Options) *Bulkhead      { return nil }
