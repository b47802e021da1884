package awsretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The values of [NewStandard]'s pipeline: the AWS SDKs' standard retry mode as the
// AWS SDKs and Tools reference guide describes it ("Retry behavior", the SDKs' default
// since November 2026) and aws-sdk-go-v2 sets it (aws/retry: DefaultMaxAttempts, the
// 50 ms base delay, 1 s for a throttling error, DefaultMaxBackoff), with the retry
// quota of budget.RetryQuota at the SDKs' values. Retry i (from 1) waits
// b × min(base × 2^(i−1), DefaultCap), b uniform in [0, 1): the cap is applied before
// the jitter.
const (
	DefaultMaxAttempts = 3
	DefaultBase        = 50 * time.Millisecond
	ThrottleBase       = time.Second // the base after a throttling error
	DefaultCap         = 20 * time.Second
	// AmzRetryAfterSpan is how far above the computed wait a service's
	// X-Amz-Retry-After may take it: the wait is that hint, at least the computed one
	// and at most this much more.
	AmzRetryAfterSpan = 5 * time.Second
)

// Middleware IDs in the SDK's finalize step.
const (
	// LoopID runs the Backstop pipeline; it stands just before the SDK's "Retry".
	LoopID = "BackstopRetry"
	// AttemptID marks each attempt's request; it stands just after the SDK's "Retry",
	// before signing.
	AttemptID = "BackstopAttempt"
)

// HeaderSDKRequest is the AWS SDKs' attempt header ("attempt=2; max=3"), which the SDK's
// retry middleware sets and the Retryer rewrites with Backstop's attempt and limit.
const HeaderSDKRequest = "Amz-Sdk-Request"

// ErrNotInstalled is what a call returns when a client has the Retryer as its
// aws.Retryer but not its middleware (Configure, or APIOptions with AddToStack): the
// Retryer makes the SDK's own loop make one attempt, so without the middleware no one
// would retry.
var ErrNotInstalled = errors.New("awsretry: the Retryer is the client's aws.Retryer but its middleware is not on the stack; " +
	"use Retryer.Configure(&cfg), or add Retryer.AddToStack to the client's APIOptions")

// ErrHedged is the error of an attempt made by a hedge: an SDK request cannot be sent
// twice at once (its body is one stream). Use a pipeline whose retry is retry.New.
var ErrHedged = errors.New("awsretry: an AWS SDK call cannot be hedged; use retry.New, not retry.NewHedge")

// Options configure a [Retryer]. The zero value is valid.
type Options struct {
	// RetryableCodes are API error codes retried besides the SDK's own
	// (aws/retry.DefaultRetryableErrorCodes and DefaultThrottleErrorCodes); nil adds none.
	RetryableCodes []string
	// Clock reads the time a Retry-After HTTP date is measured from; nil means
	// policy.SystemClock().
	Clock policy.Clock
}

// Retryer is an aws.RetryerV2 through which a Backstop pipeline owns an AWS SDK
// client's retries. The SDK's retry loop is told to make one attempt (MaxAttempts 1,
// no error retryable); the Retryer's middleware ([Retryer.AddToStack]) stands around
// that loop and runs each call through the pipeline, so every attempt the SDK sends is
// one the pipeline allowed — its breaker, budget, deadline and owner rule included —
// and is still signed, timed and clock-skew corrected by the SDK.
//
// A Retryer is safe for concurrent use and may serve many clients; its pipeline's
// state (a breaker, a budget) is then shared by them. Build it with [New] or
// [NewStandard]; the zero value is not usable.
type Retryer struct {
	p          *policy.Pipeline
	max        string // the pipeline's MaxAttempts, for the SDK's attempt header
	codes      map[string]struct{}
	clock      policy.Clock
	classifier func(error) error
	// standard: the waits are the SDKs' standard mode's, drawn with rand (NewStandard).
	standard bool
	rand     policy.Rand
}

// New returns a Retryer that runs every call of the clients it is installed in
// through p. p should hold a retry (retry.New) and a budget outside it
// (budget.NewRetryQuota is the AWS SDKs' retry quota); a pipeline without a retry makes
// one attempt per call. p's retry judges each attempt's error as [Classify] marks it,
// so its default classifier retries what the SDK retries.
func New(p *policy.Pipeline, o Options) (*Retryer, error) {
	if p == nil {
		return nil, fmt.Errorf("awsretry: New: the pipeline is nil")
	}
	r := &Retryer{p: p, max: strconv.Itoa(p.Explain().MaxAttempts), clock: policy.ClockOr(o.Clock)}
	for i, c := range o.RetryableCodes {
		if c == "" {
			return nil, fmt.Errorf("awsretry: Options.RetryableCodes[%d] is empty; want an API error code such as %q", i, "ThrottlingException")
		}
		if r.codes == nil {
			r.codes = make(map[string]struct{}, len(o.RetryableCodes))
		}
		r.codes[c] = struct{}{}
	}
	r.classifier = func(err error) error { return classify(err, r.codes, r.clock.Now()) }
	return r, nil
}

