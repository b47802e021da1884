package fleet

import (
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
)

// TokenBucket is a budget of another package: its placement is budget.Place.
type TokenBucket struct{}

func NewTokenBucket() *TokenBucket { return nil }

func (*TokenBucket) Placement() policy.Placement                         { return budget.Place } // want Placement:`^Placement\{Kind: "budget", Retry: 1, Prompt: true\}$`
func (*TokenBucket) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
func (*TokenBucket) Deposit()                                            {}
func (*TokenBucket) Withdraw() bool                                      { return true }
func (*TokenBucket) OnSuccess()                                          {}
func (*TokenBucket) OnFailure()                                          {}
