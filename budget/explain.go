package budget

import (
	"fmt"
	"math"

	"github.com/backstop-go/backstop/policy"
)

const budgetRefusal = "an exhausted budget stops the retrying: the call returns its last error (retry.ErrBudget)"

// ExplainStage implements policy.StageExplainer.
func (b *TokenBucket) ExplainStage() policy.Stage {
	// Retries stop once tokens ≤ max/2: after ⌈max/2⌉ failures in a row from full.
	stop := int(math.Ceil(float64(b.max) / 2 / 1000))
	return policy.Stage{Refusal: budgetRefusal, Summary: fmt.Sprintf(
		"gRFC A6 retry throttling: %v tokens; each retryable failure costs 1; retries stop after the %s failure in a row "+
			"(tokens ≤ %v) and resume as successes refund %v each", b.MaxTokens(), ordinal(stop), b.MaxTokens()/2, float64(b.ratio)/1000)}
}

// ExplainStage implements policy.StageExplainer.
func (r *Ratio) ExplainStage() policy.Stage {
	return policy.Stage{Refusal: budgetRefusal, Summary: fmt.Sprintf(
		"retries at most %v%% of the calls of the last %v, plus %v retries over that window", r.ratio*100, r.window, r.floor)}
}

// ExplainStage implements policy.StageExplainer.
func (b *Rate) ExplainStage() policy.Stage {
	return policy.Stage{Refusal: budgetRefusal, Summary: fmt.Sprintf(
		"at most %v retries per second in this process, in bursts of up to %d", float64(b.lim.Limit()), b.lim.Burst())}
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