// MustNew is like [New] but panics on a nil pipeline.
func MustNew(p *policy.Pipeline, o Options) *Retryer {
	r, err := New(p, o)
	if err != nil {
		panic(err)
	}
	return r
}

// NewStandard returns a Retryer over the AWS SDKs' standard retry mode built from
// Backstop's stages: a budget.RetryQuota at the SDKs' values (500 tokens, 14 a retry,
// 5 after a throttling error, 1 back per call that succeeds at its first attempt)
// outside a retry of [DefaultMaxAttempts] (3) attempts, each waiting as the SDKs do:
// full jitter under
// min([DefaultBase] (50 ms) × 2^(i−1), [DefaultCap] (20 s)), from [ThrottleBase] (1 s)
// after a throttling error, and a service's X-Amz-Retry-After within
// [AmzRetryAfterSpan] (5 s) above that. Share one among the clients of one service, as
// the SDK shares its quota among a client's operations. name names the pipeline in
// events and metrics. (The SDKs' DynamoDB defaults — 4 attempts, 25 ms — are not
// applied: build that pipeline with New.)
func NewStandard(name string) *Retryer {
	r, _ := newStandard(name, nil, nil)
	return r
}

// newStandard is NewStandard with a clock and a random source (nil: the system's); it
// returns the quota too.
func newStandard(name string, clock policy.Clock, r policy.Rand) (*Retryer, *budget.RetryQuota) {
	q := budget.MustNewRetryQuota(budget.RetryQuotaOptions{})
	p := policy.MustWrap(
		q,
		retry.MustNew(retry.Options{MaxAttempts: DefaultMaxAttempts, Base: DefaultBase, Cap: DefaultCap, Clock: clock}),
		policy.Name(name))
	s := MustNew(p, Options{Clock: clock})
	s.standard, s.rand = true, policy.RandOr(r)
	return s, q
}

// classify marks the error of attempt n as the pipeline's retry is to judge it: as
// Classify does, and under NewStandard with the wait the SDKs' standard mode gives it
// (a pushback, waited exactly): b × min(base × 2^(n−1), DefaultCap), base DefaultBase
// or ThrottleBase after a throttling error, and a service's X-Amz-Retry-After within
// [that, that + AmzRetryAfterSpan]; the SDKs read no Retry-After.
func (r *Retryer) classify(err error, n int) error {
	marked := r.classifier(err)
	if !r.standard || !retry.DefaultShouldRetry(marked) {
		return marked
	}
	base := DefaultBase
	if fault.Of(marked).Throttled {
		base = ThrottleBase
	}
	window := DefaultCap
	if n-1 < 32 && base<<(n-1) < DefaultCap {
		window = base << (n - 1)
	}
	d := time.Duration(r.rand.Float64() * float64(window))
	if hint, ok := amzRetryAfter(err); ok {
		d = min(max(hint, d), d+AmzRetryAfterSpan)
	}
	return fault.Pushback(marked, d)
}

// Pipeline returns the pipeline the Retryer runs calls through.
func (r *Retryer) Pipeline() *policy.Pipeline { return r.p }

// Configure installs the Retryer in cfg: as its Retryer, and its middleware in its
// APIOptions. Every service client built from cfg (s3.NewFromConfig(cfg)) then has
// Backstop as its one retry owner.
func (r *Retryer) Configure(cfg *aws.Config) {
	cfg.Retryer = func() aws.Retryer { return r }
	cfg.APIOptions = append(cfg.APIOptions, r.AddToStack)
}

// AddToStack adds the Retryer's middleware to an operation's stack: an APIOptions
// entry, for clients configured one by one:
//
//	s3.New(s3.Options{Retryer: r, APIOptions: []func(*middleware.Stack) error{r.AddToStack}, …})
func (r *Retryer) AddToStack(s *middleware.Stack) error {
	if err := s.Finalize.Insert(&loop{r: r}, "Retry", middleware.Before); err != nil {
		return fmt.Errorf("awsretry: %w", err)
	}
	if err := s.Finalize.Insert(&attemptMark{r: r}, "Retry", middleware.After); err != nil {
		return fmt.Errorf("awsretry: %w", err)
	}
	return nil
}

// The aws.RetryerV2 face: the SDK's loop makes one attempt and waits for nothing.

