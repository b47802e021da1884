package shed

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxClients bounds the clients a Quota tracks at once.
const DefaultMaxClients = 10_000

// quotas keeps one token bucket per client.
type quotas struct {
	key   func(*http.Request) string
	r     rate.Limit
	burst int
	max   int

	mu sync.Mutex // guards m
	m  map[string]*rate.Limiter
}

func newQuotas(q Quota) (*quotas, error) {
	switch {
	case q.Key == nil:
		return nil, fmt.Errorf("%w: Quota.Key is nil; want a function naming the client", ErrInvalidOptions)
	case !(q.Rate > 0) || math.IsInf(float64(q.Rate), 0):
		return nil, fmt.Errorf("%w: Quota.Rate is %v; want a finite rate > 0", ErrInvalidOptions, float64(q.Rate))
	case q.Burst < 1:
		return nil, fmt.Errorf("%w: Quota.Burst is %d; want ≥ 1", ErrInvalidOptions, q.Burst)
	case q.MaxClients < 0:
		return nil, fmt.Errorf("%w: Quota.MaxClients is %d; want ≥ 0", ErrInvalidOptions, q.MaxClients)
	}
	return &quotas{key: q.Key, r: q.Rate, burst: q.Burst, max: orDefault(q.MaxClients, DefaultMaxClients),
		m: make(map[string]*rate.Limiter)}, nil
}

// allow takes a token from key's bucket; if there is none it returns how long until
// there is.
func (q *quotas) allow(key string, now time.Time) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.m[key]
	if l == nil {
		if len(q.m) >= q.max {
			q.evictLocked(now)
		}
		l = rate.NewLimiter(q.r, q.burst)
		q.m[key] = l
	}
	if l.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - l.TokensAt(now)
	return time.Duration(missing / float64(q.r) * float64(time.Second)), false
}

// evictLocked forgets idle clients (full buckets: forgetting them changes nothing),
// then, if still full, any tenth of the clients.
func (q *quotas) evictLocked(now time.Time) {
	for k, l := range q.m {
		if l.TokensAt(now) >= float64(q.burst) {
			delete(q.m, k)
		}
	}
	for k := range q.m {
		if len(q.m) < q.max-q.max/10 {
			break
		}
		delete(q.m, k)
	}
}
