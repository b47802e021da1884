package deadline

import (
	"errors"
	"time"

	"github.com/backstop-go/backstop/policy"
)

const (
	Kind        = "deadline"
	KindAttempt = "attempt_timeout"
)

// Deadline is one type placed two ways, by a field its constructors set, as in
// Backstop.
type Deadline struct {
	limit      time.Duration
	perAttempt bool
}

type Options struct{ Timeout time.Duration }

func New(o Options) (*Deadline, error) { // want New:`^Placement\{Kind: "deadline", Deadline: true, Retry: 1\}$`
	if o.Timeout <= 0 {
		return nil, errors.New("deadline: bad duration")
	}
	return &Deadline{limit: o.Timeout}, nil
}

func NewPerAttempt(o Options) (*Deadline, error) { // want NewPerAttempt:`^Placement\{Kind: "attempt_timeout", Retry: 2\}$`
	if o.Timeout <= 0 {
		return nil, errors.New("deadline: bad duration")
	}
	return &Deadline{limit: o.Timeout, perAttempt: true}, nil
}

func (d *Deadline) Placement() policy.Placement { // want Placement:`^perAttempt \? Placement\{Kind: "attempt_timeout", Retry: 2\} : Placement\{Kind: "deadline", Deadline: true, Retry: 1\}$`
	if d.perAttempt {
		return policy.Placement{Kind: KindAttempt, Retry: policy.InsideRetry}
	}
	return policy.Placement{Kind: Kind, Deadline: true, Retry: policy.OutsideRetry}
}

func (d *Deadline) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
