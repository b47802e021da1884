package budget

import (
	"fmt"
	"math"

	"github.com/backstop-go/backstop/clock"

	"golang.org/x/time/rate"
)

// Rate is a fixed retry rate per process: at most r retries per second, with
// bursts of burst. It stands on golang.org/x/time/rate's token bucket, refilled by
// time alone. Calls and outcomes don't change it. The package documentation
// compares it with the AWS SDKs' retry quota.
//
// A Rate is safe for concurrent use. Share one by every pipeline the rate should
// cover. Build it with [NewRate].
type Rate struct {
	stage
	counts
	lim   *rate.Limiter
	clock clock.Clock
}

// RateOptions configure a [Rate].
type RateOptions struct {
	// Limit is the number of retries per second. Required: it must be positive and
	// finite. A rate.Inf is no budget at all: leave the budget out instead.
	Limit rate.Limit
	// Burst is how many retries may start at once. Required: at least 1.
	Burst int
	// Clock reads the time; nil means clock.System(). The limiter measures time
	// with time.Time.Sub. It uses the monotonic clock where the times carry it.
	Clock clock.Clock
}

// NewRate returns a Rate as o says. Or it returns an error matching
// ErrInvalidOptions that names the bad field. The limiter starts full: Burst
// retries may start at once.
func NewRate(o RateOptions) (*Rate, error) {
	if !(o.Limit > 0) || math.IsInf(float64(o.Limit), 0) {
		return nil, fmt.Errorf("%w: Limit is %v; want a finite rate > 0", ErrInvalidOptions, float64(o.Limit))
	}
	if o.Burst < 1 {
		return nil, fmt.Errorf("%w: Burst is %d; want ≥ 1", ErrInvalidOptions, o.Burst)
	}
	return &Rate{lim: rate.NewLimiter(o.Limit, o.Burst), clock: clock.Or(o.Clock)}, nil
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
