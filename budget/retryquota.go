package budget

import (
	"fmt"
	"sync/atomic"

	"github.com/backstop-go/backstop/policy"
)

// The AWS SDKs' standard retry mode, as aws-sdk-go-v2 sets it (aws/retry:
// DefaultRetryRateTokens, DefaultRetryCost, DefaultRetryTimeoutCost,
// DefaultNoRetryIncrement) and the AWS SDKs and Tools reference guide describes it
// ("Retry behavior": standard mode's retry quota).
const (
	DefaultRetryQuotaTokens      = 500 // the bucket's capacity, and where it starts
	DefaultRetryQuotaRetryCost   = 5   // what a retry takes
	DefaultRetryQuotaTimeoutCost = 10  // what a retry after a timeout takes
	DefaultRetryQuotaSuccessGain = 1   // what a successful call puts back
)

// RetryQuotaOptions configure a [RetryQuota]. The zero value is the AWS SDKs' standard mode.
type RetryQuotaOptions struct {
	// Tokens is the bucket's capacity, full at the start; 0 means DefaultRetryQuotaTokens (500).
	Tokens int
	// RetryCost is what a retry takes; 0 means DefaultRetryQuotaRetryCost (5).
	RetryCost int
	// TimeoutCost is what a retry after a timeout (retry.ReasonTimeout) takes; 0
	// means DefaultRetryQuotaTimeoutCost (10).
	TimeoutCost int
	// SuccessGain is what every successful call puts back; 0 means
	// DefaultRetryQuotaSuccessGain (1), negative means nothing.
	SuccessGain int
}

// RetryQuota is the retry quota of the AWS SDKs' "standard" retry mode: a bucket of 500
// tokens; a retry takes 5 (10 after a timeout) and is refused when the bucket holds
// fewer; a retry whose attempt succeeds gives its tokens back, and every successful
// call adds 1, up to the capacity. After an outage starts, a client retries about 100
// times (500 ÷ 5), then makes first attempts only until successes refill the bucket.
//
// It prices each retry by why it is made, so it implements policy.RetryLease: the
// retry tells it the reason of each retry and whether the retry succeeded. A retry
// loop that only knows policy.RetryBudget gets Withdraw, which takes RetryCost and
// never refunds.
//
// A RetryQuota is safe for concurrent use, lock-free and allocation-free; share one among
// the pipelines that call one service. Build it with [NewRetryQuota].
type RetryQuota struct {
	stage
	counts
	max, cost, timeoutCost, gain int64
	tokens                       atomic.Int64
}

// NewRetryQuota returns a full RetryQuota, with o's zero fields at the AWS SDKs' values, or an
// error matching ErrInvalidOptions naming the bad field.
func NewRetryQuota(o RetryQuotaOptions) (*RetryQuota, error) {
	switch {
	case o.Tokens < 0:
		return nil, fmt.Errorf("%w: Tokens is %d; want > 0, or 0 for the default %d", ErrInvalidOptions, o.Tokens, DefaultRetryQuotaTokens)
	case o.RetryCost < 0:
		return nil, fmt.Errorf("%w: RetryCost is %d; want > 0, or 0 for the default %d", ErrInvalidOptions, o.RetryCost, DefaultRetryQuotaRetryCost)
	case o.TimeoutCost < 0:
		return nil, fmt.Errorf("%w: TimeoutCost is %d; want > 0, or 0 for the default %d", ErrInvalidOptions, o.TimeoutCost, DefaultRetryQuotaTimeoutCost)
	}
	q := &RetryQuota{max: int64(or(o.Tokens, DefaultRetryQuotaTokens)), cost: int64(or(o.RetryCost, DefaultRetryQuotaRetryCost)),
		timeoutCost: int64(or(o.TimeoutCost, DefaultRetryQuotaTimeoutCost)), gain: int64(max(or(o.SuccessGain, DefaultRetryQuotaSuccessGain), 0))}
	if q.cost > q.max || q.timeoutCost > q.max {
		return nil, fmt.Errorf("%w: a retry costs %d (%d after a timeout) but the bucket holds %d; no retry could ever be made",
			ErrInvalidOptions, q.cost, q.timeoutCost, q.max)
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

// MustNewRetryQuota is like [NewRetryQuota] but panics on bad options.
func MustNewRetryQuota(o RetryQuotaOptions) *RetryQuota {
	q, err := NewRetryQuota(o)
	if err != nil {
		panic(err)
	}
	return q
}

// Take takes a retry's price, TimeoutCost if reason is "timeout" (retry.ReasonTimeout)
// and RetryCost otherwise; it refuses the retry if the bucket holds less.
func (q *RetryQuota) Take(reason string) (int64, bool) {
	c := q.cost
	if reason == "timeout" {
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

// End gives a retry's tokens back if its attempt succeeded.
func (q *RetryQuota) End(taken int64, ok bool) {
	if ok {
		q.add(taken)
	}
}

// Withdraw takes RetryCost, for retry loops that do not tell the reason; the tokens
// are never given back.
func (q *RetryQuota) Withdraw() bool {
	_, ok := q.Take("")
	return ok
}

// OnSuccess puts SuccessGain back for a successful call.
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
		"AWS SDK retry quota: %d tokens; a retry takes %d (%d after a timeout), given back if it succeeds; "+
			"a successful call adds %d; about %d retries in a row before retries stop", q.max, q.cost, q.timeoutCost, q.gain, q.max/q.cost)}
}

var (
	_ Budget            = (*RetryQuota)(nil)
	_ policy.RetryLease = (*RetryQuota)(nil)
)
