//go:build go1.26

package awsretry_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/retry"
)

// The conformance suite runs each scenario of the SDK's own retry tests (aws/retry's
// TestRetry2026StandardMode, its retryable-error cases, TestLongPollingContextBackoff,
// RetryMaxAttempts) twice: with the SDK's retry.NewStandard as the client's retryer,
// and with awsretry.NewStandard. Both run on the same real service client against the
// same scripted server on 127.0.0.1, in a synctest bubble so that each wait passes at
// once and is measured exactly. Before each call the process's crypto/rand is seeded
// alike, so both owners draw the same jitter. What each observes must match.

// reply is the server's answer to one attempt.
type reply struct {
	status int               // the HTTP status; 200 answers the call
	code   string            // the error's __type, "" for none
	header map[string]string // extra response headers
	reset  bool              // the server resets the connection instead of answering
	// explicit, when set, makes a client middleware wrap the attempt's error in one
	// that answers RetryableError() with *explicit, and Timeout() with timeout.
	explicit *bool
	timeout  bool
}

var (
	yes = func() *bool { v := true; return &v }()
	no  = func() *bool { v := false; return &v }()
)

func fails(status int, code string) reply { return reply{status: status, code: code} }

var ok200 = reply{status: 200}

func times(n int, r reply) []reply { return slices.Repeat([]reply{r}, n) }

func withRetryAfter(v string, r reply) reply {
	r.header = map[string]string{"X-Amz-Retry-After": v}
	return r
}

// result is what one call shows its caller and the server.
type result struct {
	Attempts int             // requests the server got
	Outcome  string          // outcomeOK, outcomeNotRetried, outcomeMaxAttempts or outcomeQuota
	Error    string          // the final error's API code and HTTP status
	Tokens   int             // in the retry quota after the call
	Waits    []time.Duration // between attempts, then from the last attempt to the call's return
}

const (
	outcomeOK          = "success"
	outcomeNotRetried  = "not retried"
	outcomeMaxAttempts = "max attempts"
	outcomeQuota       = "quota exceeded"
)

// want is what the SDK's table says of a call; the waits come from the SDK itself.
type want struct {
	attempts int
	outcome  string
	tokens   int
}

type scenario struct {
	name    string
	sqs     bool // SQS ReceiveMessage, a long-polling operation; else DynamoDB GetItem
	tokens  int  // the quota's capacity; 0 means 500
	max     int  // the client's RetryMaxAttempts; 0 leaves it unset
	perCall bool // max is set on the call's options, not the client's
	calls   [][]reply
	want    []want
}

