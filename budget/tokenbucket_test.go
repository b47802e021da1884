package budget_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Run("TokenBucket", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy {
			b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
			return b
		})
	})
	t.Run("Ratio", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy { b := policy.Must(budget.NewRatio(budget.RatioOptions{})); return b })
	})
	t.Run("Rate", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy {
			b := policy.Must(budget.NewRate(budget.RateOptions{Limit: 10, Burst: 1}))
			return b
		})
	})
	t.Run("RetryQuota", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy { return policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})) })
	})
	t.Run("InFlight", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy {
			return policy.Must(budget.NewInFlight(budget.InFlightOptions{Budget: policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), Max: 1}))
		})
	})
}

// TestTokenBucket_Sequences drives buckets through failures (F), successes (S) and
// retry checks (? then the answer, + allowed, - refused), checking the count at the end.
func TestTokenBucket_Sequences(t *testing.T) {
	tests := []struct {
		name       string
		max, ratio float64
		ops        string
		tokens     float64
	}{
		{"a full bucket allows retries", 10, 0.1, "?+", 10},
		{"first failure from full", 10, 0.1, "F?+", 9},                             // 9 > 5
		{"strictly greater: 6 allows", 10, 0.1, "FFFF?+", 6},                       // 6 > 5
		{"strictly greater: 5 refuses", 10, 0.1, "FFFFF?-", 5},                     // 5 > 5 is false
		{"fractional threshold: 3 > 2.5", 5, 0.1, "FF?+", 3},                       //
		{"fractional threshold: 2 ≤ 2.5", 5, 0.1, "FFF?-", 2},                      //
		{"maxTokens 1: allowed until a failure", 1, 0.1, "?+F?-", 0},               // 1 > 0.5, then 0
		{"maxTokens 1: never again without successes", 1, 0.5, "FS?-S?+", 1},       // 0.5 ≤ 0.5, then 1
		{"maxTokens 2: refused after the first failure", 2, 0.1, "F?-", 1},         // 1 > 1 is false
		{"floor at zero", 2, 0.1, "FFFFF?-", 0},                                    // never negative
		{"floor at zero, then refill", 2, 1, "FFFFS?-S?+", 2},                      // 0 → 1 → 2
		{"cap at max", 10, 0.1, "SSS?+", 10},                                       //
		{"0.1 ten times is exactly 1", 10, 0.1, "FFFFFF" + "SSSSSSSSSS?-S?+", 5.1}, // 4 + 1.0 = 5, refused; 5.1 allowed
		{"tokenRatio above 1", 10, 2.5, "FFFFFF?-S?+", 6.5},                        // 4 ≤ 5, then 6.5
		{"tokenRatio to 3 decimals", 10, 0.1239, "FS", 9.123},                      // 0.1239 is 0.123
		{"0.29 is not 0.289", 10, 0.29, "FS", 9.29},                                //
		{"a retry check takes nothing", 10, 0.1, "F?+?+?+?+?+", 9},                 //
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: tt.max, TokenRatio: tt.ratio})
			require.NoError(t, err)
			for i := 0; i < len(tt.ops); i++ {
				switch tt.ops[i] {
				case 'F':
					b.OnFailure()
				case 'S':
					b.OnSuccess()
				case '?':
					i++
					want := tt.ops[i] == '+'
					if got := b.Withdraw(); got != want {
						t.Fatalf("after %q (tokens %v): Withdraw() = %v; want %v", tt.ops[:i-1], b.Tokens(), got, want)
					}
				}
			}
			if got := b.Tokens(); math.Abs(got-tt.tokens) > 1e-9 {
				t.Errorf("after %q: Tokens() = %v; want %v", tt.ops, got, tt.tokens)
			}
		})
	}
}

func TestTokenBucket_CountsAndLevel(t *testing.T) {
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 4, TokenRatio: 1}))
	b.Withdraw()
	b.OnFailure()
	b.OnFailure()
	b.Withdraw() // 2 > 2 is false
	require.Equal(t, uint64(1), b.Allowed())
	require.Equal(t, uint64(1), b.Refused())
	require.Equal(t, 2.0, b.Level())
	require.Equal(t, 4.0, b.MaxTokens())
}

func TestNewTokenBucket_Validation(t *testing.T) {
	tests := []struct {
		max, ratio float64
		msg        string // "" = valid
	}{
		{1000, 1, ""},
		{0.5, 0.001, ""},
		{0, 0.1, "MaxTokens is 0"},
		{-1, 0.1, "MaxTokens is -1"},
		{1000.5, 0.1, "MaxTokens is 1000.5"},
		{math.NaN(), 0.1, "MaxTokens is NaN"},
		{10, 0, "TokenRatio is 0"},
		{10, -0.1, "TokenRatio is -0.1"},
		{10, math.Inf(1), "TokenRatio is +Inf"},
		{10, 0.0004, "0 to three decimals"},
	}
	for _, tt := range tests {
		_, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: tt.max, TokenRatio: tt.ratio})
		if tt.msg == "" {
			require.NoError(t, err, "NewTokenBucket(%v, %v)", tt.max, tt.ratio)
			continue
		}
		if !errors.Is(err, budget.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("NewTokenBucket(%v, %v) = %v; want ErrInvalidOptions saying %q", tt.max, tt.ratio, err, tt.msg)
		}
	}
}

