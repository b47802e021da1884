package budget

import (
	"cmp"
	"fmt"
	"sync/atomic"

	"github.com/backstop-go/backstop/policy"
)

// The AWS SDKs' standard retry mode. The AWS SDKs and Tools reference guide
// describes it in "Retry behavior". These are the values of 2026, the SDKs'
// default since November 2026. The module aws-sdk-go-v2 sets them in aws/retry:
// DefaultRetryRateTokens, a retry's cost of 14, DefaultThrottlingRetryCost,
// DefaultNoRetryIncrement. Before 2026, a retry cost 5 and one after a timeout 10.
// RetryQuotaOptions sets those.
const (
	DefaultRetryQuotaTokens       = 500 // the bucket's capacity, and where it starts
	DefaultRetryQuotaRetryCost    = 14  // what a retry takes, timeouts included
	DefaultRetryQuotaThrottleCost = 5   // what a retry after a throttling error takes
	DefaultRetryQuotaSuccessGain  = 1   // what a call that succeeds at its first attempt puts back
)

// RetryQuotaOptions configure a [RetryQuota]. The zero value is the AWS SDKs'
// standard mode.
type RetryQuotaOptions struct {
	// Tokens is the bucket's capacity, full at the start. 0 means
	// DefaultRetryQuotaTokens (500).
	Tokens int
	// RetryCost is what a retry takes; 0 means DefaultRetryQuotaRetryCost (14).
	RetryCost int
	// ThrottleCost is what a retry after a throttling error takes. That is
	// retry.ReasonThrottle, an error marked fault.Throttled. 0 means
	// DefaultRetryQuotaThrottleCost (5).
	ThrottleCost int
	// TimeoutCost is what a retry after a timeout (retry.ReasonTimeout) takes. 0
	// means RetryCost. The SDKs before 2026 took 10.
	TimeoutCost int
	// SuccessGain is what a call that succeeds at its first attempt puts back. A
	// call that succeeds after retries gets its last retry's price back instead. 0
	// means DefaultRetryQuotaSuccessGain (1). Negative means nothing.
	SuccessGain int
}

// RetryQuota is the retry quota of the AWS SDKs' "standard" retry mode:
//   - a bucket of 500 tokens;
//   - a retry takes 14 (5 after a throttling error), and is refused when the
//     bucket holds fewer;
//   - a retry whose attempt succeeds gives its tokens back;
//   - a call that succeeds at its first attempt adds 1, up to the capacity.
//
// After an outage starts, a client retries about 35 times (500 ÷ 14). It then
// makes first attempts only, until successes refill the bucket. A service that
// throttles asks to be called later. It is retried up to 100 times (500 ÷ 5).
//
// It prices each retry by why it is made, so it implements policy.RetryLease. The
// retry tells it the reason of each retry, and whether the retry succeeded. A
// retry loop that only knows policy.RetryBudget gets Withdraw. That takes
// RetryCost and never refunds.
//
// A RetryQuota is safe for concurrent use, lock-free and allocation-free. Share
// one among the pipelines that call one service. Build it with [NewRetryQuota].
type RetryQuota struct {
	stage
	counts
	max, cost, throttleCost, timeoutCost, gain int64
	tokens                                     atomic.Int64
}

