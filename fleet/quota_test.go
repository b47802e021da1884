package fleet

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/shed"
)

// quotaServer is one replica: a shedder whose client quota is q, around a handler
// that answers 204.
func quotaServer(t *testing.T, q *Quota) http.Handler {
	t.Helper()
	s := policy.Must(shed.New(shed.Options{Quota: &shed.Quota{
		Key:  func(r *http.Request) string { return r.Header.Get("X-Client") },
		Rate: 1, Burst: 3, Store: q,
	}}))
	return shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }), s)
}

func send(h http.Handler, client string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Client", client)
	h.ServeHTTP(w, r)
	return w
}

func newQuota(t *testing.T, s *Store) *Quota {
	t.Helper()
	q, err := NewQuota(s, QuotaOptions{Name: "api", MaxLocalClients: 0})
	require.NoError(t, err)
	return q
}

func TestQuota_AClientsBurstIsTheFleets(t *testing.T) {
	srv := startRedis(t)
	replicas := []http.Handler{quotaServer(t, newQuota(t, srv.store(t, "a"))),
		quotaServer(t, newQuota(t, srv.store(t, "b"))), quotaServer(t, newQuota(t, srv.store(t, "c")))}
	codes := map[int]int{}
	var last *httptest.ResponseRecorder
	for i := range 6 {
		last = send(replicas[i%3], "alice")
		codes[last.Code]++
	}
	require.Equal(t, map[int]int{204: 3, 429: 3}, codes, "a burst of 3 across three replicas, not 3 from each")
	require.Equal(t, "1", last.Header().Get("Retry-After"), "a token a second")
	require.Equal(t, 204, send(replicas[0], "bob").Code, "bob has a bucket of his own")
}

func TestQuota_RedisDownAnswersFromLocalBuckets(t *testing.T) {
	srv := startRedis(t)
	var ev events
	q := newQuota(t, srv.store(t, "a", ev.add))
	h := quotaServer(t, q)
	require.Equal(t, 204, send(h, "alice").Code)
	srv.stop()
	codes := map[int]int{}
	for range 4 {
		codes[send(h, "alice").Code]++
	}
	require.Equal(t, map[int]int{204: 3, 429: 1}, codes, "the local bucket of 3 decides while Redis is away")
	require.False(t, q.Shared())
	require.Equal(t, []string{"api→local"}, ev.list())

	srv.start()
	q.down.Store(0) // the recheck time has come
	require.Equal(t, 204, send(h, "carol").Code)
	require.True(t, q.Shared())
	require.Equal(t, []string{"api→local", "api→shared"}, ev.list())
}

func TestNewQuota_RefusesBadInput(t *testing.T) {
	_, err := NewQuota(nil, QuotaOptions{Name: "api", MaxLocalClients: 0})
	require.ErrorIs(t, err, ErrInvalidOptions)
	srv := startRedis(t)
	_, err = NewQuota(srv.store(t, "a"), QuotaOptions{Name: "", MaxLocalClients: 0})
	require.ErrorContains(t, err, "name is empty")
	_, err = NewQuota(srv.store(t, "a"), QuotaOptions{Name: "api", MaxLocalClients: -1})
	require.ErrorContains(t, err, "MaxLocalClients is -1")
}
