package budget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
)

// TokenBucket is gRPC's retry throttling (gRFC A6 retryThrottling), exactly:
//   - the bucket starts full at maxTokens;
//   - each attempt that fails with a retryable error costs one token, never going
//     below zero;
//   - a retry is allowed only while the count is strictly greater than
//     maxTokens/2;
//   - each successful call adds tokenRatio, capped at maxTokens.
//
// Withdraw itself takes nothing: failures pay.
//
// Counts are kept in integer milli-tokens, as gRPC C-core does. So thresholds are
// exact: 0.1 added ten times is exactly 1. During a broad outage, the bucket drains
// to the threshold after maxTokens/2 failures. Retries then stop until successes
// refill it. Retry load fades instead of multiplying.
//
// A TokenBucket is safe for concurrent use, and is meant to be shared. Use one per
// dependency, in every pipeline that calls it. Build it with [NewTokenBucket]; the
// zero value is not usable.
//
// See https://github.com/grpc/proposal/blob/master/A6-client-retries.md#throttling-retry-attempts-and-hedged-rpcs.
type TokenBucket struct {
	stage
	counts
	max    int64 // milli-tokens
	ratio  int64 // milli-tokens per success
	tokens atomic.Int64
}

// MaxTokenBucketTokens is the largest maxTokens gRFC A6 allows.
const MaxTokenBucketTokens = 1000

// toMilli converts to milli-tokens. It keeps three decimals and truncates the rest,
// as A6 says. It does not lose 0.29 to floating-point (0.29·1000 =
// 289.99999999999997).
func toMilli(v float64) int64 { return int64(math.Floor(v*1000 + 1e-6)) }

// TokenBucketOptions configure a [TokenBucket], as gRFC A6's retryThrottling does.
type TokenBucketOptions struct {
	// Name names the bucket. Package fleet keys its shared state by it. It is
	// optional for a bucket of one process.
	Name string
	// MaxTokens is the bucket's size, in (0, 1000]. Required.
	MaxTokens float64
	// TokenRatio is what each successful call refills, > 0. Required.
	TokenRatio float64
}

// NewTokenBucket returns a full bucket. Or it returns an error matching
// ErrInvalidOptions that names the field. As in A6, decimals past the third are
// dropped: 0.1239 is 0.123. A TokenRatio that is 0 to three decimals is refused,
// and so is an infinite one. A TokenRatio of MaxTokens or more saturates: one
// success refills the bucket.
func NewTokenBucket(o TokenBucketOptions) (*TokenBucket, error) {
	maxTokens, tokenRatio := o.MaxTokens, o.TokenRatio
	if !(maxTokens > 0 && maxTokens <= MaxTokenBucketTokens) {
		return nil, fmt.Errorf("%w: MaxTokens is %v; want a number in (0, %d]", ErrInvalidOptions, maxTokens, MaxTokenBucketTokens)
	}
	if !(tokenRatio > 0) || math.IsInf(tokenRatio, 0) {
		return nil, fmt.Errorf("%w: TokenRatio is %v; want a finite number > 0", ErrInvalidOptions, tokenRatio)
	}
	limit := toMilli(maxTokens)
	if limit == 0 {
		return nil, fmt.Errorf("%w: MaxTokens is %v, which is 0 to three decimals; want ≥ 0.001", ErrInvalidOptions, maxTokens)
	}
	ratio := limit
	if tokenRatio < maxTokens { // beyond, saturate: toMilli would overflow
		ratio = toMilli(tokenRatio)
	}
	if ratio == 0 {
		return nil, fmt.Errorf("%w: TokenRatio is %v, which is 0 to three decimals; want ≥ 0.001", ErrInvalidOptions, tokenRatio)
	}
	b := &TokenBucket{max: limit, ratio: ratio}
	b.tokens.Store(b.max)
	return b, nil
}

// tokenBucketJSON is the retryThrottling object of a gRPC service config.
type tokenBucketJSON struct {
	MaxTokens  *float64 `json:"maxTokens"`
	TokenRatio *float64 `json:"tokenRatio"`
}

// ParseTokenBucket builds a TokenBucket from the JSON of a gRPC service config's
// retryThrottling object: {"maxTokens": 10, "tokenRatio": 0.1}, say. Both fields
// are required. Unknown fields and trailing data are refused.
func ParseTokenBucket(data []byte) (*TokenBucket, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v tokenBucketJSON
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: retryThrottling: %v", ErrInvalidOptions, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: retryThrottling: data after the object", ErrInvalidOptions)
	}
	switch {
	case v.MaxTokens == nil:
		return nil, fmt.Errorf("%w: retryThrottling: maxTokens is missing", ErrInvalidOptions)
	case v.TokenRatio == nil:
		return nil, fmt.Errorf("%w: retryThrottling: tokenRatio is missing", ErrInvalidOptions)
	}
	return NewTokenBucket(TokenBucketOptions{MaxTokens: *v.MaxTokens, TokenRatio: *v.TokenRatio})
}

// Tokens returns the current count of tokens.
func (b *TokenBucket) Tokens() float64 { return float64(b.tokens.Load()) / 1000 }

// Level returns Tokens.
func (b *TokenBucket) Level() float64 { return b.Tokens() }

// MaxTokens returns the bucket's capacity.
func (b *TokenBucket) MaxTokens() float64 { return float64(b.max) / 1000 }

// Deposit does nothing: the bucket is filled by successes, not by calls.
func (b *TokenBucket) Deposit() {}

// Withdraw reports whether a retry may start: whether the count is strictly
// greater than maxTokens/2. It takes no token.
func (b *TokenBucket) Withdraw() bool {
	return b.count(b.tokens.Load()*2 > b.max)
}

// OnFailure takes one token for an attempt that failed with a retryable error. It
// never goes below zero.
func (b *TokenBucket) OnFailure() {
	for {
		t := b.tokens.Load()
		n := max(t-1000, 0)
		if t == n || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// OnSuccess adds tokenRatio for a successful call, never going above maxTokens.
func (b *TokenBucket) OnSuccess() {
	for {
		t := b.tokens.Load()
		n := min(t+b.ratio, b.max)
		if t == n || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}
