package retry

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// The reasons a retry is scheduled for, reported in event.RetryScheduled.
const (
	ReasonMarked   = "retryable" // the error was marked with fault.Retryable
	ReasonHint     = "hint"      // the error carried a server's hint (fault.After, Refused, Pushback)
	ReasonThrottle = "throttle"  // the service asked its callers to slow down (fault.Throttled), hint or not
	ReasonTimeout  = "timeout"   // a timeout: a per-attempt timeout, a net.Error timeout
	ReasonNetwork  = "network"   // a transient network error: connection refused or reset
	ReasonCustom   = "custom"    // Options.ShouldRetry said yes
)

// DefaultShouldRetry is the default classifier, an allow-list. It retries:
//   - errors marked with fault.Retryable, fault.After, fault.Refused or a
//     fault.Pushback of d ≥ 0;
//   - timeouts: errors with a Timeout() bool method that returns true (net.Error, a
//     per-attempt timeout from package deadline);
//   - connection refused, reset or aborted, and broken pipes;
//   - DNS errors that say they are temporary.
//
// It never retries these, whatever other marks they carry:
//   - errors matching policy.ErrRejected: a refusal by a policy on the call path,
//     such as a breaker open, a request shed, a throttle;
//   - context.Canceled;
//   - a fault.Pushback that said stop;
//   - errors marked fault.Permanent.
//
// Anything else is not retried. A retry that gave up for its budget is not a
// refusal. Its *Error unwraps to the last failure, which an owner above may retry.
// The retry loop adds one rule no classifier can lift. Nothing is retried once the
// call's context is done, so an overall deadline is never retried.
func DefaultShouldRetry(err error) bool {
	return classify(err) != ""
}

// classify returns why err may be retried, or "" if it may not.
func classify(err error) string {
	if err == nil || neverRetried(err) {
		return ""
	}
	if m := fault.Of(err); m.Retryable || m.Stop {
		switch {
		case m.Stop:
			return ""
		case m.Throttled:
			return ReasonThrottle
		case m.HasHint:
			return ReasonHint
		}
		return ReasonMarked
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsTimeout {
			return ReasonTimeout
		}
		if dns.IsTemporary {
			return ReasonNetwork
		}
		return ""
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() {
		return ReasonTimeout
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) {
		return ReasonNetwork
	}
	return ""
}

// neverRetried reports whether err is one no classifier may retry. That is a
// policy's refusal, the caller's cancellation, or an error marked Permanent.
func neverRetried(err error) bool {
	return errors.Is(err, policy.ErrRejected) || errors.Is(err, context.Canceled) || fault.Of(err).Permanent
}
