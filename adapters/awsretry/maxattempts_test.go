package awsretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/retry"
)

// TestRetryMaxAttempts_FromConfig: AWS_MAX_ATTEMPTS and a profile's max_attempts,
// read by config.LoadDefaultConfig, set a call's attempts through a Retryer as through
// the SDK's own retryer; the environment wins over the profile, as in the SDK.
func TestRetryMaxAttempts_FromConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string // AWS_MAX_ATTEMPTS, "" unset
		profile string // max_attempts of the default profile, "" unset
		want    int
	}{
		{"neither: the retryer's own 3", "", "", 3},
		{"AWS_MAX_ATTEMPTS=1 turns retries off", "1", "", 1},
		{"AWS_MAX_ATTEMPTS=5", "5", "", 5},
		{"max_attempts = 1 in the profile", "", "1", 1},
		{"max_attempts = 5 in the profile", "", "5", 5},
		{"AWS_MAX_ATTEMPTS over the profile", "2", "5", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			profile := "[default]\n"
			if tc.profile != "" {
				profile += "max_attempts = " + tc.profile + "\n"
			}
			cfgFile := filepath.Join(dir, "config")
			require.NoError(t, os.WriteFile(cfgFile, []byte(profile), 0o600))
			for _, k := range []string{"AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_CA_BUNDLE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"} {
				t.Setenv(k, "")
				require.NoError(t, os.Unsetenv(k))
			}
			if tc.env != "" {
				t.Setenv("AWS_MAX_ATTEMPTS", tc.env)
			}
			t.Setenv("AWS_PROFILE", "default")
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			for _, own := range []string{"sdk", "backstop"} {
				s := newService(t, dynamoError(500, "InternalServerError"))
				cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"),
					config.WithCredentialsProvider(testCredentials), config.WithHTTPClient(&http.Client{Transport: newTransport(t)}),
					config.WithSharedConfigFiles([]string{cfgFile}), config.WithSharedCredentialsFiles([]string{filepath.Join(dir, "none")}))
				require.NoError(t, err)
				if own == "sdk" {
					cfg.Retryer = sdkStandard
				} else {
					r, _ := awsretry.NewStandardWith("dynamodb", autoClock(), nil)
					r.Configure(&cfg)
				}
				client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.URL) })
				require.Error(t, getItem(context.Background(), client))
				require.Equal(t, tc.want, s.attempts(), "%s: attempts", own)
			}
		})
	}
}

// TestNew_RetryMaxAttemptsLowersThePipelines: under New the pipeline's retry is the
// ceiling; RetryMaxAttempts below it ends the call sooner, as an exhausted retry.
func TestNew_RetryMaxAttemptsLowersThePipelines(t *testing.T) {
	for _, tc := range []struct {
		max, want int
	}{{1, 1}, {2, 2}, {3, 3}, {5, 3}} {
		t.Run(fmt.Sprint("RetryMaxAttempts ", tc.max), func(t *testing.T) {
			s := newService(t, dynamoError(500, "InternalServerError"))
			q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{}))
			r := policy.Must(awsretry.New(adapterPipeline(t, q, autoClock()), awsretry.Options{}))
			c := newDynamo(s, withAdapter(r, newTransport(t)))
			err := getItem(context.Background(), c, func(o *dynamodb.Options) { o.RetryMaxAttempts = tc.max })
			require.ErrorIs(t, err, retry.ErrExhausted)
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.want, re.Attempts, "retry.Error.Attempts")
			require.Equal(t, tc.want, s.attempts(), "attempts the server got")
			require.Equal(t, 500-14*(tc.want-1), q.Tokens(), "tokens: 14 a retry")
			if tc.want > 1 {
				require.Equal(t, fmt.Sprintf("attempt=%d; max=%d", tc.want, tc.want), s.headers(awsretry.HeaderSDKRequest)[tc.want-1])
			}
		})
	}
}

