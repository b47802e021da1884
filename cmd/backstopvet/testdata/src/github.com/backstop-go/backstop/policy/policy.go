// Package policy is a stub of Backstop's for the analyzers' tests.
package policy

import "context"

type Func func(ctx context.Context) error

type Runner interface {
	Run(ctx context.Context, fn Func) error
}

type Env struct{ Pipeline string }

type Policy interface {
	Placement() Placement
	Bind(next Runner, env Env) Runner
}

type Placement struct {
	Kind        string
	OwnsRetries bool
	Deadline    bool
	Retry       Side
	Outermost   bool
	Encloses    bool
	Free        bool
	Once        bool
	Prompt      bool
}

type Side uint8

const (
	RetryAnywhere Side = iota
	OutsideRetry
	InsideRetry
)

type RetryBudget interface {
	Deposit()
	Withdraw() bool
	OnSuccess()
	OnFailure()
}

type Pipeline struct{}

func Wrap(ps ...Policy) (*Pipeline, error) { return nil, nil }

func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

type Option interface {
	Policy
	apply(*Pipeline)
}

type optionFunc func(*Pipeline)

func (optionFunc) apply(*Pipeline)                {}
func (optionFunc) Placement() Placement           { return Placement{Kind: "option", Free: true} }
func (optionFunc) Bind(next Runner, _ Env) Runner { return next }

func Name(string) Option  { return optionFunc(nil) }
func Observe(any) Option  { return optionFunc(nil) }
func UseClock(any) Option { return optionFunc(nil) }
