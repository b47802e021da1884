package shed

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/backstop-go/backstop/internal/race"
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
		if _, ok := q.allow(context.Background(), fmt.Sprint("idle", i), t0); !ok {
			t.Fatalf("client idle%d refused its first request", i)
		}
	}
	t1 := t0.Add(10 * time.Second) // every bucket has refilled: all idle
	if _, ok := q.allow(context.Background(), "busy", t1); !ok {
		t.Fatal("a new client refused on a full table")
	}
	if n := q.local.n.Load(); n != 1 {
		t.Errorf("after eviction the table holds %d clients; want 1 (the idle ones forgotten)", n)
	}
	if _, ok := q.allow(context.Background(), "busy", t1); ok {
		t.Error("busy's second request within its second was allowed; want its own bucket kept")
	}
}

// TestQuotas_AMillionClientsStayBounded: a million distinct client keys never grow
// the table past MaxClients.
func TestQuotas_AMillionClientsStayBounded(t *testing.T) {
	n := 1_000_000
	if race.Enabled || testing.Short() {
		n = 200_000 // the same bound; the race detector makes a million take half a minute
	}
	q, err := newQuotas(Quota{Key: func(*http.Request) string { return "" }, Rate: 1, Burst: 1, MaxClients: DefaultMaxClients})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	most := int64(0)
	for i := range n {
		if _, ok := q.allow(context.Background(), "client-"+strconv.Itoa(i), now); !ok {
			t.Fatalf("client %d refused its first request", i)
		}
		most = max(most, q.local.n.Load())
	}
	if most > DefaultMaxClients {
		t.Errorf("%d clients held at most; want ≤ %d", most, DefaultMaxClients)
	}
	var held int64
	q.local.m.Range(func(any, any) bool { held++; return true })
	if held != q.local.n.Load() || held > DefaultMaxClients {
		t.Errorf("the table holds %d clients and counts %d; want the same, ≤ %d", held, q.local.n.Load(), DefaultMaxClients)
	}
}
