package shed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/shed"
)

// TestQuota_RequestsWithoutAKeyAreNeverUnlimited: 1 000 requests at a quota of 1/s
// with burst 1. Without the key header they share one bucket (1 served) unless the
// quota says to refuse them (0) or, explicitly, to exempt them (1 000).
func TestQuota_RequestsWithoutAKeyAreNeverUnlimited(t *testing.T) {
	for _, tt := range []struct {
		noKey  shed.NoKey
		served int
	}{{shed.NoKeyShare, 1}, {shed.NoKeyRefuse, 0}, {shed.NoKeyExempt, 1000}} {
		s := policy.Must(shed.New(shed.Options{Clock: policytest.NewClock(t0), Quota: &shed.Quota{
			Key:  func(r *http.Request) string { return r.Header.Get("X-Client") },
			Rate: 1, Burst: 1, NoKey: tt.noKey,
		}}))
		h := shed.Middleware(okHandler, s)
		served := 0
		for range 1000 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code < 300 {
				served++
			}
		}
		require.Equal(t, tt.served, served, "NoKey %d: requests without a key served of 1000", tt.noKey)
	}
	_, err := shed.New(shed.Options{Quota: &shed.Quota{Key: func(*http.Request) string { return "" }, Rate: 1, Burst: 1, NoKey: 9}})
	require.ErrorContains(t, err, "Quota.NoKey is 9")
}

// TestQuota_LongKeysAreHashed: 1 000 clients with distinct 32 KiB keys each keep a
// bucket of their own, under a key of at most 39 bytes; two keys that differ only in
// their last byte are two clients.
func TestQuota_LongKeysAreHashed(t *testing.T) {
	var keys []string
	store := storeFunc(func(_ context.Context, key string, _ rate.Limit, _ int) (time.Duration, bool) {
		keys = append(keys, key)
		return 0, true
	})
	s := policy.Must(shed.New(shed.Options{Quota: &shed.Quota{Key: func(r *http.Request) string { return r.Header.Get("X-Client") },
		Rate: 1, Burst: 1, Store: store}}))
	h := shed.Middleware(okHandler, s)
	long := strings.Repeat("k", 32<<10)
	for i := range 1000 {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Client", long+strconv.Itoa(i))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		require.LessOrEqual(t, len(k), 39, "a stored key of %d bytes", len(k))
		seen[k] = true
	}
	require.Len(t, seen, 1000, "distinct long keys stay distinct clients")
}
