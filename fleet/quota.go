package fleet

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"golang.org/x/time/rate"

	"github.com/backstop-go/backstop/shed"
)

// DefaultRecheck is how long a Quota that found Redis out of reach answers from its
// local buckets before it asks Redis again, so that a partition costs one request a
// Timeout per second, not every request.
const DefaultRecheck = time.Second

// Quota is a shed.QuotaStore whose per-client token buckets the processes of a fleet
// share in Redis: a client limited to 100 requests a second gets 100 across the
// fleet, not 100 from each replica. Each decision is one round trip: GCRA in one Lua
// script, by github.com/go-redis/redis_rate, keyed by Prefix + "quota:" + the
// client's key.
//
// When Redis is out of reach or slower than Timeout, the decision is taken from
// buckets of this process (shed.LocalQuotas: each client then gets its rate from each
// replica), a event.Fleet says so, and Redis is asked again after
// DefaultRecheck.
//
// Set it as shed.Quota.Store.
type Quota struct {
	s     *Store
	lim   *redis_rate.Limiter
	local *shed.LocalQuotas
	link  link
	down  atomic.Int64 // unix ns until which Redis is not asked
}

// QuotaOptions configure a [Quota].
type QuotaOptions struct {
	// Name names the quota store in its events. Required.
	Name string
	// MaxLocalClients is the most clients the local fallback tracks; 0 means
	// shed.DefaultMaxClients.
	MaxLocalClients int
}

// NewQuota returns a fleet quota store on s.
func NewQuota(s *Store, o QuotaOptions) (*Quota, error) {
	name, maxLocalClients := o.Name, o.MaxLocalClients
	switch {
	case s == nil:
		return nil, fmt.Errorf("%w: %s: the Store is nil", ErrInvalidOptions, name)
	case name == "":
		return nil, fmt.Errorf("%w: the quota's name is empty", ErrInvalidOptions)
	case maxLocalClients < 0:
		return nil, fmt.Errorf("%w: %s: MaxLocalClients is %d; want ≥ 0", ErrInvalidOptions, name, maxLocalClients)
	}
	q := &Quota{s: s, lim: redis_rate.NewLimiter(s.rdb), local: shed.NewLocalQuotas(maxLocalClients)}
	q.link = link{s: s, name: name, kind: KindQuota, stage: shed.Kind}
	return q, nil
}

// Allow takes a token from key's bucket of rate r and burst burst across the fleet,
// or reports how long until there is one.
func (q *Quota) Allow(ctx context.Context, key string, r rate.Limit, burst int) (time.Duration, bool) {
	now := time.Now()
	if now.UnixNano() < q.down.Load() {
		return q.local.Allow(ctx, key, r, burst)
	}
	ctx, cancel := q.s.bounded(context.WithoutCancel(ctx))
	defer cancel()
	// GCRA's emission interval is Period / Rate: one request every 1/r seconds.
	res, err := q.lim.Allow(ctx, q.s.prefix+"quota:"+key, redis_rate.Limit{Rate: 1, Burst: burst,
		Period: time.Duration(float64(time.Second) / float64(r))})
	q.link.result(err)
	if err != nil {
		q.down.Store(now.Add(DefaultRecheck).UnixNano())
		return q.local.Allow(ctx, key, r, burst)
	}
	if res.Allowed > 0 {
		return 0, true
	}
	return res.RetryAfter, false
}

// Shared reports whether the quota decides on the fleet's buckets now; false while
// Redis is out of reach.
func (q *Quota) Shared() bool { return !q.link.Local() }

var _ shed.QuotaStore = (*Quota)(nil)
