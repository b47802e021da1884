package callpath

import "context"

// Headers that say a request is an attempt made by a retry owner in another
// process. Server middleware reads them with [ParseAttempt]. Backstop's HTTP
// transport sends [HeaderAttempt] on every attempt made under a retry owner.
const (
	// HeaderAttempt carries Backstop's 1-based attempt number.
	HeaderAttempt = "Backstop-Attempt"
	// HeaderEnvoyAttempt is Envoy's 1-based attempt count
	// (route.RetryPolicy include_attempt_count_in_request).
	HeaderEnvoyAttempt = "X-Envoy-Attempt-Count"
	// HeaderGRPCPreviousAttempts is gRPC's count of attempts made before this one
	// (gRFC A6). So attempt = value + 1.
	HeaderGRPCPreviousAttempts = "Grpc-Previous-Rpc-Attempts"
)

// HeaderRefused is on every refusal of a Backstop server's shedder
// (shed.Middleware). Its value is the reason: "limit", "breaker", …. A server may
// also send it on a failure it answers for a dependency ("dependency"). Its own
// breaker then counts that dependency's failures.
//
// The header tells the caller's transport that the server protects itself or its
// dependency, and counts for itself. The caller's breaker and budget do not count
// the answer as a failure: policyhttp's classifier marks it fault.Refused. The
// caller's retry still waits the Retry-After. The package documentation says why.
const HeaderRefused = "Backstop-Refused"

// HeaderRetryAfterMillis goes with [HeaderRefused] when the server knows when it
// will admit again. It says so more finely than Retry-After's whole seconds: an
// open breaker may probe in 100 ms. Its value is the wait in milliseconds, a
// non-negative integer, as in gRPC's grpc-retry-pushback-ms. Retry-After is still
// sent for every other client. A caller reads this header only beside
// HeaderRefused, and Retry-After otherwise.
const HeaderRetryAfterMillis = "Backstop-Retry-After-Ms"

// MaxAttempt is the largest attempt number [ParseAttempt] returns. Larger values
// are clamped to it. No real retry policy comes near it. The bound keeps hostile
// values harmless.
const MaxAttempt = 100

// ownership is the value stored under ownerKey. Values for small attempt numbers
// are preallocated. Marking a context then allocates only the context itself.
type ownership struct {
	attempt  int
	upstream bool
}

type ownerKey struct{}

const preallocated = 16

var localMarks, upstreamMarks = func() (l, u [preallocated + 1]ownership) {
	for i := range l {
		l[i] = ownership{attempt: i}
		u[i] = ownership{attempt: i, upstream: true}
	}
	return l, u
}()

func mark(n int, upstream bool) *ownership {
	if n < 1 {
		n = 1
	}
	if n <= preallocated {
		if upstream {
			return &upstreamMarks[n]
		}
		return &localMarks[n]
	}
	return &ownership{attempt: n, upstream: upstream}
}

// Owned reports whether ctx runs under a retry owner. The owner is a pipeline with
// a retry further up this call path. Or it is a caller in another process whose
// request carried an attempt header (see [WithUpstreamAttempt]). A retry that runs
// under an owned context makes exactly one attempt. Code that builds its own retry
// loop should ask the same.
func Owned(ctx context.Context) bool {
	_, ok := ctx.Value(ownerKey{}).(*ownership)
	return ok
}

// WithAttempt returns a copy of ctx marked as attempt n (1-based) of the retry that
// owns this call path. A retry implementation calls it for every attempt it makes
// as the owner. It is the owner when [Owned] was false for the context it was
// given. It costs one context value. For n ≤ 16, nothing else is allocated. A bare
// context.Background() or context.TODO() costs not even that: a job, a command, a
// test. Its marked context is the same for every call, made once.
func WithAttempt(ctx context.Context, n int) context.Context {
	if n >= 1 && n <= preallocated {
		switch ctx {
		case background:
			return backgroundAttempts[n]
		case todo:
			return todoAttempts[n]
		}
	}
	return withValue(ctx, ownerKey{}, mark(n, false))
}

