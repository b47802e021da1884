package retry

type Options struct{ MaxAttempts int }
type Retry struct{}

func New(Options) (*Retry, error) { return nil, nil }
func MustNew(Options) *Retry      { return nil }
