package awsretry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// The three failures of the issue, each from the service that answers it.
var failures = []struct {
	name   string
	answer answer
	call   func(context.Context, *service, clientSetup) error
}{
	{"S3 503 SlowDown", s3Error(503, "SlowDown"), func(ctx context.Context, s *service, c clientSetup) error { return getObject(ctx, newS3(s, c)) }},
	{"S3 500 InternalError", s3Error(500, "InternalError"), func(ctx context.Context, s *service, c clientSetup) error { return getObject(ctx, newS3(s, c)) }},
	{"DynamoDB 400 ThrottlingException", dynamoError(400, "ThrottlingException"), func(ctx context.Context, s *service, c clientSetup) error { return getItem(ctx, newDynamo(s, c)) }},
}

// TestAttempts_OneOwner counts, on the server, the attempts one call makes against a
// service that keeps failing: with the SDK's own retries alone, with them stacked on a
// Backstop retry (a policyhttp transport under the SDK, or a pipeline around the
// call), and with the adapter, alone, over a policyhttp transport, and under an owner.
func TestAttempts_OneOwner(t *testing.T) {
	type setup struct {
		name string
		want map[string]int // by failure; 0 means the same as "*"
		run  func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error
	}
	sdkAlone := func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error {
		return call(context.Background(), s, clientSetup{retryer: sdkStandard(), transport: newTransport(t)})
	}
	naiveTransport := func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error {
		tr := policyhttp.NewTransport(newTransport(t), policy.Must(policy.Wrap(backstopRetry(autoClock()))), policyhttp.Options{})
		return call(context.Background(), s, clientSetup{retryer: sdkStandard(), transport: tr})
	}
	naivePipeline := func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error {
		p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: 10 * time.Millisecond, Clock: autoClock(),
			ShouldRetry: func(err error) bool { return retry.DefaultShouldRetry(awsretry.Classify(err)) }}))))
		c := clientSetup{retryer: sdkStandard(), transport: newTransport(t)}
		return p.Do(context.Background(), func(ctx context.Context) error { return call(ctx, s, c) })
	}
	adapter := func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error {
		r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
		return call(context.Background(), s, withAdapter(r, newTransport(t)))
	}
	adapterOverTransport := func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error {
		r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
		tr := policyhttp.NewTransport(newTransport(t), policy.Must(policy.Wrap(backstopRetry(autoClock()))), policyhttp.Options{})
		return call(context.Background(), s, withAdapter(r, tr))
	}
	underOwner := func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error {
		r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
		return call(callpath.WithAttempt(context.Background(), 1), s, withAdapter(r, newTransport(t)))
	}
	underUpstream := func(t *testing.T, s *service, call func(context.Context, *service, clientSetup) error) error {
		r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
		return call(callpath.WithUpstreamAttempt(context.Background(), 2), s, withAdapter(r, newTransport(t)))
	}
	setups := []setup{
		{"the SDK's retries alone", map[string]int{"*": 3}, sdkAlone},
		// policyhttp retries a GET's 503, not a 500, nor DynamoDB's POSTs.
		{"the SDK's retries over a Backstop transport", map[string]int{"*": 3, "S3 503 SlowDown": 9}, naiveTransport},
		{"the SDK's retries under a Backstop pipeline", map[string]int{"*": 9}, naivePipeline},
		{"the adapter", map[string]int{"*": 3}, adapter},
		{"the adapter over a Backstop transport", map[string]int{"*": 3}, adapterOverTransport},
		{"the adapter under an owner in this process", map[string]int{"*": 1}, underOwner},
		{"the adapter under an owner upstream", map[string]int{"*": 1}, underUpstream},
	}
	for _, f := range failures {
		for _, st := range setups {
			t.Run(f.name+"/"+st.name, func(t *testing.T) {
				s := newService(t, f.answer)
				err := st.run(t, s, f.call)
				require.Error(t, err)
				want := st.want[f.name]
				if want == 0 {
					want = st.want["*"]
				}
				if got := s.attempts(); got != want {
					t.Errorf("%s, %s: the server got %d attempts, want %d (error: %v)", f.name, st.name, got, want, err)
				}
				t.Logf("figure: %-34s %-46s %d attempts", f.name, st.name, s.attempts())
			})
		}
	}
}

