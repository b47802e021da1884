package connectpolicy

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-go/backstop/clock"

	"connectrpc.com/connect"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
)

// classifier judges attempts' errors by their code.
type classifier struct {
	retryable [32]bool // by code; codes are below 17
}

func newClassifier(o Options) (*classifier, error) {
	c := &classifier{}
	if o.RetryableCodes == nil {
		c.retryable[DefaultRetryableCode] = true
	}
	for i, code := range o.RetryableCodes {
		if code < connect.CodeCanceled || code > connect.CodeUnauthenticated {
			return nil, badOption("RetryableCodes[%d] is %d; want a code from connect.CodeCanceled to connect.CodeUnauthenticated", i, code)
		}
		c.retryable[code] = true
	}
	return c, nil
}

// Classify marks an error a connect call returned with what it means to a Backstop
// retry, retrying [DefaultRetryableCode] only; an interceptor from [NewInterceptor]
// classifies with its Options' codes.
//
//   - A pushback in the error's metadata (Grpc-Retry-Pushback-Ms, gRFC A6) that is
//     negative, malformed or given twice forbids a retry whatever the code
//     (fault.Pushback with a negative delay, counted as a failure by a budget).
//   - A refusal by a Backstop server (callpath.HeaderRefused in the metadata, code
//     resource_exhausted or unavailable) is fault.Refused, retried after the server's
//     Backstop-Retry-After-Ms, pushback or Retry-After, and counted by neither a
//     breaker nor a budget: the server protects itself.
//   - A retryable code is fault.Retryable, or fault.Pushback with the server's
//     pushback (waited exactly), or fault.After with its Retry-After.
//   - invalid_argument, not_found, already_exists, permission_denied,
//     failed_precondition, out_of_range, unimplemented and unauthenticated are the
//     caller's (fault.Client): a breaker does not count them.
//
// Anything else — the caller's cancellation and deadline included — is returned as
// it is. Classify(nil) is nil.
func Classify(err error) error {
	return defaultClassifier.classify(err, clock.System())
}

var defaultClassifier = &classifier{retryable: func() (r [32]bool) { r[DefaultRetryableCode] = true; return r }()}

func (c *classifier) classify(err error, clock clock.Clock) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	code, meta := ce.Code(), ce.Meta()
	d, pushed := pushback(meta)
	switch {
	case pushed && d < 0:
		return fault.Pushback(err, -1)
	case meta.Get(callpath.HeaderRefused) != "" && (code == connect.CodeResourceExhausted || code == connect.CodeUnavailable):
		if ms, ok := millis(meta.Get(callpath.HeaderRetryAfterMillis)); ok {
			return fault.Refused(err, ms)
		}
		if pushed {
			return fault.Refused(err, d)
		}
		ra, _ := callpath.ParseRetryAfter(meta.Get(HeaderRetryAfter), clock.Now())
		return fault.Refused(err, ra)
	case int(code) < len(c.retryable) && c.retryable[code]:
		if pushed {
			return fault.Pushback(err, d)
		}
		if ra, ok := callpath.ParseRetryAfter(meta.Get(HeaderRetryAfter), clock.Now()); ok && ra > 0 {
			return fault.After(err, ra)
		}
		return fault.Retryable(err)
	}
	switch code {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeAlreadyExists, connect.CodePermissionDenied,
		connect.CodeFailedPrecondition, connect.CodeOutOfRange, connect.CodeUnimplemented, connect.CodeUnauthenticated:
		return fault.Client(err)
	}
	return err
}

// pushback reads the pushback of an error's metadata: the delay, or −1 for do not
// retry (negative, malformed, or more than one value); ok is false if there is none.
func pushback(meta http.Header) (time.Duration, bool) {
	switch v := meta.Values(HeaderPushback); len(v) {
	case 0:
		return 0, false
	case 1:
		if d, ok := millis(v[0]); ok {
			return d, true
		}
	}
	return -1, true
}

// millis reads a non-negative decimal count of milliseconds; huge values saturate.
func millis(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	ms, err := strconv.ParseUint(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return math.MaxInt64, true
	case err != nil:
		return 0, false
	case ms > math.MaxInt64/uint64(time.Millisecond):
		return math.MaxInt64, true
	}
	return time.Duration(ms) * time.Millisecond, true
}
