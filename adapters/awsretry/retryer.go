package awsretry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

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
	// clock.System().
	Clock clock.Clock
}

// Retryer is an aws.RetryerV2 through which a Backstop pipeline owns an AWS SDK
// client's retries. The SDK's retry loop is told to make one attempt (no error is
// retryable); the Retryer's middleware ([Retryer.AddToStack]) stands around
// that loop and runs each call through the pipeline, so every attempt the SDK sends is
// one the pipeline allowed — its breaker, budget, deadline and owner rule included —
// and is still signed, timed and clock-skew corrected by the SDK.
//
// A Retryer is safe for concurrent use and may serve many clients; its pipeline's
// state (a breaker, a budget) is then shared by them. Build it with [New] or
// [NewStandard]; the zero value is not usable.
type Retryer struct {
	p          *policy.Pipeline
	max        int // p's MaxAttempts
	codes      map[string]struct{}
	clock      clock.Clock
	classifier func(error) error
	// rand draws the waits of the SDKs' standard mode: each retry's under NewStandard,
	// a refused long poll's under New.
	rand jitter.Rand
	// standard: the waits are the SDKs' standard mode's (NewStandard).
	standard bool
	// build returns the pipeline of a call of at most n attempts; nil under New,
	// whose pipeline's retry is the ceiling.
	build func(n int) *policy.Pipeline
	byMax sync.Map // n → *policy.Pipeline built by build
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
	r := &Retryer{p: p, max: p.Explain().MaxAttempts, clock: clock.Or(o.Clock), rand: jitter.System()}
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

// NewStandard returns a Retryer over the AWS SDKs' standard retry mode built from
// Backstop's stages: a budget.RetryQuota at the SDKs' values (500 tokens, 14 a retry,
// 5 after a throttling error, 1 back per call that succeeds at its first attempt)
// outside a retry of [DefaultMaxAttempts] (3) attempts, each waiting as the SDKs do:
// full jitter under
// min([DefaultBase] (50 ms) × 2^(i−1), [DefaultCap] (20 s)), from [ThrottleBase] (1 s)
// after a throttling error, and a service's X-Amz-Retry-After within
// [AmzRetryAfterSpan] (5 s) above that. Share one among the clients of one service, as
// the SDK shares its quota among a client's operations. name names the pipeline in
// events and metrics. A client's RetryMaxAttempts sets a call's attempts in place of
// DefaultMaxAttempts. (The SDKs' DynamoDB defaults — 4 attempts, 25 ms — apply only to
// a client without a Retryer of its own, in the SDK too.)
func NewStandard(name string) *Retryer {
	r, _ := newStandard(name, nil, nil)
	return r
}

// newStandard is NewStandard with a clock and a random source (nil: the system's); it
// returns the quota too.
func newStandard(name string, clock clock.Clock, r jitter.Rand) (*Retryer, *budget.RetryQuota) {
	return newStandardQuota(name, budget.RetryQuotaOptions{}, clock, r)
}

// newStandardQuota is newStandard with a quota of o.
func newStandardQuota(name string, o budget.RetryQuotaOptions, clock clock.Clock, r jitter.Rand) (*Retryer, *budget.RetryQuota) {
	q := policy.Must(budget.NewRetryQuota(o))
	build := func(n int) *policy.Pipeline {
		return policy.Must(policy.Wrap(q,
			policy.Must(retry.New(retry.Options{MaxAttempts: n, Base: DefaultBase, Cap: DefaultCap, Clock: clock})),
			policy.Name(name)))
	}
	s := policy.Must(New(build(DefaultMaxAttempts), Options{Clock: clock}))
	s.standard, s.rand, s.build = true, jitter.Or(r), build
	return s, q
}

// pipeline returns the pipeline of a call of at most n attempts (n ≥ 1), built once.
func (r *Retryer) pipeline(n int) *policy.Pipeline {
	if n == r.max || r.build == nil {
		return r.p
	}
	if p, ok := r.byMax.Load(n); ok {
		return p.(*policy.Pipeline)
	}
	p, _ := r.byMax.LoadOrStore(n, r.build(n))
	return p.(*policy.Pipeline)
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
	return fault.Pushback(marked, r.backoff(err, marked, n))
}

// backoff draws the wait the SDKs' standard mode gives attempt n's error err, marked
// by the classifier.
func (r *Retryer) backoff(err, marked error, n int) time.Duration {
	base := DefaultBase
	if fault.Of(marked).Throttled {
		base = ThrottleBase
	}
	// In seconds, as the SDKs compute it, so that one draw gives the same wait.
	window := min(base.Seconds()*math.Pow(2, float64(max(n-1, 0))), DefaultCap.Seconds())
	d := time.Duration(r.rand.Float64() * window * float64(time.Second))
	if hint, ok := amzRetryAfter(err); ok {
		d = min(max(hint, d), d+AmzRetryAfterSpan)
	}
	return d
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
	// The SDK marks a long-polling operation (SQS ReceiveMessage) with this middleware.
	_, longPoll := s.Initialize.Get(LongPollingID)
	if err := s.Finalize.Insert(&loop{r: r, longPoll: longPoll}, "Retry", middleware.Before); err != nil {
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

// MaxAttempts returns the pipeline's MaxAttempts. The SDK's loop still makes one
// attempt each time the pipeline calls it (IsErrorRetryable is false). A client's
// RetryMaxAttempts (or AWS_MAX_ATTEMPTS, or a profile's max_attempts) replaces this
// number with retry.AddWithMaxAttempts; the Retryer reads the replacement from the
// SDK's attempt header and makes that many attempts.
func (r *Retryer) MaxAttempts() int { return r.max }

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

// call is what the loop and the attempt middleware know of a call.
type call struct {
	r     *Retryer
	owner bool // the pipeline owns the call path: Owned was false when the call began
	// limit is the call's attempts as the SDK's loop counts them, read from its
	// attempt header on the first attempt; 0 until then.
	limit int
}

// max returns the most attempts the call makes: its limit, within the pipeline's
// MaxAttempts under New.
func (c *call) max() int {
	switch {
	case c.limit == 0:
		return c.r.max
	case c.r.build == nil:
		return min(c.limit, c.r.max)
	}
	return c.limit
}

// LongPollingID is the ID of the initialize middleware by which the SDK marks a
// long-polling operation, such as SQS ReceiveMessage.
const LongPollingID = "SetLongPollingContext"

// errOtherLimit ends a call's run through the default pipeline after its first
// attempt, when the call's limit is another: the pipeline of that limit goes on.
var errOtherLimit = errors.New("awsretry: the call's limit differs from the pipeline's")

// loop is the finalize middleware that runs a call's attempts through the pipeline,
// each one a pass through the SDK's retry middleware, which makes one attempt.
type loop struct {
	r        *Retryer
	longPoll bool // the operation long-polls: a refused retry still waits
}

func (*loop) ID() string { return LoopID }

func (m *loop) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	out middleware.FinalizeOutput, md middleware.Metadata, err error) {
	// The attempt middleware rewrites the SDK's attempt header with the pipeline's
	// numbers, or "attempt=1; max=1" under another owner.
	c := &call{r: m.r, owner: !callpath.Owned(ctx)}
	ctx = context.WithValue(ctx, loopKey{}, c)
	// A server's shedder does not count a request while it waits on AWS, as with
	// policyhttp's transport: the service throttles for itself, and the pipeline's
	// deadline and breaker bound the wait.
	ctx, paused := callpath.PauseFor(ctx)
	defer paused.Resume()
	var (
		sent     int   // requests sent
		first    error // attempt 1's judged error, replayed by the pipeline of the call's limit
		last     error // the last request's error, and its attempt number
		lastN    int
		judged   error // last, as the pipeline's retry judged it
		limited  bool  // the call's limit, under New's pipeline, ended it
		attempts int
	)
	run := func(p *policy.Pipeline, replay bool) error {
		n := 0
		return p.Do(ctx, func(actx context.Context) error {
			if callpath.InRace(actx) {
				return fault.Permanent(ErrHedged)
			}
			if n++; n == 1 && replay {
				return first
			}
			if sent++; sent > 1 {
				// The SDK rewinds a request's body only for its own retries.
				if rw, ok := in.Request.(interface{ RewindStream() error }); ok {
					if rerr := rw.RewindStream(); rerr != nil {
						return fault.Permanent(fmt.Errorf("awsretry: rewinding the request body for attempt %d: %w", n, rerr))
					}
				}
			}
			var aerr error
			out, md, aerr = next.HandleFinalize(actx, in)
			last, lastN, attempts = aerr, n, n
			judged = m.r.classify(aerr, n)
			switch {
			case aerr == nil || !c.owner || c.limit == 0 || c.limit == m.r.max:
			case m.r.build != nil:
				if n == 1 {
					// The limit was read during this attempt: the pipeline of that limit
					// goes on from it.
					first = judged
					return fault.Permanent(errOtherLimit)
				}
			case n >= c.max() && retry.DefaultShouldRetry(judged):
				limited = true
				return fault.Permanent(judged)
			}
			return judged
		})
	}
	err = run(m.r.p, false)
	if first != nil && errors.Is(err, errOtherLimit) {
		err = run(m.r.pipeline(c.limit), true)
	}
	switch {
	case limited:
		err = &retry.Error{Attempts: attempts, Cause: retry.ErrExhausted, Last: judged}
	case m.longPoll && errors.Is(err, retry.ErrBudget):
		// A long poll refused a retry still backs off before it returns, or a caller
		// polling in a loop would poll again at once (the SDKs' rule of 2026).
		d, ok := fault.Hint(judged)
		if !m.r.standard || !ok {
			d = m.r.backoff(last, judged, lastN)
		}
		m.r.sleep(ctx, d)
	}
	return out, md, err
}

// sleep waits d on the Retryer's clock, or until ctx is done.
func (r *Retryer) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
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
		if c, _ := ctx.Value(loopKey{}).(*call); c != nil {
			if c.limit == 0 {
				// The SDK's loop numbered the attempt from the retryer's MaxAttempts: ours,
				// or the client's RetryMaxAttempts that retry.AddWithMaxAttempts put over it.
				c.limit = sdkMax(req.Header.Get(HeaderSDKRequest))
			}
			switch {
			case owned && c.owner:
				req.Header.Set(HeaderSDKRequest, "attempt="+strconv.Itoa(n)+"; max="+strconv.Itoa(c.max()))
			case !c.owner:
				req.Header.Set(HeaderSDKRequest, "attempt=1; max=1") // one attempt here
			}
		}
	}
	return next.HandleFinalize(ctx, in)
}

// sdkMax reads max=N from the SDK's attempt header, or returns 0.
func sdkMax(h string) int {
	for part := range strings.SplitSeq(h, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "max="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// Explain says in one line who makes which attempts of a call through the Retryer:
//
//	aws sdk: the SDK's retry loop makes 1 attempt each time pipeline "s3" calls it; the pipeline makes at most 3 per call, 1 under a retry owner further up
func (r *Retryer) Explain() string {
	e := r.p.Explain()
	return fmt.Sprintf("aws sdk: the SDK's retry loop makes 1 attempt each time pipeline %q calls it; the pipeline makes at most %d per call, %d under a retry owner further up",
		e.Pipeline, e.MaxAttempts, e.MaxAttemptsPerCallPath)
}