func TestParseTokenBucket(t *testing.T) {
	tests := []struct {
		in     string
		tokens float64 // 0 = error
		msg    string
	}{
		{`{"maxTokens": 10, "tokenRatio": 0.1}`, 10, ""},
		{` {"tokenRatio": 1, "maxTokens": 3} `, 3, ""},
		{`{"maxTokens": 10}`, 0, "tokenRatio is missing"},
		{`{"tokenRatio": 0.1}`, 0, "maxTokens is missing"},
		{`{"maxTokens": 10, "tokenRatio": 0.1, "extra": 1}`, 0, "unknown field"},
		{`{"maxTokens": "10", "tokenRatio": 0.1}`, 0, "cannot unmarshal"},
		{`{"maxTokens": 2000, "tokenRatio": 0.1}`, 0, "MaxTokens is 2000"},
		{`{"maxTokens": 10, "tokenRatio": 0.1}{}`, 0, "data after the object"},
		{``, 0, "EOF"},
		{`[]`, 0, "cannot unmarshal"},
	}
	for _, tt := range tests {
		b, err := budget.ParseTokenBucket([]byte(tt.in))
		if tt.msg == "" {
			require.NoError(t, err, "ParseTokenBucket(%s)", tt.in)
			require.Equal(t, tt.tokens, b.Tokens())
			continue
		}
		if !errors.Is(err, budget.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseTokenBucket(%s) = %v; want ErrInvalidOptions saying %q", tt.in, err, tt.msg)
		}
	}
}

// FuzzParseTokenBucket: any input either fails with ErrInvalidOptions or gives a full
// bucket within A6's bounds.
func FuzzParseTokenBucket(f *testing.F) {
	for _, s := range []string{
		`{"maxTokens": 10, "tokenRatio": 0.1}`, // the A6 example
		`{"maxTokens": 1000, "tokenRatio": 1e-3}`,
		`{"maxTokens": 1e3, "tokenRatio": 0.0009}`, // ratio truncates to 0
		`{"maxTokens": -1}`, `null`, `{}`, `{"maxTokens": 5, "tokenRatio": 1}x`,
		`{"maxTokens": 10, "tokenRatio": 9.3e15}`, // a ratio past int64 milli-tokens saturates
		`{"maxTokens": 0.0004, "tokenRatio": 1}`,  // max truncates to 0
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := budget.ParseTokenBucket([]byte(s))
		if err != nil {
			if !errors.Is(err, budget.ErrInvalidOptions) {
				t.Fatalf("ParseTokenBucket(%q) = %v; want ErrInvalidOptions", s, err)
			}
			return
		}
		if m := b.MaxTokens(); !(m > 0 && m <= 1000) || b.Tokens() != m {
			t.Fatalf("ParseTokenBucket(%q): max %v, tokens %v; want a full bucket in (0, 1000]", s, m, b.Tokens())
		}
		b.OnFailure()
		b.OnSuccess()
		if tk := b.Tokens(); !(tk > 0 && tk <= b.MaxTokens()) {
			t.Fatalf("ParseTokenBucket(%q): after a failure and a success, tokens %v; want in (0, %v]", s, tk, b.MaxTokens())
		}
	})
}

func TestTokenBucket_ConcurrentUseKeepsBounds(t *testing.T) {
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.5}))
	var wg sync.WaitGroup
	var withdraws atomic.Uint64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				switch (g + i) % 3 {
				case 0:
					b.OnFailure()
				case 1:
					b.OnSuccess()
				default:
					withdraws.Add(1)
					b.Withdraw()
				}
			}
		}()
	}
	wg.Wait()
	if tk := b.Tokens(); tk < 0 || tk > 10 {
		t.Errorf("Tokens() = %v after concurrent use; want within [0, 10]", tk)
	}
	require.Equal(t, withdraws.Load(), b.Allowed()+b.Refused(), "every Withdraw counted once")
}

func TestTokenBucket_HotPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	if n := testing.AllocsPerRun(1000, func() { b.Deposit(); b.OnFailure(); b.Withdraw(); b.OnSuccess() }); n != 0 {
		t.Errorf("TokenBucket hot path allocates %v per call; want 0", n)
	}
}

// TestTokenBucket_HugeRatioSaturates: a ratio past what milli-tokens can hold refills
// the bucket with one success instead of overflowing into a bucket that refuses every
// retry forever.
func TestTokenBucket_HugeRatioSaturates(t *testing.T) {
	b, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 9.3e15})
	require.NoError(t, err)
	for range 10 {
		b.OnFailure()
	}
	require.Equal(t, 0.0, b.Tokens()) // tokens 0 = 10 − 10 failures
	require.False(t, b.Withdraw())
	b.OnSuccess()
	require.Equal(t, 10.0, b.Tokens(), "one success refills to maxTokens")
	require.True(t, b.Withdraw())

	b = policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 10})) // ratio = maxTokens: the same
	b.OnFailure()
	b.OnSuccess()
	require.Equal(t, 10.0, b.Tokens())
	require.Panics(t, func() { policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 0, TokenRatio: 0.1})) })
}
