package awsretry_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/shed"
)

// TestRetryer_AHandlerWaitingOnAWSHoldsNoSlot: a handler admitted to its server's only
// shedder slot gives it back while its S3 call waits, so a second request is admitted,
// not refused.
func TestRetryer_AHandlerWaitingOnAWSHoldsNoSlot(t *testing.T) {
	hold, in := make(chan struct{}), make(chan struct{}, 2)
	s3srv := newService(t, func(n int, w http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		<-hold
		s3Object(n, w, r)
	})
	r := policy.Must(awsretry.New(adapterPipeline(t, policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), autoClock()), awsretry.Options{}))
	client := newS3(s3srv, withAdapter(r, newTransport(t)))
	sh := policy.Must(shed.New(shed.Options{Name: "front", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
	front := httptest.NewServer(shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := getObject(req.Context(), client); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	}), sh))
	t.Cleanup(front.Close)
	hc := &http.Client{Transport: newTransport(t)}

	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the servers close, should the test fail

	codes := make(chan int, 2)
	for i := range 2 {
		go func() {
			res, err := hc.Get(front.URL)
			if err != nil {
				codes <- 0
				return
			}
			_ = res.Body.Close()
			codes <- res.StatusCode
		}()
		select {
		case <-in: // this request was admitted and waits on S3
		case code := <-codes:
			t.Fatalf("request %d was answered %d before it reached S3: the first held the slot", i+1, code)
		}
	}
	release()
	require.Equal(t, http.StatusOK, <-codes)
	require.Equal(t, http.StatusOK, <-codes)
	require.Empty(t, sh.Stats().Rejected, "nothing refused")
}