var (
	background, todo                 = context.Background(), context.TODO()
	backgroundAttempts, todoAttempts = func() (b, t [preallocated + 1]context.Context) {
		for n := 1; n <= preallocated; n++ {
			b[n] = withValue(background, ownerKey{}, mark(n, false))
			t[n] = withValue(todo, ownerKey{}, mark(n, false))
		}
		return b, t
	}()
)

// WithUpstreamAttempt returns a copy of ctx marked as owned by a retry in another
// process, on attempt n (1-based). Server middleware calls it for a request whose
// headers [ParseAttempt] accepted. The handler's own retrying pipelines then fail
// fast instead of multiplying the caller's retries.
func WithUpstreamAttempt(ctx context.Context, n int) context.Context {
	return withValue(ctx, ownerKey{}, mark(n, true))
}

// Attempt returns the attempt number ctx carries. It is the current attempt of the
// retry that owns the call path, or the upstream caller's attempt. The result
// upstream reports which. The result ok is false if ctx is not owned.
func Attempt(ctx context.Context) (n int, upstream, ok bool) {
	o, ok := ctx.Value(ownerKey{}).(*ownership)
	if !ok {
		return 0, false, false
	}
	return o.attempt, o.upstream, true
}

// ParseAttempt reads the attempt headers of an incoming request, given as their
// raw values ("" for absent). They are [HeaderAttempt], [HeaderEnvoyAttempt] and
// [HeaderGRPCPreviousAttempts]. It returns the 1-based attempt number, and whether
// any header was valid. When several are, the largest attempt wins.
//
// A value is valid if it is ASCII digits, with optional surrounding spaces or
// tabs. For the two 1-based headers, it must also be at least 1. Anything else is
// ignored. Values above [MaxAttempt] are clamped to it. The headers come from an
// untrusted client. They can mark a request as a retry, lowering its priority.
// They can never raise it.
func ParseAttempt(backstop, envoy, grpcPrevious string) (n int, ok bool) {
	if v, good := parseCount(backstop); good && v >= 1 {
		n, ok = v, true
	}
	if v, good := parseCount(envoy); good && v >= 1 && v > n {
		n, ok = v, true
	}
	if v, good := parseCount(grpcPrevious); good {
		if v < MaxAttempt {
			v++
		}
		if v > n {
			n, ok = v, true
		}
	}
	return n, ok
}

// parseCount parses optional whitespace, decimal digits, optional whitespace. It
// clamps at MaxAttempt without ever overflowing.
func parseCount(s string) (int, bool) {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if i == j {
		return 0, false
	}
	n := 0
	for ; i < j; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < MaxAttempt {
			n = n*10 + int(c-'0')
		}
	}
	if n > MaxAttempt {
		n = MaxAttempt
	}
	return n, true
}

type onceKey struct{}

// WithoutRepeats returns a copy of ctx that says the work may be done at most
// once. Such work is a request that is not idempotent. A hedge makes no extra
// attempt for it. A retry is stopped by the work's own error as it fails:
// fault.Permanent. Package policyhttp marks every request it may not repeat.
func WithoutRepeats(ctx context.Context) context.Context {
	return withValue(ctx, onceKey{}, true)
}

// Repeatable reports whether the work of ctx may be done more than once. It is
// false under [WithoutRepeats].
func Repeatable(ctx context.Context) bool {
	once, _ := ctx.Value(onceKey{}).(bool)
	return !once
}

// Outgoing returns the attempt number a transport sends to the next process for a
// call made under ctx. It is the attempt of the retry in this process that owns the
// call path. Under an owner in another process, it is 1. This process makes the
// call once, so it carries the ownership on, not the number it received. The
// result ok is false when ctx is not owned. The transport then sends no attempt
// header. It removes one the caller copied from elsewhere.
func Outgoing(ctx context.Context) (n int, ok bool) {
	o, ok := ctx.Value(ownerKey{}).(*ownership)
	switch {
	case !ok:
		return 0, false
	case o.upstream:
		return 1, true
	}
	return o.attempt, true
}
