package retry

import "github.com/backstop-go/backstop/policy"

const Kind = "retry"

type Options struct{ MaxAttempts int }
type Retry struct{}

func New(Options) (*Retry, error) { return nil, nil }

func (r *Retry) Placement() policy.Placement { return place } // want Placement:`^Placement\{Kind: "retry", OwnsRetries: true, Prompt: true\}$`

// place is the placement of a retry, in a package variable as in Backstop.
var place = policy.Placement{Kind: Kind, OwnsRetries: true, Prompt: true} // want place:`^Placement\{Kind: "retry", OwnsRetries: true, Prompt: true\}$`

func (r *Retry) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }
