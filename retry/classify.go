package retry

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/backstop-go/backstop/policy"
)

// marked is the error Retryable, After and Pushback wrap around an error.
type marked struct {
	err   error
	hint  time.Duration // 0: no hint
	exact bool          // Pushback: wait exactly hint, no backoff, no jitter
	stop  bool          // Pushback with a negative delay: the server said do not retry
	// Refused: the server's own protection refused the attempt, which cost its
	// dependency nothing; a budget outside the retry is not told of the failure.
	refused bool
}

func (m *marked) Error() string { return m.err.Error() }
func (m *marked) Unwrap() error { return m.err }

// Retryable marks err as safe and worth retrying. It returns nil for nil. The mark is
// found with errors.As through any wrapping the caller adds.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err}
}

// After marks err as retryable after at least d: a server's hint (Retry-After, gRPC
// pushback). The retry waits max(backoff, d) plus up to 50 % of d, so that clients told
// the same hint do not return together. It returns nil for nil; d ≤ 0 is the same as
// [Retryable].
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, hint: max(d, 0)}
}

// Pushback marks err with a server's pushback in the manner of gRPC (gRFC A6,
// grpc-retry-pushback-ms): for d ≥ 0 the next attempt comes after exactly d — no
// backoff, no jitter, still refused if it would pass the deadline or MaxHintDelay; for
// d < 0 the server asked not to retry, and the call ends with this error. Either way
// the failure counts against a budget outside the retry, as A6's throttling says. The
// backoff of a retry after the one a pushback timed starts again from Base (A6: the
// retry attempt after a pushback resets the backoff). It returns nil for nil.
func Pushback(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		return &marked{err: err, stop: true}
	}
	return &marked{err: err, hint: d, exact: true}
}

// Refused marks err as a refusal by a server's own protection — a shedder or an open
// breaker in front of its dependency, which says so (Backstop servers send
// callpath.HeaderRefused) — retryable after at least d, as [After]. The retry waits as
// for After, but does not report the failure to a budget outside it: the refused
// attempt did no work at the dependency the budget guards, and the server's own breaker
// counts that dependency's failures. A retry budget is then spent by failures that
// reached the dependency, not by the refusals that keep it from being reached. It
// returns nil for nil.
func Refused(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, hint: max(d, 0), refused: true}
}

// isRefused reports whether err is marked with [Refused].
func isRefused(err error) bool {
	var m *marked
	return errors.As(err, &m) && m.refused
}

// pushback reports the pushback err carries: the delay, whether it said stop, and
// whether it carries one at all.
func pushback(err error) (d time.Duration, stop, ok bool) {
	var m *marked
	if errors.As(err, &m) && (m.exact || m.stop) {
		return m.hint, m.stop, true
	}
	return 0, false, false
}

// permanent is the error Permanent wraps around an error.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent marks err as never to be retried, whatever else it carries and whatever
// Options.ShouldRetry says: a request that is not safe to repeat, say. It returns nil
// for nil. errors.Is and errors.As still see through it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err: err}
}

// IsPermanent reports whether err is marked with [Permanent], through any wrapping.
func IsPermanent(err error) bool {
	var p *permanent
	return errors.As(err, &p)
}

// Hint returns the delay a server asked for through [After] or [Pushback], if err
// carries one.
func Hint(err error) (time.Duration, bool) {
	var m *marked
	if errors.As(err, &m) && (m.hint > 0 || m.exact) {
		return m.hint, true
	}
	return 0, false
}

// The reasons a retry is scheduled for, reported in event.RetryScheduled.
const (
	ReasonMarked  = "retryable" // the error was marked with Retryable
	ReasonHint    = "hint"      // the error carried a server's hint (After)
	ReasonTimeout = "timeout"   // a timeout: a per-attempt timeout, a net.Error timeout
	ReasonNetwork = "network"   // a transient network error: connection refused or reset
	ReasonCustom  = "custom"    // Options.ShouldRetry said yes
)

// DefaultShouldRetry is the default classifier, an allow-list. It retries:
//   - errors marked with [Retryable] or [After];
//   - timeouts: errors with a Timeout() bool method that returns true (net.Error, a
//     per-attempt timeout from package deadline);
//   - connection refused, reset or aborted, and broken pipes;
//   - DNS errors that say they are temporary.
//
// It never retries errors matching policy.ErrRejected (a breaker open, a budget
// exhausted, a request shed), context.Canceled or marked [Permanent], whatever other
// marks they carry; anything
// else is not retried. The retry loop adds one rule no classifier can lift: nothing is
// retried once the call's context is done, so an overall deadline is never retried.
func DefaultShouldRetry(err error) bool {
	return classify(err) != ""
}

// classify returns why err may be retried, or "" if it may not.
func classify(err error) string {
	if err == nil || neverRetried(err) {
		return ""
	}
	var m *marked
	if errors.As(err, &m) {
		switch {
		case m.stop:
			return ""
		case m.hint > 0 || m.exact:
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

// neverRetried reports whether err is one no classifier may retry: a policy's refusal,
// the caller's cancellation, or an error marked Permanent.
func neverRetried(err error) bool {
	var p *permanent
	return errors.Is(err, policy.ErrRejected) || errors.Is(err, context.Canceled) || errors.As(err, &p)
}
