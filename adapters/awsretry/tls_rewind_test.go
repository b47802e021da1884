package awsretry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/budget"
)

// TestRetryer_RewindsAnUnsignedBody: over TLS the SDK sends S3 an unsigned payload,
// which no signer reads back to its start: the Retryer rewinds it for each attempt.
func TestRetryer_RewindsAnUnsignedBody(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		n := len(bodies)
		mu.Unlock()
		if n <= 2 {
			s3Error(503, "SlowDown")(n, w, r)
		}
	}))
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, Credentials: testCredentials,
		HTTPClient: &http.Client{Transport: tr}, Retryer: r, APIOptions: withAdapter(r, nil).apiOptions})
	_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: bytes.NewReader([]byte("payload"))})
	require.NoError(t, err)
	require.Len(t, bodies, 3)
	for i, b := range bodies {
		require.Contains(t, b, "payload", "the body of attempt %d", i+1)
	}
}
