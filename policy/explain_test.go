package policy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

func TestExplain_WorstCase(t *testing.T) {
	rt := func() *retry.Retry {
		return policy.Must(retry.New(retry.Options{MaxAttempts: 3, Strategy: retry.None{}, MaxHintDelay: time.Second}))
	}
	// 3 attempts × 300 ms + sleeps at their longest (hints of up to 1.5 s beat the
	// 100 and 200 ms backoffs): 0.9 + 1.5 + 1.5 = 3.9 s.
	e := policy.Must(policy.Wrap(rt(), policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond})))).Explain()
	require.Equal(t, 3900*time.Millisecond, e.WorstCase)
	require.Equal(t, "attempts", e.WorstCaseFrom)

	// A deadline shorter than that bounds it.
	e = policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), rt(), policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond})))).Explain()
	require.Equal(t, time.Second, e.WorstCase)
	require.Equal(t, "deadline", e.WorstCaseFrom)

	// Nothing bounds a retry without timeouts.
	e = policy.Must(policy.Wrap(rt())).Explain()
	require.Zero(t, e.WorstCase)
	require.Contains(t, e.String(), "worst case:      unbounded")
	require.Equal(t, 3, e.MaxAttempts)
	require.Equal(t, 1, e.MaxAttemptsPerCallPath, "under another owner a retry makes one attempt")

	e = policy.Must(policy.Wrap()).Explain()
	require.Equal(t, 1, e.MaxAttempts)
	require.Contains(t, e.String(), "no policies")
}

func TestExplain_Schedules(t *testing.T) {
	ms := time.Millisecond
	full := retry.Schedule(retry.Full{}, 4, 100*ms, time.Second)
	require.Equal(t, []policy.Sleep{
		{Min: 0, Mean: 50 * ms, Max: 100 * ms},
		{Min: 0, Mean: 100 * ms, Max: 200 * ms},
		{Min: 0, Mean: 200 * ms, Max: 400 * ms},
	}, roundSleeps(full), "Full: uniform in [0, base·2^(n−1)), mean half")
	g := retry.Schedule(retry.GRPC{Multiplier: 2}, 3, 100*ms, 150*ms)
	require.Equal(t, 80*ms, g[0].Min)
	require.Equal(t, 120*ms, g[0].Max.Round(ms))
	require.Equal(t, 180*ms, g[1].Max, "A6: min(200 ms, the cap 150 ms) · 1.2")
	d := retry.Schedule(retry.Decorrelated{}, 4, 100*ms, time.Second)
	require.Equal(t, 100*ms, d[2].Min, "Decorrelated never sleeps less than base")
	require.Equal(t, []time.Duration{300 * ms, 900 * ms, time.Second}, []time.Duration{d[0].Max.Round(ms), d[1].Max.Round(ms), d[2].Max.Round(ms)},
		"and grows ×3 a retry at most, to the cap: 300, 900, 1000 ms")
}

func roundSleeps(ss []policy.Sleep) []policy.Sleep {
	for i := range ss {
		ss[i] = policy.Sleep{Min: ss[i].Min.Round(time.Millisecond), Mean: ss[i].Mean.Round(time.Millisecond), Max: ss[i].Max.Round(time.Millisecond)}
	}
	return ss
}

func TestExplain_EveryBuiltInPolicySaysWhatItDoes(t *testing.T) {
	for _, tt := range []struct {
		p    policy.Policy
		want string
	}{
		{policy.Must(budget.NewRatio(budget.RatioOptions{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second})), "retries at most 20% of the calls of the last 10s, plus 10 retries"},
		{policy.Must(budget.NewRate(budget.RateOptions{Limit: 2, Burst: 3})), "at most 2 retries per second in this process, in bursts of up to 3"},
		{policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 4, TokenRatio: 0.5})), "retries stop after the 2nd failure in a row (tokens ≤ 2)"},
		{policy.Must(shed.New(shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 8}, Queue: shed.QueueOptions{Max: -1}})), `shedder "api" admits work up to a fixed limit of 8 in flight, with no queue`},
		{policy.Must(shed.New(shed.Options{Name: "api"})), "an adaptive limit (now 1000, within 1–1000)"},
	} {
		x, ok := tt.p.(policy.StageExplainer)
		require.True(t, ok, "%T is a StageExplainer", tt.p)
		if got := x.ExplainStage().Summary; !strings.Contains(got, tt.want) {
			t.Errorf("%T.ExplainStage().Summary = %q; want it to hold %q", tt.p, got, tt.want)
		}
	}
	e := policy.Must(policy.Wrap(policy.Must(shed.New(shed.Options{Name: "api"})))).Explain()
	require.Len(t, e.Refusals, 1)
	require.Contains(t, e.Refusals[0], "429 with Retry-After")
}

