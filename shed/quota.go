package shed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Quota limits each client to a rate of requests, on golang.org/x/time/rate.
//
// Keys are bounded. A key longer than MaxQuotaKey bytes is replaced by a hash of it:
// "sha256:" and 16 bytes of it in hex, 39 bytes. So a client sending long keys cannot
// make the buckets hold its keys' bytes, in this process or in a Store.
type Quota struct {
	// Key names the client of a request (an API key, a tenant, the remote address).
	// Required. A request it names no client for ("") is handled as NoKey says.
	Key func(*http.Request) string
	// NoKey says what becomes of requests without a key. The zero value, NoKeyShare,
	// puts them all in one bucket of Rate and Burst. So a missing header is never a way
	// around the quota.
	NoKey NoKey
	// Rate and Burst are each client's token bucket. Rate must be > 0, Burst ≥ 1.
	Rate  rate.Limit
	Burst int
	// MaxClients bounds the clients tracked at once; 0 means 10 000. When full, idle
	// clients (whose bucket has refilled) are forgotten first. It bounds this
	// process's buckets, not a Store's.
	MaxClients int
	// Store, if non-nil, keeps the clients' buckets outside this process. A fleet of
	// servers then shares one quota per client (the fleet module keeps them in Redis).
	// Rate and Burst are then each client's limit across the fleet. A nil Store means
	// the buckets of this process.
	Store QuotaStore
}

// NoKey is what a [Quota] does with requests its Key names no client for.
type NoKey uint8

// What becomes of requests without a key.
const (
	// NoKeyShare puts every request without a key in one shared bucket of the
	// Quota's Rate and Burst. The default.
	NoKeyShare NoKey = iota
	// NoKeyRefuse refuses every request without a key (429, ReasonQuota).
	NoKeyRefuse
	// NoKeyExempt lets requests without a key through unlimited. It is for keys that
	// only some trusted requests lack, such as a health check from the load balancer.
	NoKeyExempt
)

// QuotaStore keeps per-client token buckets outside the process, for [Quota].Store.
//
// Allow takes one token from key's bucket of rate r and burst burst, or reports how
// long until one is there. It is asked once per request that names a client. So an
// implementation must:
//
//   - answer within a small bound of its own;
//   - answer from a bucket of its own when its store cannot answer in time (fail open),
//     since a quota store that is down must not take the server down with it;
//   - be safe for concurrent use.
type QuotaStore interface {
	Allow(ctx context.Context, key string, r rate.Limit, burst int) (wait time.Duration, ok bool)
}

// DefaultMaxClients bounds the clients a Quota tracks at once.
const DefaultMaxClients = 10_000

// MaxQuotaKey is the longest key a Quota keeps as it is. A longer one is replaced by
// "sha256:" and the hex of its hash's first 16 bytes (39 bytes). So the clients a Quota
// tracks hold at most about MaxClients × MaxQuotaKey bytes of keys.
const MaxQuotaKey = 64

// sharedKey is the bucket of the requests without a key under NoKeyShare. It holds a
// NUL, which no header value can. A Key function that returns it on purpose shares the
// bucket.
const sharedKey = "\x00no key"

// quotas is a Quota as the middleware asks it: the client's key, the limit, and
// where the buckets are.
type quotas struct {
	keyOf func(*http.Request) string
	noKey NoKey
	r     rate.Limit
	burst int
	store QuotaStore   // nil: local
	local *LocalQuotas // the buckets of this process, when store is nil
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
	if q.NoKey > NoKeyExempt {
		return nil, fmt.Errorf("%w: Quota.NoKey is %d; want NoKeyShare, NoKeyRefuse or NoKeyExempt", ErrInvalidOptions, q.NoKey)
	}
	qs := &quotas{keyOf: q.Key, noKey: q.NoKey, r: q.Rate, burst: q.Burst, store: q.Store}
	if qs.store == nil {
		qs.local = NewLocalQuotas(q.MaxClients)
	}
	return qs, nil
}

