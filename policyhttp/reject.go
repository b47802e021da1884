package policyhttp

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
)

// rejectionBody is the problem+json (RFC 9457) body WriteRejection sends.
const rejectionBody = `{"type":"about:blank","title":"Service Unavailable","status":503,` +
	`"detail":"a dependency of this service refused the call; retry after the time in Retry-After"}` + "\n"

// WriteRejection answers w for a call that a policy on its call path refused. Here err
// is, or wraps, a [*policy.RejectError], such as an open breaker in front of this
// handler's dependency. It answers as a Backstop server answers for itself:
//
//   - 503 Service Unavailable;
//   - Retry-After in whole seconds, rounded up and at least 1 (RFC 9110 §10.2.3);
//   - [callpath.HeaderRefused] with the rejection's reason, so the caller's breaker and
//     budget leave the answer to this server's own breaker;
//   - [callpath.HeaderRetryAfterMillis] with the wait to the millisecond;
//   - a small application/problem+json body.
//
// It reports whether it wrote. It returns false, with nothing written, when err carries
// no RejectError.
func WriteRejection(w http.ResponseWriter, err error) bool {
	var rej *policy.RejectError
	if !errors.As(err, &rej) {
		return false
	}
	d := max(rej.RetryAfter, 0)
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10))
	h.Set(callpath.HeaderRefused, rej.Reason)
	h.Set(callpath.HeaderRetryAfterMillis, strconv.FormatInt(d.Milliseconds(), 10))
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(rejectionBody))
	return true
}
