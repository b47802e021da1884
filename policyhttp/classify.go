package policyhttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/callpath"
)

// StatusError is the error an attempt ends with when its response's status says the
// call failed. The transport keeps the response. If the pipeline gives up, the caller
// gets the response itself, with a nil error, as http.RoundTripper requires.
type StatusError struct {
	StatusCode int
	Status     string // e.g. "503 Service Unavailable"
}

func (e *StatusError) Error() string {
	if e.Status != "" {
		return "policyhttp: " + e.Status
	}
	return "policyhttp: status " + strconv.Itoa(e.StatusCode)
}

// Classifier turns a response into the attempt's error. It returns nil for a response
// to hand to the caller as it is. Otherwise it returns an error the pipeline's retry
// and breaker judge. Mark it with fault.Retryable or fault.After to retry it, and with
// fault.Client to keep it from counting against the breaker. A Classifier may read
// res's headers, never its body. The time the response arrived is now, for Retry-After
// dates.
type Classifier func(res *http.Response, now time.Time) error

// DefaultClassifier is the judgement of [NewTransport] unless Options.Classifier replaces it:
//
//	| status              | attempt error                     | retried | counts against a breaker |
//	|---------------------|-----------------------------------|---------|--------------------------|
//	| 1xx, 2xx, 3xx       | none: the response is returned    | —       | success                  |
//	| 408, 429            | retryable (429 with Retry-After)  | yes     | no (client side)         |
//	| 502, 503, 504       | retryable (503 with Retry-After)  | yes     | yes (*)                  |
//	| 500, other 5xx      | failure                           | no      | yes                      |
//	| other 4xx           | client fault                      | no      | no                       |
//
// (*) except a 429 or 503 with callpath.HeaderRefused. There a Backstop server's
// shedder or breaker refused, or the server answers for a dependency whose failures its
// own breaker counts. It is retried after its Retry-After, or after
// callpath.HeaderRetryAfterMillis when the server sends it (fault.Refused). It counts
// against neither a breaker nor a budget. So the breakers and budgets above it do not
// all trip on one outage at the end of the call path.
//
// 500 is not retried by default: it usually reports a bug that a retry hits again. By
// contrast 502/503/504 report a dependency or proxy that may recover. Retry-After, in
// either RFC 9110 form, becomes the retry's hint (fault.After).
func DefaultClassifier(res *http.Response, now time.Time) error {
	code := res.StatusCode
	if code < 400 {
		return nil
	}
	err := &StatusError{StatusCode: code, Status: res.Status}
	switch code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		d, hinted := callpath.ParseRetryAfter(res.Header.Get("Retry-After"), now)
		if res.Header.Get(callpath.HeaderRefused) != "" {
			if ms, ok := parseMillis(res.Header.Get(callpath.HeaderRetryAfterMillis)); ok {
				d = ms
			}
			// A Backstop server's protection refused: wait as it asks. Count it against
			// neither a breaker nor a budget, since the server's own breaker counts.
			return fault.Client(fault.Refused(err, d))
		}
		var marked error = fault.Retryable(err)
		if hinted {
			marked = fault.After(err, d)
		}
		if code == http.StatusTooManyRequests {
			return fault.Client(marked)
		}
		return marked
	case http.StatusRequestTimeout:
		return fault.Client(fault.Retryable(err))
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return fault.Retryable(err)
	}
	if code < 500 {
		return fault.Client(err)
	}
	return err
}

// parseMillis reads callpath.HeaderRetryAfterMillis: a non-negative integer of
// milliseconds. Values above callpath.MaxRetryAfter (a day) saturate at it. Anything
// else is false.
func parseMillis(v string) (time.Duration, bool) {
	if v == "" || len(v) > 12 {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return min(time.Duration(n)*time.Millisecond, callpath.MaxRetryAfter), true
}
