package shed

import (
	"fmt"
	"net/http"
)

// Reason says why work was refused. The zero value, ReasonNone, means admitted.
type Reason uint8

// The reasons for a refusal. Their String values label events and metrics.
const (
	ReasonNone      Reason = iota
	ReasonLimit            // at the limit, and no queue
	ReasonPriority         // sheddable work over its share of the limit
	ReasonQueueFull        // at the limit and the queue full
	ReasonQueue            // waited in the queue past its timeout
	ReasonDeadline         // the caller's deadline would pass before a slot frees
	ReasonCanceled         // the caller gave up while queued
	ReasonQuota            // the client's quota is spent
	ReasonBreaker          // the breaker guarding the handler's dependency is open
	ReasonCPU              // the process's CPUs are saturated (LimitOptions.SchedLatency)
	numReasons
)

var reasonNames = [numReasons]string{"none", "limit", "priority", "queue_full", "queue", "deadline", "canceled", "quota", "breaker", "cpu"}

// String returns the reason's name in snake_case, e.g. "queue_full".
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason_%d", uint8(r))
}

// statusFor returns the status of a rejection for r: 503 for an open breaker, 429
// for a quota, the configured status otherwise.
func (s *Shedder) statusFor(r Reason) int {
	switch r {
	case ReasonBreaker:
		return http.StatusServiceUnavailable
	case ReasonQuota:
		return http.StatusTooManyRequests
	}
	return s.status
}

// problem returns the application/problem+json body (RFC 9457) of a rejection.
func problem(r Reason, status int) []byte {
	detail := map[Reason]string{
		ReasonQuota:   "this client's request quota is spent",
		ReasonBreaker: "a dependency of this service is unavailable",
	}[r]
	if detail == "" {
		detail = "the server is shedding load (" + r.String() + ")"
	}
	return fmt.Appendf(nil, `{"type":"about:blank","title":%q,"status":%d,"detail":%q}`+"\n",
		http.StatusText(status), status, detail+"; retry after the time in Retry-After")
}
