package awsretry

import (
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/retry"
)

// HeaderAmzRetryAfter is the AWS services' hint, in milliseconds, of when to come back.
const HeaderAmzRetryAfter = "X-Amz-Retry-After"

// Classify marks an AWS SDK error with what it means to a Backstop retry, by the SDK's
// own rules (aws/retry.DefaultRetryables), in their order. An error that answers
// RetryableError() decides for itself: false is marked fault.Permanent, whatever else
// it is (a timeout, a reset connection). Throttling codes (ThrottlingException,
// SlowDown, ProvisionedThroughputExceededException, …; an unmodelled 429) are marked
// fault.Throttled, which budget.RetryQuota prices at 5. HTTP 500, 502, 503 and 504,
// connection errors and a request the service found signed with a skewed clock are
// marked fault.Retryable. Either carries fault.After with the server's
// X-Amz-Retry-After (ms, at most AmzRetryAfterSpan, as the SDKs bound it) or
// Retry-After when it sent one. A timeout the SDK retries, and a RequestTimeout code,
// are retried as retry.ReasonTimeout.
//
// A canceled request stays as it is: the retry retries an attempt its per-attempt
// timeout ended, never a canceled call. Any other answer in 4xx is marked
// fault.Client: a breaker does not count the caller's mistakes against the service.
// An error the SDK does not retry but Backstop's default classifier would (a broken
// pipe) is marked fault.Permanent. Anything else is returned as it is.
// Classify(nil) is nil.
//
// A Retryer classifies every attempt with it; a pipeline that runs SDK calls itself,
// with aws.NopRetryer as the client's retryer, can do the same.
func Classify(err error) error { return classify(err, nil, time.Now()) }

func classify(err error, extra map[string]struct{}, now time.Time) error {
	if err == nil {
		return nil
	}
	var canceled interface{ CanceledError() bool }
	if errors.As(err, &canceled) && canceled.CanceledError() {
		return err
	}
	verdict := sdkRetryables.IsErrorRetryable(err)
	code := errorCode(err)
	if _, listed := extra[code]; listed {
		verdict = aws.TrueTernary // as the SDK's AddWithErrorCodes, which asks first
	}
	if verdict != aws.TrueTernary {
		var status interface{ HTTPStatusCode() int }
		switch {
		case verdict == aws.FalseTernary:
			return fault.Permanent(err) // the error's own answer wins
		case errors.As(err, &status) && status.HTTPStatusCode() >= 400 && status.HTTPStatusCode() < 500:
			return fault.Client(err)
		case retry.DefaultShouldRetry(err):
			return fault.Permanent(err) // the SDK does not retry it
		}
		return err
	}
	if _, ok := timeoutCodes[code]; ok {
		return &timeout{err}
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() {
		return err // the default classifier retries a timeout as retry.ReasonTimeout
	}
	marked := fault.Retryable(err)
	if sdkThrottles.IsErrorThrottle(err) == aws.TrueTernary {
		marked = fault.Throttled(err)
	}
	if d, ok := hint(err, now); ok {
		return fault.After(marked, d)
	}
	return marked
}

// sdkThrottles are the SDK's throttling checks (aws/retry.DefaultThrottles): codes such
// as ThrottlingException, SlowDown and ProvisionedThroughputExceededException.
var sdkThrottles = awsretry.IsErrorThrottles(awsretry.DefaultThrottles)

// sdkRetryables are the SDK's retryable checks, in its order.
var sdkRetryables = awsretry.IsErrorRetryables(awsretry.DefaultRetryables)

// timeoutCodes are the SDK's retryable codes that say the request timed out
// (aws/retry.DefaultRetryableErrorCodes).
var timeoutCodes = map[string]struct{}{"RequestTimeout": {}, "RequestTimeoutException": {}}

func errorCode(err error) string {
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// hint reads the server's hint of when to come back from the response of err:
// X-Amz-Retry-After, at most AmzRetryAfterSpan (the SDKs wait at most that much above
// their backoff), else Retry-After.
func hint(err error, now time.Time) (time.Duration, bool) {
	if d, ok := amzRetryAfter(err); ok {
		return min(d, AmzRetryAfterSpan), true
	}
	if re := responseOf(err); re != nil {
		if v := re.Response.Header.Get("Retry-After"); v != "" {
			return callpath.ParseRetryAfter(v, now)
		}
	}
	return 0, false
}

// amzRetryAfter reads X-Amz-Retry-After, milliseconds, from the response of err; a
// value that is not a non-negative integer is ignored, as the SDKs do.
func amzRetryAfter(err error) (time.Duration, bool) {
	re := responseOf(err)
	if re == nil {
		return 0, false
	}
	if v := re.Response.Header.Get(HeaderAmzRetryAfter); v != "" {
		if ms, perr := strconv.ParseInt(v, 10, 64); perr == nil && ms >= 0 && ms <= int64(callpath.MaxRetryAfter/time.Millisecond) {
			return time.Duration(ms) * time.Millisecond, true
		}
	}
	return 0, false
}

// responseOf returns the HTTP response error under err, or nil.
func responseOf(err error) *smithyhttp.ResponseError {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return nil
	}
	return re
}

// timeout is an error the SDK retries because the request timed out: the default
// classifier retries it as a timeout.
type timeout struct{ err error }

func (e *timeout) Error() string { return e.err.Error() }
func (e *timeout) Unwrap() error { return e.err }
func (e *timeout) Timeout() bool { return true }
