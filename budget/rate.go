package budget

import (
	"fmt"
	"math"

	"golang.org/x/time/rate"

	"github.com/backstop-go/backstop/policy"
)

// Rate is a fixed retry rate per process: at most r retries per second with bursts of
// burst, on golang.org/x/time/rate's token bucket (the AWS SDKs' retry quota works this
// way). Calls and outcomes don't change it.
//
// A Rate is safe for concurrent use; share one by every pipeline the rate should cover.
// Build it with [NewRate].
type Rate struct {
	stage
	counts
	lim   *rate.Limiter
	clock policy.Clock
}

// NewRate returns a Rate of r retries per second with bursts of burst. r must be
// positive and finite (rate.Inf is no budget at all: leave the budget out instead) and
// burst at least 1.
func NewRate(r rate.Limit, burst int) (*Rate, error) {
	if !(r > 0) || math.IsInf(float64(r), 0) {
		return nil, fmt.Errorf("%w: rate is %v; want a finite rate > 0", ErrInvalidOptions, float64(r))
	}
	if burst < 1 {
		return nil, fmt.Errorf("%w: burst is %d; want ≥ 1", ErrInvalidOptions, burst)
	}
	return &Rate{lim: rate.NewLimiter(r, burst), clock: policy.SystemClock()}, nil
}

// Withdraw allows a retry if the limiter has a token now, and takes it.
func (b *Rate) Withdraw() bool { return b.count(b.lim.AllowN(b.clock.Now(), 1)) }

// Level returns the tokens in the limiter now.
func (b *Rate) Level() float64 { return max(0, b.lim.TokensAt(b.clock.Now())) }

// Deposit does nothing: a Rate is indifferent to traffic.
func (b *Rate) Deposit() {}

// OnSuccess does nothing.
func (b *Rate) OnSuccess() {}

// OnFailure does nothing.
func (b *Rate) OnFailure() {}
