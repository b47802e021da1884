package policyenvoy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// DefaultRateLimitedMaxInterval is Envoy's default max_interval of
// rate_limited_retry_back_off: the longest reset interval it accepts.
const DefaultRateLimitedMaxInterval = 300 * time.Second

// resetBackOff is a route's rate_limited_retry_back_off, as Envoy documents it
// (RetryPolicy.RateLimitedRetryBackOff):
//
//   - the reset headers are tried in order; the first whose value parses and whose
//     interval is at most max gives the interval: SECONDS as an unsigned integer
//     number of seconds, UNIX_TIMESTAMP as an unsigned integer Unix time in seconds,
//     less the current time in whole seconds (a time in the past does not parse);
//   - a value that does not parse, or whose interval exceeds max, is passed over for
//     the next header; with none left, the route's retry_back_off applies;
//   - an interval of 0 (Envoy uses one only above 1 ms) also leaves the route's
//     retry_back_off;
//   - the retry waits random(interval, 1.5 × interval).
//
// The zero value has no headers: it never gives an interval. A nil *resetBackOff is
// the same.
type resetBackOff struct {
	headers []*routev3.RetryPolicy_ResetHeader
	max     time.Duration
}

// interval returns the reset interval h asks for at now, if a reset header gives one.
func (b *resetBackOff) interval(h http.Header, now time.Time) (time.Duration, bool) {
	if b == nil {
		return 0, false
	}
	maxSec := uint64(b.max / time.Second)
	for _, rh := range b.headers {
		v := h.Get(rh.GetName()) // the first value only, as Envoy
		n, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(v), "+"), 10, 64)
		if err != nil {
			continue
		}
		if rh.GetFormat() == routev3.RetryPolicy_UNIX_TIMESTAMP {
			t := now.Unix()
			if t < 0 || n < uint64(t) {
				continue // a reset time in the past
			}
			n -= uint64(t)
		}
		if n > maxSec {
			continue
		}
		if n == 0 {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

// maxDelay is the longest wait an interval can give: 1.5 × max.
func (b *resetBackOff) maxDelay() time.Duration { return b.max + b.max/2 }

// names lists the reset headers as "name (format)".
func (b *resetBackOff) names() []string {
	var out []string
	for _, rh := range b.headers {
		f := "seconds"
		if rh.GetFormat() == routev3.RetryPolicy_UNIX_TIMESTAMP {
			f = "a Unix timestamp"
		}
		out = append(out, rh.GetName()+" ("+f+")")
	}
	return out
}

// routeRetry is a route's retry: a retry.Retry that explains itself in Envoy's terms.
type routeRetry struct {
	*retry.Retry
	route *Route
	reset *resetBackOff // nil: no rate_limited_retry_back_off
}

// ExplainStage implements policy.StageExplainer.
func (r *routeRetry) ExplainStage() policy.Stage {
	st := r.Retry.ExplainStage()
	var conds []string
	for _, c := range r.route.RetryOn {
		if honoured[c] {
			conds = append(conds, c)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "up to %d attempts (num_retries %d); retries what retry_on allows (%s); "+
		"Envoy's back-off, fully jittered from %v to at most %v",
		r.MaxAttempts(), r.route.NumRetries, strings.Join(conds, ", "), r.route.BaseInterval, r.route.MaxInterval)
	st.MaxHint = 0 // only rate_limited_retry_back_off gives hints
	if r.reset != nil && len(r.reset.headers) > 0 {
		fmt.Fprintf(&b, "; rate_limited_retry_back_off: on a retried response, the first of %s whose interval is 1s to %v "+
			"sets the wait to random(interval, 1.5 × interval), at most %v; a header missing, unreadable, in the past or "+
			"above %v is passed over for the next, and with none left the back-off above applies",
			strings.Join(r.reset.names(), ", "), r.reset.max, r.reset.maxDelay(), r.reset.max)
		st.MaxHint = r.reset.maxDelay()
	}
	b.WriteString("; a wait that would end past the route's timeout ends the call at once with the last response")
	b.WriteString("; starts no attempt with less than its per-attempt timeout, if any, left before the deadline")
	st.Summary = b.String()
	return st
}