var scenarios = []scenario{
	// aws/retry TestRetry2026StandardMode.
	{name: "retry eventually succeeds", calls: [][]reply{{fails(500, ""), fails(500, ""), ok200}},
		want: []want{{3, outcomeOK, 486}}}, // 500 − 14 − 14, the last retry's 14 refunded
	{name: "fail due to max attempts reached", calls: [][]reply{times(3, fails(502, ""))},
		want: []want{{3, outcomeMaxAttempts, 472}}},
	{name: "retry quota reached after a single retry", tokens: 14, calls: [][]reply{times(2, fails(500, ""))},
		want: []want{{2, outcomeQuota, 0}}},
	{name: "no retries at all if the retry quota is empty", tokens: 14, calls: [][]reply{times(2, fails(500, "")), {fails(500, "")}},
		want: []want{{2, outcomeQuota, 0}, {1, outcomeQuota, 0}}},
	{name: "exponential backoff over 5 attempts", max: 5, calls: [][]reply{times(5, fails(500, ""))},
		want: []want{{5, outcomeMaxAttempts, 444}}},
	{name: "the backoff stops growing at 20 s", max: 7, calls: [][]reply{times(7, fails(400, "Throttling"))},
		want: []want{{7, outcomeMaxAttempts, 470}}}, // 1, 2, 4, 8, 16, then 20 s windows; 6 × 5 tokens
	{name: "retry stops after retry quota exhaustion", tokens: 20, max: 5, calls: [][]reply{{fails(500, ""), fails(502, "")}},
		want: []want{{2, outcomeQuota, 6}}},
	{name: "retry quota recovery after successful responses", tokens: 30, max: 5,
		calls: [][]reply{{fails(500, ""), fails(502, ""), ok200}, {fails(500, ""), ok200}},
		want:  []want{{3, outcomeOK, 16}, {2, outcomeOK, 16}}},
	{name: "throttling error: 5 tokens and a 1 s base", calls: [][]reply{{fails(400, "Throttling"), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "429 without error code is a throttling error", calls: [][]reply{{fails(429, ""), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "429 with unknown error code is a throttling error", calls: [][]reply{{fails(429, "SomeUnmodeledError"), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "429 with modeled error that is not retryable is not retried", calls: [][]reply{{fails(429, "ResourceNotFoundException")}},
		want: []want{{1, outcomeNotRetried, 500}}},
	{name: "429 with modeled throttling error is a throttling error", calls: [][]reply{{fails(429, "ThrottlingException"), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "429 explicitly not retryable is not retried", calls: [][]reply{{{status: 429, explicit: no}}},
		want: []want{{1, outcomeNotRetried, 500}}},
	{name: "honor x-amz-retry-after", calls: [][]reply{{withRetryAfter("1500", fails(500, "")), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "x-amz-retry-after minimum is the backoff", calls: [][]reply{{withRetryAfter("0", fails(500, "")), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "x-amz-retry-after maximum is 5 s above the backoff", calls: [][]reply{{withRetryAfter("10000", fails(500, "")), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "invalid x-amz-retry-after falls back to the backoff", calls: [][]reply{{withRetryAfter("invalid", fails(500, "")), ok200}},
		want: []want{{2, outcomeOK, 500}}},

	// Long polling: the 2026 table's rows and TestLongPollingContextBackoff.
	{name: "long polling backs off when the quota is empty", sqs: true, tokens: 14,
		calls: [][]reply{times(2, fails(500, "")), {fails(500, "")}},
		want:  []want{{2, outcomeQuota, 0}, {1, outcomeQuota, 0}}},
	{name: "long polling backs off 1 s after a throttling error when the quota is empty", sqs: true, tokens: 14,
		calls: [][]reply{times(2, fails(500, "")), {fails(400, "Throttling")}},
		want:  []want{{2, outcomeQuota, 0}, {1, outcomeQuota, 0}}},
	{name: "long polling at max attempts does not wait", sqs: true, max: 2, calls: [][]reply{times(2, fails(500, ""))},
		want: []want{{2, outcomeMaxAttempts, 486}}},
	{name: "long polling success does not wait", sqs: true, max: 2, calls: [][]reply{{fails(500, ""), ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "long polling non-retryable error does not wait", sqs: true, max: 2, calls: [][]reply{{fails(404, "QueueDoesNotExist")}},
		want: []want{{1, outcomeNotRetried, 500}}},

	// RetryMaxAttempts, as the client's option and on one call.
	{name: "RetryMaxAttempts 1 turns retries off", max: 1, calls: [][]reply{{fails(500, "")}},
		want: []want{{1, outcomeMaxAttempts, 500}}},
	{name: "RetryMaxAttempts 5 makes five attempts", max: 5, calls: [][]reply{times(5, fails(503, ""))},
		want: []want{{5, outcomeMaxAttempts, 444}}},
	{name: "RetryMaxAttempts 5 on one call", max: 5, perCall: true, calls: [][]reply{times(5, fails(503, "")), times(3, fails(503, ""))},
		want: []want{{5, outcomeMaxAttempts, 444}, {3, outcomeMaxAttempts, 416}}},
	{name: "RetryMaxAttempts 1 on one call", max: 1, perCall: true, calls: [][]reply{{fails(503, "")}, {fails(503, ""), ok200}},
		want: []want{{1, outcomeMaxAttempts, 500}, {2, outcomeOK, 500}}},

	// aws/retry's retryable-error cases: the error's own answer first, then connections.
	{name: "a reset connection is retried", calls: [][]reply{{{reset: true}, ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "a reset connection explicitly not retryable is not retried", calls: [][]reply{{{reset: true, explicit: no}}},
		want: []want{{1, outcomeNotRetried, 500}}},
	{name: "a timeout explicitly not retryable is not retried", calls: [][]reply{{{reset: true, explicit: no, timeout: true}}},
		want: []want{{1, outcomeNotRetried, 500}}},
	{name: "a 400 explicitly retryable is retried", calls: [][]reply{{{status: 400, code: "ValidationException", explicit: yes}, ok200}},
		want: []want{{2, outcomeOK, 500}}},
	{name: "a 500 explicitly not retryable is not retried", calls: [][]reply{{{status: 500, explicit: no}}},
		want: []want{{1, outcomeNotRetried, 500}}},
	{name: "a 400 the SDK does not know is not retried", calls: [][]reply{{fails(400, "ValidationException")}},
		want: []want{{1, outcomeNotRetried, 500}}},
	{name: "a modeled ProvisionedThroughputExceededException is a throttling error",
		calls: [][]reply{{fails(400, "ProvisionedThroughputExceededException"), ok200}},
		want:  []want{{2, outcomeOK, 500}}},
}

// deliberate lists the scenarios in which Backstop departs from the SDK on purpose,
// with the reason; any other difference fails the suite.
var deliberate = map[string]string{}

// owner is one of the two retry owners under test.
type owner struct {
	name string
	// setup returns the client's retryer, API options and a reading of the quota.
	setup func(sc scenario) (aws.Retryer, []func(*middleware.Stack) error, func() int)
	// outcome names how a call ended from its error.
	outcome func(err error) string
}

var owners = []owner{
	{
		name: "sdk",
		setup: func(sc scenario) (aws.Retryer, []func(*middleware.Stack) error, func() int) {
			rl := ratelimit.NewTokenRateLimit(uint(capacity(sc)))
			r := sdkretry.NewStandard(func(o *sdkretry.StandardOptions) { o.RateLimiter = rl })
			return r, nil, func() int { return int(rl.Remaining()) }
		},
		outcome: func(err error) string {
			var maxed *sdkretry.MaxAttemptsError
			var quota ratelimit.QuotaExceededError
			switch {
			case err == nil:
				return outcomeOK
			case errors.As(err, &maxed):
				return outcomeMaxAttempts
			case errors.As(err, &quota):
				return outcomeQuota
			}
			return outcomeNotRetried
		},
	},
	{
		name: "backstop",
		setup: func(sc scenario) (aws.Retryer, []func(*middleware.Stack) error, func() int) {
			r, q := awsretry.NewStandardQuotaWith("conformance", sc.tokens, nil, cryptoRand{})
			return r, []func(*middleware.Stack) error{r.AddToStack}, q.Tokens
		},
		outcome: func(err error) string {
			switch {
			case err == nil:
				return outcomeOK
			case errors.Is(err, retry.ErrExhausted):
				return outcomeMaxAttempts
			case errors.Is(err, retry.ErrBudget):
				return outcomeQuota
			}
			return outcomeNotRetried
		},
	},
}

func capacity(sc scenario) int {
	if sc.tokens == 0 {
		return 500
	}
	return sc.tokens
}

// cryptoRand draws as the SDK's backoff does: 53 random bits of crypto/rand.
type cryptoRand struct{}

func (cryptoRand) Float64() float64 {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<53))
	if err != nil {
		panic(err)
	}
	return float64(n.Int64()) / (1 << 53)
}

func TestConformance_SDKStandardMode(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			got := map[string][]result{}
			for _, o := range owners {
				got[o.name] = runScenario(t, sc, o)
			}
			sdk, bs := got["sdk"], got["backstop"]
			for i, w := range sc.want {
				if r := sdk[i]; r.Attempts != w.attempts || r.Outcome != w.outcome || r.Tokens != w.tokens {
					t.Errorf("the SDK, call %d: %d attempts, %s, %d tokens; the SDK's table says %d, %s, %d (the harness is wrong)",
						i+1, r.Attempts, r.Outcome, r.Tokens, w.attempts, w.outcome, w.tokens)
				}
				if waits := len(sdk[i].Waits); waits != sdk[i].Attempts {
					t.Errorf("the SDK, call %d: %d waits recorded for %d attempts", i+1, waits, sdk[i].Attempts)
				}
			}
			same := fmt.Sprint(sdk) == fmt.Sprint(bs)
			reason, listed := deliberate[sc.name]
			switch {
			case !same && !listed:
				t.Errorf("Backstop differs from the SDK:\n  sdk:      %+v\n  backstop: %+v", sdk, bs)
			case same && listed:
				t.Errorf("listed as deliberate (%s) but Backstop now matches the SDK: drop it from the table", reason)
			}
			t.Logf("figure: %-75s sdk %+v", sc.name, sdk)
		})
	}
}

// runScenario makes sc's calls with o as the client's retry owner, inside a synctest
// bubble, against a server outside it.
func runScenario(t *testing.T, sc scenario, o owner) []result {
	t.Helper()
	var script []reply
	for _, c := range sc.calls {
		script = append(script, c...)
	}
	srv := newScriptedServer(t, sc.sqs, script)
	var results []result
	synctest.Test(t, func(t *testing.T) {
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		retryer, api, tokens := o.setup(sc)
		rec := &attemptRecorder{script: script}
		api = append(api, rec.addToStack)
		c := newConformanceClient(sc, srv.URL, &http.Client{Transport: tr}, retryer, api)
		for i := range sc.calls {
			cryptotest.SetGlobalRandom(t, uint64(i+1))
			before := srv.attempts()
			rec.starts = nil
			err := c(context.Background())
			end := time.Now()
			r := result{Attempts: srv.attempts() - before, Outcome: o.outcome(err), Error: errorOf(err), Tokens: tokens()}
			for j, s := range rec.starts {
				next := end
				if j+1 < len(rec.starts) {
					next = rec.starts[j+1]
				}
				r.Waits = append(r.Waits, next.Sub(s))
			}
			results = append(results, r)
		}
	})
	return results
}

// errorOf names an error by its API code and HTTP status.
func errorOf(err error) string {
	if err == nil {
		return ""
	}
	var api smithy.APIError
	var re *smithyhttp.ResponseError
	code, status := "-", "-"
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	if errors.As(err, &re) {
		status = strconv.Itoa(re.HTTPStatusCode())
	}
	return code + " " + status
}

// newConformanceClient returns a call of sc's operation through a client of its
// service, built as a user would with retryer and api.
func newConformanceClient(sc scenario, url string, hc *http.Client, retryer aws.Retryer, api []func(*middleware.Stack) error) func(context.Context) error {
	clientMax, callMax := sc.max, 0
	if sc.perCall {
		clientMax, callMax = 0, sc.max
	}
	first := true // the per-call limit applies to the first call only
	if sc.sqs {
		c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: testCredentials,
			HTTPClient: hc, Retryer: retryer, APIOptions: api, RetryMaxAttempts: clientMax})
		return func(ctx context.Context) error {
			_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url + "/1/q"), WaitTimeSeconds: 20})
			return err
		}
	}
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: testCredentials,
		HTTPClient: hc, Retryer: retryer, APIOptions: api, RetryMaxAttempts: clientMax})
	return func(ctx context.Context) error {
		var opts []func(*dynamodb.Options)
		if first && callMax != 0 {
			opts = append(opts, func(o *dynamodb.Options) { o.RetryMaxAttempts = callMax })
		}
		first = false
		return getItem(ctx, c, opts...)
	}
}

// attemptRecorder notes when each attempt starts, after the SDK's retry middleware,
// and wraps an attempt's error as its reply says.
type attemptRecorder struct {
	script []reply
	sent   int // attempts started in the scenario
	starts []time.Time
}

func (a *attemptRecorder) addToStack(s *middleware.Stack) error {
	if err := s.Finalize.Insert(middleware.FinalizeMiddlewareFunc("RecordAttempt",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			a.starts = append(a.starts, time.Now())
			a.sent++
			return next.HandleFinalize(ctx, in)
		}), "Retry", middleware.After); err != nil {
		return err
	}
	return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("ExplicitRetryable",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if r := a.script[min(a.sent, len(a.script))-1]; err != nil && r.explicit != nil {
				err = &explicitError{err: err, retryable: *r.explicit, timeout: r.timeout}
			}
			return out, md, err
		}), middleware.Before)
}

// explicitError says whether it may be retried, as a user's error type may.
type explicitError struct {
	err       error
	retryable bool
	timeout   bool
}

func (e *explicitError) Error() string        { return e.err.Error() }
func (e *explicitError) Unwrap() error        { return e.err }
func (e *explicitError) RetryableError() bool { return e.retryable }
func (e *explicitError) Timeout() bool        { return e.timeout }

// scriptedServer answers the k-th request it gets with script[k], as DynamoDB or SQS
// (both JSON protocols) would.
type scriptedServer struct {
	*httptest.Server
	mu sync.Mutex // guards n
	n  int
}

func newScriptedServer(t *testing.T, sqsService bool, script []reply) *scriptedServer {
	t.Helper()
	s := &scriptedServer{}
	prefix := "com.amazonaws.dynamodb.v20120810#"
	if sqsService {
		prefix = "com.amazonaws.sqs#"
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.n++
		k := s.n
		s.mu.Unlock()
		if k > len(script) {
			t.Errorf("the server got request %d; the script has %d", k, len(script))
			w.WriteHeader(http.StatusTeapot)
			return
		}
		rep := script[k-1]
		if rep.reset {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0) // close with a reset
				_ = conn.Close()
			}
			return
		}
		w.Header()["Date"] = nil // the bubble's clock is not the server's: no skew to learn
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		if rep.status == http.StatusOK {
			_, _ = io.WriteString(w, "{}")
			return
		}
		w.WriteHeader(rep.status)
		if rep.code == "" {
			_, _ = io.WriteString(w, "{}")
			return
		}
		fmt.Fprintf(w, `{"__type":"%s%s","message":"%s"}`, prefix, rep.code, rep.code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptedServer) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
