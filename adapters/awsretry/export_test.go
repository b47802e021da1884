package awsretry

import (
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"
)

// NewStandardWith is NewStandard with a clock and a random source, for tests; it
// returns the pipeline's quota too.
func NewStandardWith(name string, clock clock.Clock, r jitter.Rand) (*Retryer, *budget.RetryQuota) {
	return newStandard(name, clock, r)
}

// NewStandardQuotaWith is NewStandardWith over a quota of tokens (0: the SDKs' 500).
func NewStandardQuotaWith(name string, tokens int, clock clock.Clock, r jitter.Rand) (*Retryer, *budget.RetryQuota) {
	return newStandardQuota(name, budget.RetryQuotaOptions{Tokens: tokens}, clock, r)
}