// key returns the bucket key of r's client: its Key, hashed when longer than
// MaxQuotaKey. For a request without a key, it returns sharedKey (NoKeyShare). Or it
// returns "" with exempt set (NoKeyExempt) or refuse set (NoKeyRefuse).
func (q *quotas) key(r *http.Request) (key string, exempt, refuse bool) {
	k := q.keyOf(r)
	switch {
	case len(k) > MaxQuotaKey:
		sum := sha256.Sum256([]byte(k))
		return "sha256:" + hex.EncodeToString(sum[:16]), false, false
	case k != "":
		return k, false, false
	case q.noKey == NoKeyExempt:
		return "", true, false
	case q.noKey == NoKeyRefuse:
		return "", false, true
	}
	return sharedKey, false, false
}

// allow takes a token from key's bucket, in the Store if there is one. If there is
// none, it returns how long until there is.
func (q *quotas) allow(ctx context.Context, key string, now time.Time) (time.Duration, bool) {
	if q.store != nil {
		return q.store.Allow(ctx, key, q.r, q.burst)
	}
	return q.local.allow(key, q.r, q.burst, now)
}

// LocalQuotas is the [QuotaStore] of a Quota without a Store: one token bucket per
// client, in this process, on golang.org/x/time/rate. A store that shares buckets
// across processes can fall back on it when its own store is out of reach.
//
// The admit path takes no shared lock. A client's limiter is found in a sync.Map
// (lock-free for clients seen before) and carries its own mutex. Only adding a client
// when the table is full takes a lock. Build it with [NewLocalQuotas].
type LocalQuotas struct {
	max int

	m       sync.Map     // client key → *rate.Limiter
	n       atomic.Int64 // clients in m
	evictMu sync.Mutex   // one eviction at a time
}

// NewLocalQuotas returns an empty LocalQuotas that tracks at most maxClients clients
// at once; 0 means DefaultMaxClients. When full, idle clients (whose bucket has
// refilled) are forgotten first.
func NewLocalQuotas(maxClients int) *LocalQuotas {
	return &LocalQuotas{max: orDefault(maxClients, DefaultMaxClients)}
}

// Allow implements QuotaStore on the system clock. A client's bucket keeps the rate
// and burst it was first asked with.
func (q *LocalQuotas) Allow(_ context.Context, key string, r rate.Limit, burst int) (time.Duration, bool) {
	return q.allow(key, r, burst, time.Now())
}

func (q *LocalQuotas) allow(key string, r rate.Limit, burst int, now time.Time) (time.Duration, bool) {
	v, ok := q.m.Load(key)
	if !ok {
		if q.n.Load() >= int64(q.max) {
			q.evict(now)
		}
		var loaded bool
		v, loaded = q.m.LoadOrStore(key, rate.NewLimiter(r, burst))
		if !loaded {
			q.n.Add(1)
		}
	}
	l := v.(*rate.Limiter)
	if l.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - l.TokensAt(now)
	return time.Duration(missing / float64(l.Limit()) * float64(time.Second)), false
}

// evict forgets idle clients (full buckets: forgetting them changes nothing), then,
// if still full, any tenth of the clients.
func (q *LocalQuotas) evict(now time.Time) {
	q.evictMu.Lock()
	defer q.evictMu.Unlock()
	if q.n.Load() < int64(q.max) {
		return // another eviction made room
	}
	q.m.Range(func(k, v any) bool {
		if l := v.(*rate.Limiter); l.TokensAt(now) >= float64(l.Burst()) {
			if _, ok := q.m.LoadAndDelete(k); ok {
				q.n.Add(-1)
			}
		}
		return true
	})
	q.m.Range(func(k, _ any) bool {
		if q.n.Load() < int64(q.max-q.max/10) {
			return false
		}
		if _, ok := q.m.LoadAndDelete(k); ok {
			q.n.Add(-1)
		}
		return true
	})
}