// IsErrorRetryable returns false: the SDK's loop retries nothing; the pipeline does.
func (r *Retryer) IsErrorRetryable(error) bool { return false }

// MaxAttempts returns 1, the attempts the SDK's loop makes each time the pipeline
// calls it.
func (r *Retryer) MaxAttempts() int { return 1 }

// RetryDelay returns 0: the pipeline's retry sleeps between attempts.
func (r *Retryer) RetryDelay(int, error) (time.Duration, error) { return 0, nil }

// GetRetryToken refuses: the SDK's loop never retries (IsErrorRetryable is false, so
// it is not asked).
func (r *Retryer) GetRetryToken(context.Context, error) (func(error) error, error) {
	return nil, errors.New("awsretry: the SDK's own loop does not retry; the Backstop pipeline does")
}

// GetInitialToken returns a release that does nothing: the pipeline's budget counts.
func (r *Retryer) GetInitialToken() func(error) error { return release }

// GetAttemptToken returns a release that does nothing, or [ErrNotInstalled] if the
// call does not run under the Retryer's middleware.
func (r *Retryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if c, _ := ctx.Value(loopKey{}).(*call); c == nil || c.r != r {
		return nil, ErrNotInstalled
	}
	return release, nil
}

func release(error) error { return nil }

var _ aws.RetryerV2 = (*Retryer)(nil)

// loopKey marks the context of a call that runs under a Retryer's loop; its value is
// a *call.
type loopKey struct{}

// call is what the loop tells the attempt middleware of a call.
type call struct {
	r     *Retryer
	owner bool // the pipeline owns the call path: Owned was false when the call began
}

// loop is the finalize middleware that runs a call's attempts through the pipeline,
// each one a pass through the SDK's retry middleware, which makes one attempt.
type loop struct{ r *Retryer }

func (*loop) ID() string { return LoopID }

func (m *loop) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	out middleware.FinalizeOutput, md middleware.Metadata, err error) {
	// The SDK's attempt header is rewritten only when this pipeline owns the call
	// path: under another owner the SDK's own "attempt=1; max=1" is the truth.
	ctx = context.WithValue(ctx, loopKey{}, &call{r: m.r, owner: !callpath.Owned(ctx)})
	// A server's shedder does not count a request while it waits on AWS, as with
	// policyhttp's transport: the service throttles for itself, and the pipeline's
	// deadline and breaker bound the wait.
	ctx, paused := callpath.PauseFor(ctx)
	defer paused.Resume()
	n := 0
	err = m.r.p.Do(ctx, func(actx context.Context) error {
		if callpath.InRace(actx) {
			return fault.Permanent(ErrHedged)
		}
		if n++; n > 1 {
			// The SDK rewinds a request's body only for its own retries.
			if rw, ok := in.Request.(interface{ RewindStream() error }); ok {
				if rerr := rw.RewindStream(); rerr != nil {
					return fault.Permanent(fmt.Errorf("awsretry: rewinding the request body for attempt %d: %w", n, rerr))
				}
			}
		}
		var aerr error
		out, md, aerr = next.HandleFinalize(actx, in)
		return m.r.classify(aerr, n)
	})
	return out, md, err
}

// attemptMark is the finalize middleware after the SDK's retry middleware: it tells the
// next process which attempt of which owner the request is (callpath.HeaderAttempt,
// as policyhttp's transport does) and rewrites the SDK's attempt header with the
// pipeline's numbers. It stands before signing, so the headers are signed.
type attemptMark struct{ r *Retryer }

func (*attemptMark) ID() string { return AttemptID }

func (m *attemptMark) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		n, owned := callpath.Outgoing(ctx)
		if owned {
			req.Header.Set(callpath.HeaderAttempt, strconv.Itoa(n))
		} else {
			req.Header.Del(callpath.HeaderAttempt)
		}
		if c, _ := ctx.Value(loopKey{}).(*call); owned && c != nil && c.owner {
			req.Header.Set(HeaderSDKRequest, "attempt="+strconv.Itoa(n)+"; max="+m.r.max)
		}
	}
	return next.HandleFinalize(ctx, in)
}

// Explain says in one line who makes which attempts of a call through the Retryer:
//
//	aws sdk: the SDK's retry loop makes 1 attempt each time pipeline "s3" calls it; the pipeline makes at most 3 per call, 1 under a retry owner further up
func (r *Retryer) Explain() string {
	e := r.p.Explain()
	return fmt.Sprintf("aws sdk: the SDK's retry loop makes 1 attempt each time pipeline %q calls it; the pipeline makes at most %d per call, %d under a retry owner further up",
		e.Pipeline, e.MaxAttempts, e.MaxAttemptsPerCallPath)
}
