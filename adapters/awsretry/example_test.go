package awsretry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// A Backstop pipeline owns an S3 client's retries: a bucket that answers 503 SlowDown
// twice gets three attempts from a call, and one from a call whose path a retry
// further up already owns.
func ExampleRetryer() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1)%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		_, _ = io.WriteString(w, "hello")
	}))
	defer srv.Close()

	p, err := policy.Wrap(
		policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), // the AWS SDKs' retry quota
		policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond})),
		policy.Name("s3"))
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := awsretry.New(p, awsretry.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}, nil
	})}
	r.Configure(&cfg)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(srv.URL), true })

	get := func(ctx context.Context) error {
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
		if err == nil {
			_ = out.Body.Close()
		}
		return err
	}
	err = get(context.Background())
	fmt.Printf("a call: %d attempts, error: %v\n", attempts.Load(), err)

	attempts.Store(0)
	err = get(callpath.WithAttempt(context.Background(), 1)) // a retry above owns this path
	fmt.Printf("under an owner: %d attempt, retryable for the owner: %v\n", attempts.Load(), retry.DefaultShouldRetry(err))
	// Output:
	// a call: 3 attempts, error: <nil>
	// under an owner: 1 attempt, retryable for the owner: true
}