func TestExplain_ThirdPartyPoliciesAreNamed(t *testing.T) {
	e := policy.Must(policy.Wrap(ot(), policy.Must(retry.New(retry.Options{})))).Explain()
	require.Len(t, e.Unexplained, 1)
	require.Contains(t, e.Unexplained[0], "chaos at position 1 (*policy_test.fake)")
	require.Contains(t, e.String(), "unexplained:")
}

func TestExplain_JSON(t *testing.T) {
	e := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), policy.Must(retry.New(retry.Options{MaxAttempts: 3})))).With(policy.Name("db")).Explain()
	b, err := json.Marshal(e)
	require.NoError(t, err)
	var v struct {
		Pipeline    string   `json:"pipeline"`
		MaxAttempts int      `json:"max_attempts"`
		WorstCase   *float64 `json:"worst_case_seconds"`
		Stack       []struct {
			Kind   string `json:"kind"`
			Sleeps []struct {
				Max float64 `json:"max_seconds"`
			} `json:"sleeps"`
		} `json:"stack"`
	}
	require.NoError(t, json.Unmarshal(b, &v))
	require.Equal(t, "db", v.Pipeline)
	require.Equal(t, 3, v.MaxAttempts)
	require.NotNil(t, v.WorstCase)
	require.Equal(t, 2.0, *v.WorstCase)
	require.Equal(t, "retry", v.Stack[1].Kind)
	require.Len(t, v.Stack[1].Sleeps, 2)
	require.InDelta(t, 0.1, v.Stack[1].Sleeps[0].Max, 1e-9)

	b, err = json.Marshal(policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{})))).Explain())
	require.NoError(t, err)
	require.Contains(t, string(b), `"worst_case_seconds":null`, "unbounded is null, not 0")
}

func TestExplain_WaitsCountInTheWorstCase(t *testing.T) {
	rt := func() *retry.Retry {
		return policy.Must(retry.New(retry.Options{MaxAttempts: 3, Strategy: retry.None{}, MaxHintDelay: time.Millisecond})) // hints below the backoff
	}
	perTry := func() *deadline.Deadline {
		return policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond}))
	}
	queue := func() *bulkhead.Bulkhead {
		return policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 4, MaxQueue: 8, MaxWait: 50 * time.Millisecond}))
	}
	tokens := func() *ratelimit.Limiter {
		return policy.Must(ratelimit.New(ratelimit.Options{Name: "db", Rate: 10, MaxWait: 20 * time.Millisecond}))
	}

	// 3 attempts × 300 ms + sleeps of 100 and 200 ms = 1.2 s, and a wait in the
	// bulkhead outside the retry, once: 1.25 s.
	e := policy.Must(policy.Wrap(queue(), rt(), perTry())).Explain()
	require.Equal(t, 1250*time.Millisecond, e.WorstCase)

	// Inside the retry, the wait comes before each attempt: 3 × (300 + 50 + 20) ms +
	// 300 ms of sleeps = 1.41 s.
	e = policy.Must(policy.Wrap(rt(), queue(), tokens(), perTry())).Explain()
	require.Equal(t, 1410*time.Millisecond, e.WorstCase)
	require.Contains(t, e.String(), "every sleep and wait at its longest")

	// A rate limiter that waits as long as the deadline allows, with no deadline:
	// nothing bounds the call.
	e = policy.Must(policy.Wrap(rt(), policy.Must(ratelimit.New(ratelimit.Options{Name: "db", Rate: 10})), perTry())).Explain()
	require.Zero(t, e.WorstCase)
	require.Equal(t, "", e.WorstCaseFrom)
	require.Contains(t, e.String(), "worst case:      unbounded: no overall deadline, and a stage may wait as long as the call's deadline allows")

	// With a deadline, the deadline bounds it.
	e = policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), rt(), policy.Must(ratelimit.New(ratelimit.Options{Name: "db", Rate: 10})), perTry())).Explain()
	require.Equal(t, time.Second, e.WorstCase)
	require.Equal(t, "deadline", e.WorstCaseFrom)

	// Refuse mode and a bulkhead with no queue never wait.
	e = policy.Must(policy.Wrap(rt(), policy.Must(bulkhead.New(bulkhead.Options{Name: "db"})),
		policy.Must(ratelimit.New(ratelimit.Options{Name: "db", Rate: 10, Mode: ratelimit.Refuse})), perTry())).Explain()
	require.Equal(t, 1200*time.Millisecond, e.WorstCase)
}