func TestRetryer_AttemptHeaders(t *testing.T) {
	s := newService(t, s3Error(503, "SlowDown"))
	r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
	require.Error(t, getObject(context.Background(), newS3(s, withAdapter(r, newTransport(t)))))

	require.Equal(t, []string{"1", "2", "3"}, s.headers(callpath.HeaderAttempt), "Backstop-Attempt of each attempt")
	require.Equal(t, []string{"attempt=1; max=3", "attempt=2; max=3", "attempt=3; max=3"}, s.headers(awsretry.HeaderSDKRequest),
		"amz-sdk-request of each attempt")
	ids := s.headers("Amz-Sdk-Invocation-Id")
	require.NotEmpty(t, ids[0], "amz-sdk-invocation-id")
	require.Equal(t, []string{ids[0], ids[0], ids[0]}, ids, "one invocation id for the call's attempts")
	auth := s.headers("Authorization")
	require.True(t, strings.Contains(auth[2], "backstop-attempt"), "the attempt header is signed: Authorization %q", auth[2])
}

func TestRetryer_UnderOwnerSendsOneAttemptCarryingTheOwnership(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string // Backstop-Attempt sent
	}{
		{"owner in this process, its attempt 2", callpath.WithAttempt(context.Background(), 2), "2"},
		{"owner upstream, its attempt 3", callpath.WithUpstreamAttempt(context.Background(), 3), "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, s3Error(503, "SlowDown"))
			q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{}))
			r := policy.Must(awsretry.New(adapterPipeline(t, q, autoClock()), awsretry.Options{}))
			err := getObject(tc.ctx, newS3(s, withAdapter(r, newTransport(t))))
			require.ErrorIs(t, err, retry.ErrOwner)
			require.True(t, fault.Of(err).Retryable, "the SDK's SlowDown stays retryable for the owner: %v", err)
			require.Equal(t, []string{tc.want}, s.headers(callpath.HeaderAttempt))
			require.Equal(t, []string{"attempt=1; max=1"}, s.headers(awsretry.HeaderSDKRequest), "the SDK's own header: one attempt here")
			require.Equal(t, budget.DefaultRetryQuotaTokens, q.Tokens(), "only the owner pays for retries")
		})
	}
}

// TestRetryer_OuterOwnerRetriesTheSDKsThrottle: a handler's pipeline around a client
// with the adapter owns the retries: 3 attempts in all, not 3 × 3.
func TestRetryer_OuterOwnerRetriesTheSDKsThrottle(t *testing.T) {
	s := newService(t, dynamoError(400, "ThrottlingException"))
	r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
	client := newDynamo(s, withAdapter(r, newTransport(t)))
	outer := policy.Must(policy.Wrap(backstopRetry(autoClock())))
	err := outer.Do(context.Background(), func(ctx context.Context) error { return getItem(ctx, client) })
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, 3, re.Attempts, "the outer owner's attempts")
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, 3, s.attempts())
}

