// Package policy is a stub of Backstop's for the analyzers' tests.
package policy

type Policy interface{}
type Pipeline struct{}

func Wrap(ps ...Policy) (*Pipeline, error) { return nil, nil }
func MustWrap(ps ...Policy) *Pipeline      { return nil }

type Option interface{ Policy }

func Name(string) Option  { return nil }
func Observe(any) Option  { return nil }
func UseClock(any) Option { return nil }
