package shed

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestQuotas_EvictIdleClientsFirst: a full table forgets clients whose buckets have
// refilled (forgetting them changes nothing) before anyone else, and keeps counting
// the clients it holds.
func TestQuotas_EvictIdleClientsFirst(t *testing.T) {
	q, err := newQuotas(Quota{Key: func(*http.Request) string { return "" }, Rate: 1, Burst: 1, MaxClients: 10})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		if _, ok := q.allow(fmt.Sprint("idle", i), t0); !ok {
			t.Fatalf("client idle%d refused its first request", i)
		}
	}
	t1 := t0.Add(10 * time.Second) // every bucket has refilled: all idle
	if _, ok := q.allow("busy", t1); !ok {
		t.Fatal("a new client refused on a full table")
	}
	if n := q.n.Load(); n != 1 {
		t.Errorf("after eviction the table holds %d clients; want 1 (the idle ones forgotten)", n)
	}
	if _, ok := q.allow("busy", t1); ok {
		t.Error("busy's second request within its second was allowed; want its own bucket kept")
	}
}