func TestRetryer_Quota(t *testing.T) {
	t.Run("an empty quota stops the retries", func(t *testing.T) {
		s := newService(t, s3Error(503, "SlowDown"))
		q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{Tokens: 14}))
		client := newS3(s, withAdapter(policy.Must(awsretry.New(adapterPipeline(t, q, autoClock()), awsretry.Options{})), newTransport(t)))
		require.Error(t, getObject(context.Background(), client))
		require.Equal(t, 3, s.attempts(), "first call: 1 + 2 retries")
		require.Equal(t, 4, q.Tokens(), "tokens 4 = 14 − 2 retries after a throttling error × 5")
		err := getObject(context.Background(), client)
		require.ErrorIs(t, err, retry.ErrBudget)
		require.Equal(t, 4, s.attempts(), "second call: one attempt, the quota refuses its retry")
	})
	t.Run("a retry that succeeds gives its tokens back", func(t *testing.T) {
		s := newService(t, failThen(1, s3Error(500, "InternalError"), s3Object))
		q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{Tokens: 20}))
		require.NoError(t, getObject(context.Background(), newS3(s, withAdapter(policy.Must(awsretry.New(adapterPipeline(t, q, autoClock()), awsretry.Options{})), newTransport(t)))))
		require.Equal(t, 2, s.attempts())
		require.Equal(t, 20, q.Tokens(), "tokens 20 = 20 − 14 + 14 back: a call that needed a retry adds nothing")
		q.Take("") // 6 left; a call that succeeds at its first attempt adds 1
		require.NoError(t, getObject(context.Background(), newS3(s, withAdapter(policy.Must(awsretry.New(adapterPipeline(t, q, autoClock()), awsretry.Options{})), newTransport(t)))))
		require.Equal(t, 7, q.Tokens())
	})
	t.Run("a retry after a request timeout costs the timeout price", func(t *testing.T) {
		s := newService(t, s3Error(400, "RequestTimeout"))
		q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{TimeoutCost: 10}))
		client := newS3(s, withAdapter(policy.Must(awsretry.New(adapterPipeline(t, q, autoClock()), awsretry.Options{})), newTransport(t)))
		require.Error(t, getObject(context.Background(), client))
		require.Equal(t, 3, s.attempts())
		require.Equal(t, 480, q.Tokens(), "tokens 480 = 500 − 2 retries × the TimeoutCost 10 (14 by default, as any retry)")
	})
}

// TestRetryer_Classification runs the SDK's retryable classification through a real
// client: what it retries, what it leaves, and what a breaker may ignore.
func TestRetryer_Classification(t *testing.T) {
	skewed := func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		s3Error(403, "RequestTimeTooSkewed")(0, w, r)
	}
	hangUp := func(_ int, w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
	for _, tc := range []struct {
		name   string
		answer answer
		codes  []string
		want   int  // attempts
		client bool // the error is marked fault.Client
	}{
		{"503 SlowDown is retried", s3Error(503, "SlowDown"), nil, 3, false},
		{"500 InternalError is retried", s3Error(500, "InternalError"), nil, 3, false},
		{"a closed connection is retried", hangUp, nil, 3, false},
		{"a skewed clock is retried once the skew is learnt", failThen(1, skewed, s3Object), nil, 2, false},
		{"403 AccessDenied is the caller's", s3Error(403, "AccessDenied"), nil, 1, true},
		{"404 NoSuchKey is the caller's", s3Error(404, "NoSuchKey"), nil, 1, true},
		{"a code of the service's own is retried when listed", s3Error(400, "BucketBusy"), []string{"BucketBusy"}, 3, false},
		{"and not when it is not", s3Error(400, "BucketBusy"), nil, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, tc.answer)
			r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()),
				awsretry.Options{RetryableCodes: tc.codes}))
			err := getObject(context.Background(), newS3(s, withAdapter(r, newTransport(t))))
			require.Equal(t, tc.want, s.attempts(), "attempts; error %v", err)
			if tc.want == 2 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, tc.client, fault.Of(err).Client, "fault.Of(%v).Client", err)
		})
	}
}

func TestRetryer_ServerHint(t *testing.T) {
	for _, tc := range []struct {
		name, header, value string
		hint                time.Duration
	}{
		{"x-amz-retry-after in milliseconds", awsretry.HeaderAmzRetryAfter, "700", 700 * time.Millisecond},
		{"x-amz-retry-after of a minute: at most 5 s, as the SDKs wait", awsretry.HeaderAmzRetryAfter, "60000", 5 * time.Second},
		{"Retry-After in seconds", "Retry-After", "2", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, failThen(1, func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set(tc.header, tc.value)
				s3Error(503, "SlowDown")(n, w, r)
			}, s3Object))
			clock := autoClock()
			r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), clock), awsretry.Options{}))
			require.NoError(t, getObject(context.Background(), newS3(s, withAdapter(r, newTransport(t)))))
			waits := clock.Waits()
			require.Len(t, waits, 1)
			if waits[0] < tc.hint || waits[0] > tc.hint*3/2 {
				t.Errorf("the retry waited %v; want the hint %v plus at most half of it", waits[0], tc.hint)
			}
		})
	}
}