// TestNewStandard_RetryMaxAttemptsPerCallConcurrently: calls with their own limits at
// once, through one Retryer and its one quota.
func TestNewStandard_RetryMaxAttemptsPerCallConcurrently(t *testing.T) {
	s := newService(t, dynamoError(503, "ServiceUnavailable"))
	r, q := awsretry.NewStandardWith("dynamodb", autoClock(), nil)
	c := newDynamo(s, withAdapter(r, newTransport(t)))
	limits := []int{1, 2, 4, 5, 4, 2}
	var wg sync.WaitGroup
	for _, n := range limits {
		wg.Go(func() {
			err := getItem(context.Background(), c, func(o *dynamodb.Options) { o.RetryMaxAttempts = n })
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != n || !errors.Is(err, retry.ErrExhausted) {
				t.Errorf("a call of RetryMaxAttempts %d: %v; want %d attempts, exhausted", n, err, n)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 18, s.attempts(), "attempts: 1 + 2 + 4 + 5 + 4 + 2")
	require.Equal(t, 500-14*12, q.Tokens(), "tokens: 12 retries × 14")
}

// TestNew_LongPollBacksOffWhenTheQuotaRefuses: an SQS ReceiveMessage whose retry the
// quota refuses waits the SDKs' backoff before it returns; GetItem does not.
func TestNew_LongPollBacksOffWhenTheQuotaRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sqs   bool
		waits int // the clock's waits: the retry's own, then the long poll's
	}{
		{"ReceiveMessage", true, 2},
		{"GetItem", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, dynamoError(500, "InternalError"))
			clock := autoClock()
			q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{Tokens: 14}))
			r := policy.Must(awsretry.New(adapterPipeline(t, q, clock), awsretry.Options{Clock: clock}))
			setup := withAdapter(r, newTransport(t))
			var err error
			if tc.sqs {
				c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL), Credentials: testCredentials,
					HTTPClient: &http.Client{Transport: setup.transport}, Retryer: setup.retryer, APIOptions: setup.apiOptions})
				_, err = c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.URL + "/1/q")})
			} else {
				err = getItem(context.Background(), newDynamo(s, setup))
			}
			require.ErrorIs(t, err, retry.ErrBudget)
			require.Equal(t, 2, s.attempts())
			waits := clock.Waits()
			require.Len(t, waits, tc.waits, "the clock's waits: %v", waits)
			if tc.sqs && (waits[1] <= 0 || waits[1] >= 100*time.Millisecond) {
				t.Errorf("the long poll waited %v after the refusal; want within the second retry's window (0, 100 ms)", waits[1])
			}
		})
	}
}

// TestClassify_TheErrorsOwnAnswerWins: an error that says it is not retryable is
// marked Permanent even when it is a timeout or a reset connection; an error the SDK
// does not retry is not retried by Backstop's default classifier either.
func TestClassify_TheErrorsOwnAnswerWins(t *testing.T) {
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"a reset connection", reset, true},
		{"a reset connection that says no", &explicit{reset, false, false}, false},
		{"a timeout", &explicit{errors.New("i/o timeout"), true, true}, true},
		{"a timeout that says no", &explicit{errors.New("i/o timeout"), false, true}, false},
		{"a broken pipe, which the SDK does not retry", fmt.Errorf("write: %w", syscall.EPIPE), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := awsretry.Classify(tc.err)
			require.Equal(t, tc.retry, retry.DefaultShouldRetry(got), "DefaultShouldRetry(Classify(%v))", tc.err)
			require.Equal(t, !tc.retry, fault.Of(got).Permanent, "fault.Of(Classify(%v)).Permanent", tc.err)
			require.ErrorIs(t, got, tc.err)
		})
	}
}

// explicit is an error that answers RetryableError, and Timeout when timeout is set.
type explicit struct {
	err       error
	retryable bool
	timeout   bool
}

func (e *explicit) Error() string        { return e.err.Error() }
func (e *explicit) Unwrap() error        { return e.err }
func (e *explicit) RetryableError() bool { return e.retryable }
func (e *explicit) Timeout() bool        { return e.timeout }
