package awsretry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// answer writes the server's answer to attempt n (1-based) of the test.
type answer func(n int, w http.ResponseWriter, r *http.Request)

// service is an AWS-speaking server on 127.0.0.1 that counts the attempts it gets.
type service struct {
	*httptest.Server
	answer answer
	mu     sync.Mutex // guards the fields below
	seen   []http.Header
}

func newService(t *testing.T, a answer) *service {
	t.Helper()
	s := &service{answer: a}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Clone())
		n := len(s.seen)
		s.mu.Unlock()
		s.answer(n, w, r)
	}))
	s.Start()
	if ap, err := netip.ParseAddrPort(s.Listener.Addr().String()); err != nil || !ap.Addr().IsLoopback() {
		t.Fatalf("test server listens on %v, want loopback", s.Listener.Addr())
	}
	t.Cleanup(s.Close)
	return s
}

// attempts returns the number of requests the server got.
func (s *service) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// headers returns header k of every request the server got, in order.
func (s *service) headers(k string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.seen))
	for i, h := range s.seen {
		out[i] = h.Get(k)
	}
	return out
}

// The answers, as the services send them.

func s3Error(status int, code string) answer {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>R1</RequestId></Error>`, code, code)
	}
}

func dynamoError(status int, code string) answer {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-ErrorType", code)
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"%s"}`, code, code)
	}
}

func s3Object(_ int, w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "hello")
}

// failThen answers the first n attempts with fail and the others with ok.
func failThen(n int, fail, ok answer) answer {
	return func(i int, w http.ResponseWriter, r *http.Request) {
		if i <= n {
			fail(i, w, r)
			return
		}
		ok(i, w, r)
	}
}

// clientSetup is how a test's clients retry: the SDK's retryer and API options, and
// the HTTP transport under them.
type clientSetup struct {
	retryer    aws.Retryer
	apiOptions []func(*middleware.Stack) error
	transport  http.RoundTripper
}

// sdkStandard is the SDK's default retryer, its backoff made instant for the test:
// 3 attempts, the SDK's retryable classification and retry quota.
func sdkStandard() aws.Retryer {
	return sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
}

func withAdapter(r *awsretry.Retryer, transport http.RoundTripper) clientSetup {
	return clientSetup{retryer: r, apiOptions: []func(*middleware.Stack) error{r.AddToStack}, transport: transport}
}

// newTransport returns a fresh HTTP transport whose idle connections are closed when
// the test ends.
func newTransport(t *testing.T) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

var testCredentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", Source: "test"}, nil
})

func newS3(s *service, c clientSetup) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL), UsePathStyle: true, Credentials: testCredentials,
		HTTPClient: &http.Client{Transport: c.transport}, Retryer: c.retryer, APIOptions: c.apiOptions,
	})
}

func newDynamo(s *service, c clientSetup) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL), Credentials: testCredentials,
		HTTPClient: &http.Client{Transport: c.transport}, Retryer: c.retryer, APIOptions: c.apiOptions,
	})
}

func getObject(ctx context.Context, c *s3.Client) error {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("key")})
	if err == nil {
		_, _ = io.Copy(io.Discard, out.Body)
		_ = out.Body.Close()
	}
	return err
}

func getItem(ctx context.Context, c *dynamodb.Client, opts ...func(*dynamodb.Options)) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "1"}}}, opts...)
	return err
}

// backstopRetry is a Backstop retry of 3 attempts whose sleeps pass at once on clock,
// which records them.
func backstopRetry(clock *policytest.Clock) *retry.Retry {
	return policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: 10 * time.Millisecond, Cap: time.Second, Clock: clock}))
}

func autoClock() *policytest.Clock { return policytest.NewClock(time.Now()).AutoAdvance(true) }

// adapterPipeline is the Backstop pipeline of the adapter's tests: a quota of q tokens
// (the SDK's prices) outside the 3-attempt retry.
func adapterPipeline(t *testing.T, q *budget.RetryQuota, clock *policytest.Clock) *policy.Pipeline {
	t.Helper()
	p, err := policy.Wrap(q, backstopRetry(clock), policy.Name("aws"))
	require.NoError(t, err)
	return p
}