// NewRetryQuota returns a full RetryQuota, with o's zero fields at the AWS SDKs'
// values. Or it returns an error matching ErrInvalidOptions naming the bad field.
func NewRetryQuota(o RetryQuotaOptions) (*RetryQuota, error) {
	switch {
	case o.Tokens < 0:
		return nil, fmt.Errorf("%w: Tokens is %d; want > 0, or 0 for the default %d", ErrInvalidOptions, o.Tokens, DefaultRetryQuotaTokens)
	case o.RetryCost < 0:
		return nil, fmt.Errorf("%w: RetryCost is %d; want > 0, or 0 for the default %d", ErrInvalidOptions, o.RetryCost, DefaultRetryQuotaRetryCost)
	case o.ThrottleCost < 0:
		return nil, fmt.Errorf("%w: ThrottleCost is %d; want > 0, or 0 for the default %d", ErrInvalidOptions, o.ThrottleCost, DefaultRetryQuotaThrottleCost)
	case o.TimeoutCost < 0:
		return nil, fmt.Errorf("%w: TimeoutCost is %d; want > 0, or 0 for RetryCost", ErrInvalidOptions, o.TimeoutCost)
	}
	cost := int64(or(o.RetryCost, DefaultRetryQuotaRetryCost))
	q := &RetryQuota{max: int64(or(o.Tokens, DefaultRetryQuotaTokens)), cost: cost,
		throttleCost: int64(or(o.ThrottleCost, DefaultRetryQuotaThrottleCost)), timeoutCost: cmp.Or(int64(o.TimeoutCost), cost),
		gain: int64(max(or(o.SuccessGain, DefaultRetryQuotaSuccessGain), 0))}
	if q.cost > q.max || q.throttleCost > q.max || q.timeoutCost > q.max {
		return nil, fmt.Errorf("%w: a retry costs %d (%d after a throttling error, %d after a timeout) but the bucket holds %d; "+
			"some retries could never be made", ErrInvalidOptions, q.cost, q.throttleCost, q.timeoutCost, q.max)
	}
	q.tokens.Store(q.max)
	return q, nil
}

func or(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// Take takes a retry's price. That is ThrottleCost if reason is "throttle"
// (retry.ReasonThrottle), and TimeoutCost if it is "timeout"
// (retry.ReasonTimeout). Otherwise it is RetryCost. Take refuses the retry if the
// bucket holds less.
func (q *RetryQuota) Take(reason string) (int64, bool) {
	c := q.cost
	switch reason {
	case "throttle":
		c = q.throttleCost
	case "timeout":
		c = q.timeoutCost
	}
	for {
		t := q.tokens.Load()
		if t < c {
			return 0, q.count(false)
		}
		if q.tokens.CompareAndSwap(t, t-c) {
			return c, q.count(true)
		}
	}
}

// End gives a retry's tokens back if its attempt succeeded, less SuccessGain.
// OnSuccess then adds SuccessGain for the call. So a call that succeeded after
// retries gets its last retry's price back, and nothing more. One that succeeded
// at its first attempt gets SuccessGain. The SDKs do the same.
func (q *RetryQuota) End(taken int64, ok bool) {
	if ok {
		q.add(taken - q.gain)
	}
}

// Withdraw takes RetryCost, for retry loops that do not tell the reason. The
// tokens are never given back.
func (q *RetryQuota) Withdraw() bool {
	_, ok := q.Take("")
	return ok
}

// OnSuccess puts SuccessGain back for a successful call. End kept it back from the
// refund of a call that succeeded after retries. So such a call gains nothing more.
func (q *RetryQuota) OnSuccess() { q.add(q.gain) }

// Deposit does nothing: the quota is filled by successes, not by calls.
func (q *RetryQuota) Deposit() {}

// OnFailure does nothing: a failure costs only through the retry it leads to.
func (q *RetryQuota) OnFailure() {}

func (q *RetryQuota) add(n int64) {
	for {
		t := q.tokens.Load()
		v := min(t+n, q.max)
		if v == t || q.tokens.CompareAndSwap(t, v) {
			return
		}
	}
}

// Tokens returns the tokens in the bucket now.
func (q *RetryQuota) Tokens() int { return int(q.tokens.Load()) }

// Level returns Tokens.
func (q *RetryQuota) Level() float64 { return float64(q.tokens.Load()) }

// ExplainStage implements policy.StageExplainer.
func (q *RetryQuota) ExplainStage() policy.Stage {
	return policy.Stage{Refusal: budgetRefusal, Summary: fmt.Sprintf(
		"AWS SDK retry quota: %d tokens; a retry takes %d%s (%d after a throttling error), given back if it succeeds; "+
			"a call that succeeds at its first attempt adds %d; about %d retries in a row before retries stop", q.max, q.cost, q.timeoutNote(), q.throttleCost, q.gain, q.max/q.cost)}
}

// timeoutNote says what a retry after a timeout takes, when that is not RetryCost.
func (q *RetryQuota) timeoutNote() string {
	if q.timeoutCost == q.cost {
		return ""
	}
	return fmt.Sprintf(" (%d after a timeout)", q.timeoutCost)
}

var (
	_ Budget            = (*RetryQuota)(nil)
	_ policy.RetryLease = (*RetryQuota)(nil)
)
