package fallback

type Options[T any] struct{ Value T }
type Fallback[T any] struct{}

func New[T any](string, Options[T]) (*Fallback[T], error) { return nil, nil }
func MustNew[T any](string, Options[T]) *Fallback[T]      { return nil }