// TestRetryer_RewindsTheBodyForEachAttempt: over plain HTTP the SDK signs the payload
// (and reads it back to its start to do so); TestRetryer_RewindsAnUnsignedBody is the
// case only the Retryer's rewind covers.
func TestRetryer_RewindsTheBodyForEachAttempt(t *testing.T) {
	var bodies []string
	s := newService(t, nil)
	s.answer = func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			s3Error(503, "SlowDown")(n, w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		bodies = append(bodies, string(b))
		s.seen = append(s.seen, r.Header.Clone())
		n := len(s.seen)
		s.mu.Unlock()
		s.answer(n, w, r)
	})
	r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
	_, err := newS3(s, withAdapter(r, newTransport(t))).PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("bucket"), Key: aws.String("key"), Body: bytes.NewReader([]byte("payload"))})
	require.NoError(t, err)
	require.Equal(t, []string{"payload", "payload", "payload"}, bodies, "the body of each attempt")
}

func TestRetryer_Configure(t *testing.T) {
	s := newService(t, s3Error(503, "SlowDown"))
	cfg := aws.Config{Region: "us-east-1", Credentials: testCredentials, HTTPClient: &http.Client{Transport: newTransport(t)}}
	policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{})).Configure(&cfg)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(s.URL), true })
	require.ErrorIs(t, getObject(context.Background(), client), retry.ErrExhausted)
	require.Equal(t, 3, s.attempts())
}

func TestRetryer_WithoutItsMiddlewareRefusesEveryCall(t *testing.T) {
	s := newService(t, s3Object)
	r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
	err := getObject(context.Background(), newS3(s, clientSetup{retryer: r, transport: newTransport(t)}))
	require.ErrorIs(t, err, awsretry.ErrNotInstalled)
	require.Equal(t, 0, s.attempts())
}

func TestRetryer_RefusesAHedge(t *testing.T) {
	s := newService(t, s3Object)
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: time.Hour}))))
	err := getObject(context.Background(), newS3(s, withAdapter(policy.Must(awsretry.New(p, awsretry.Options{})), newTransport(t))))
	require.ErrorIs(t, err, awsretry.ErrHedged)
	require.Equal(t, 0, s.attempts())
}

func TestNew_RefusesBadInput(t *testing.T) {
	_, err := awsretry.New(nil, awsretry.Options{})
	require.ErrorContains(t, err, "pipeline is nil")
	_, err = awsretry.New(policy.Must(policy.Wrap()), awsretry.Options{RetryableCodes: []string{"Busy", ""}})
	require.ErrorContains(t, err, "RetryableCodes[1] is empty")
}

func TestNewStandard_IsTheSDKsStandardMode(t *testing.T) {
	r := awsretry.NewStandard("s3")
	e := r.Pipeline().Explain()
	require.Equal(t, 3, e.MaxAttempts)
	require.Equal(t, "s3", e.Pipeline)
	require.Len(t, e.Stack, 2)
	require.Contains(t, e.Stack[0].Summary, "500 tokens")
}

func TestClassify(t *testing.T) {
	require.NoError(t, awsretry.Classify(nil))
	plain := errors.New("plain")
	require.Same(t, plain, awsretry.Classify(plain), "an error the SDK does not know is returned as it is")
	canceled := &aws.RequestCanceledError{Err: context.Canceled}
	require.False(t, retry.DefaultShouldRetry(awsretry.Classify(canceled)), "a canceled request is not retried")
}

func TestRetryer_Explain(t *testing.T) {
	got := awsretry.NewStandard("s3").Explain()
	want := `aws sdk: the SDK's retry loop makes 1 attempt each time pipeline "s3" calls it; the pipeline makes at most 3 per call, 1 under a retry owner further up`
	require.Equal(t, want, got)
}
