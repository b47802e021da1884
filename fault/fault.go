package fault

import (
	"errors"
	"time"
)

// marked is the error Retryable, After, Pushback and Refused wrap around an error.
type marked struct {
	err   error
	hint  time.Duration // 0: no hint
	exact bool          // Pushback: wait exactly hint, no backoff, no jitter
	stop  bool          // Pushback with a negative delay: the server said do not retry
	// Refused: the server's own protection refused the attempt. That cost its
	// dependency nothing. A budget outside the retry is not told of the failure.
	refused bool
}

func (m *marked) Error() string { return m.err.Error() }
func (m *marked) Unwrap() error { return m.err }

// Retryable marks err as safe and worth retrying. It returns nil for nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err}
}

// After marks err as retryable after at least d: a server's hint (Retry-After).
// The retry waits max(backoff, d) plus up to 50 % of d. So clients told the same
// hint do not return together. It returns nil for nil. A d ≤ 0 is the same as
// [Retryable].
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, hint: max(d, 0)}
}

// Pushback marks err with a server's pushback in the manner of gRPC (gRFC A6,
// grpc-retry-pushback-ms). For d ≥ 0, the next attempt comes after exactly d, with
// no backoff and no jitter. It is still refused if it would pass the deadline or
// the retry's MaxHintDelay. For d < 0, the server asked not to retry. The call then
// ends with this error. Either way, the failure counts against a budget outside the
// retry, as A6's throttling says. After a retry that a pushback timed, the next
// retry's backoff starts again from its base (A6). Pushback returns nil for nil.
func Pushback(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		return &marked{err: err, stop: true}
	}
	return &marked{err: err, hint: d, exact: true}
}

// Refused marks err as a refusal by a server's own protection. That is a shedder,
// or an open breaker in front of its dependency, which says so. Backstop servers
// send callpath.HeaderRefused. The error is retryable after at least d, as [After].
// It gets twice the spread: up to +100 % of d. The retry does not report the
// failure to a budget outside it. The package documentation says why. Refused
// returns nil for nil.
func Refused(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, hint: max(d, 0), refused: true}
}

// permanent is the error Permanent wraps around an error.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent marks err as never to be retried, whatever else it carries. A retry's
// classifier cannot override it. Use it for a request that is not safe to repeat,
// say. It returns nil for nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err: err}
}

// client is the error Client wraps around an error.
type client struct{ err error }

func (c *client) Error() string { return c.err.Error() }
func (c *client) Unwrap() error { return c.err }

// Client marks err as the caller's fault: a bad request, a 4xx, a refusal by a
// server protecting itself. It says nothing about the dependency's health. A
// breaker's default exclusion (breaker.DefaultIsExcluded) keeps it out of the
// breaker's counts. It returns nil for nil.
func Client(err error) error {
	if err == nil {
		return nil
	}
	return &client{err: err}
}

// throttled is the error Throttled wraps around an error.
type throttled struct{ err error }

func (t *throttled) Error() string { return t.err.Error() }
func (t *throttled) Unwrap() error { return t.err }

// Throttled marks err as retryable. It is the answer of a service that asked its
// callers to slow down: AWS's ThrottlingException, SlowDown and the like. A retry
// reports such a retry with the reason "throttle" (retry.ReasonThrottle). The AWS
// SDKs' retry quota (budget.RetryQuota) prices it lower than other retries. A hint
// marked outside it ([After], [Pushback]) still sets the wait. It returns nil for
// nil.
func Throttled(err error) error {
	if err == nil {
		return nil
	}
	return &throttled{err: Retryable(err)}
}

// Marks is what the marks on an error say, as [Of] reads them. The zero value: no mark.
type Marks struct {
	// Retryable: marked with Retryable, After, Refused or a Pushback of d ≥ 0.
	Retryable bool
	// Hint is the delay a server asked for (After, Refused, Pushback). HasHint says
	// whether there is one. A Pushback of 0 is a hint of 0.
	Hint    time.Duration
	HasHint bool
	// Exact: the hint is a gRPC pushback, waited exactly, without backoff or jitter.
	Exact bool
	// Stop: a Pushback of d < 0, the server asked not to retry.
	Stop bool
	// Refused: marked with Refused.
	Refused bool
	// Permanent: marked with Permanent, never retried whatever else it carries.
	Permanent bool
	// Client: marked with Client.
	Client bool
	// Throttled: marked with Throttled.
	Throttled bool
}

// Of reads the marks on err, through any wrapping. The outermost mark of each kind
// wins. Say a layer that learned a hint marks a Retryable error with After. The
// error then carries the hint.
func Of(err error) Marks {
	var ms Marks
	if err == nil {
		return ms
	}
	var m *marked
	if errors.As(err, &m) {
		ms.Retryable = !m.stop
		ms.Hint, ms.HasHint = m.hint, m.hint > 0 || m.exact
		ms.Exact, ms.Stop, ms.Refused = m.exact, m.stop, m.refused
	}
	var p *permanent
	ms.Permanent = errors.As(err, &p)
	var c *client
	ms.Client = errors.As(err, &c)
	var t *throttled
	ms.Throttled = errors.As(err, &t)
	return ms
}

// Hint returns the delay a server asked for through [After], [Refused] or [Pushback],
// if err carries one.
func Hint(err error) (time.Duration, bool) {
	var m *marked
	if errors.As(err, &m) && (m.hint > 0 || m.exact) {
		return m.hint, true
	}
	return 0, false
}
