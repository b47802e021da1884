package budget

import "github.com/backstop-go/backstop/policy"

const Kind = "budget"

// Place is every budget's placement, as in Backstop.
var Place = policy.Placement{Kind: Kind, Retry: policy.OutsideRetry, Prompt: true} // want Place:`^Placement\{Kind: "budget", Retry: 1, Prompt: true\}$`

// stage is the policy side every budget shares, embedded.
type stage struct{}

func (stage) Placement() policy.Placement                         { return Place } // want Placement:`^Placement\{Kind: "budget", Retry: 1, Prompt: true\}$`
func (stage) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

type TokenBucket struct{ stage }

func NewTokenBucket(float64, float64) (*TokenBucket, error) { return nil, nil }
func MustNewTokenBucket(float64, float64) *TokenBucket      { return nil }

func (*TokenBucket) Deposit()       {}
func (*TokenBucket) Withdraw() bool { return true }
func (*TokenBucket) OnSuccess()     {}
func (*TokenBucket) OnFailure()     {}
