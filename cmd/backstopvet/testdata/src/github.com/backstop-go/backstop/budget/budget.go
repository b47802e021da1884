package budget

import "github.com/backstop-go/backstop/policy"

const Kind = "budget"

// Place is every budget's placement, as in Backstop.
var Place = policy.Placement{Kind: Kind, Retry: policy.OutsideRetry, Prompt: true} // want Place:`^Placement\{Kind: "budget", Retry: 1, Prompt: true\}$`

// stage is the policy side every budget shares, embedded.
type stage struct{}

func (stage) Placement() policy.Placement                         { return Place } // want Placement:`^Placement\{Kind: "budget", Retry: 1, Prompt: true\}$`
func (stage) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// Budget is what InFlight wraps.
type Budget interface {
	policy.Policy
	policy.RetryBudget
}

type TokenBucketOptions struct {
	Name       string
	MaxTokens  float64
	TokenRatio float64
}

type TokenBucket struct{ stage }

func NewTokenBucket(TokenBucketOptions) (*TokenBucket, error) { return nil, nil }

func (*TokenBucket) Deposit()       {}
func (*TokenBucket) Withdraw() bool { return true }
func (*TokenBucket) OnSuccess()     {}
func (*TokenBucket) OnFailure()     {}

type InFlightOptions struct {
	Budget Budget
	Max    int
}

// InFlight wraps another budget, and is placed as every budget.
type InFlight struct{ stage }

func NewInFlight(InFlightOptions) (*InFlight, error) { return nil, nil }

func (*InFlight) Deposit()       {}
func (*InFlight) Withdraw() bool { return true }
func (*InFlight) OnSuccess()     {}
func (*InFlight) OnFailure()     {}
