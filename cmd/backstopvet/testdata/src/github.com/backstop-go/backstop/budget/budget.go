package budget

type TokenBucket struct{}

func NewTokenBucket(float64, float64) (*TokenBucket, error) { return nil, nil }
func MustNewTokenBucket(float64, float64) *TokenBucket      { return nil }
