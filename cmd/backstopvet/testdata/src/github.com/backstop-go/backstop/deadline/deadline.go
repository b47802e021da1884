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

func New(d time.Duration) (*Deadline, error) { // want New:`^Placement\{Kind: "deadline", Deadline: true, Retry: 1\}$`
	if d <= 0 {
		return nil, errors.New("deadline: bad duration")
	}
	return &Deadline{limit: d}, nil
}

func MustNew(d time.Duration) *Deadline { // want MustNew:`^Placement\{Kind: "deadline", Deadline: true, Retry: 1\}$`
	dl, err := New(d)
	if err != nil {
		panic(err)
	}
	return dl
}

func PerAttempt(d time.Duration) (*Deadline, error) { // want PerAttempt:`^Placement\{Kind: "attempt_timeout", Retry: 2\}$`
	if d <= 0 {
		return nil, errors.New("deadline: bad duration")
	}
	return &Deadline{limit: d, perAttempt: true}, nil
}

func MustPerAttempt(d time.Duration) *Deadline { // want MustPerAttempt:`^Placement\{Kind: "attempt_timeout", Retry: 2\}$`
	dl, err := PerAttempt(d)
	if err != nil {
		panic(err)
	}
	return dl
}

func (d *Deadline) Placement() policy.Placement { // want Placement:`^perAttempt \? Placement\{Kind: "attempt_timeout", Retry: 2\} : Placement\{Kind: "deadline", Deadline: true, Retry: 1\}$`
	if d.perAttempt {
		return policy.Placement{Kind: KindAttempt, Retry: policy.InsideRetry}
	}
	return policy.Placement{Kind: Kind, Deadline: true, Retry: policy.OutsideRetry}
}

func (d *Deadline) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
