// Package fleet shares Backstop's state among the processes of a fleet through the
// Redis they already run: one circuit breaker ([NewBreaker]), one retry budget
// ([NewRatio], or gRFC A6's token bucket, [NewTokenBucket]) and one per-client quota
// for shed ([NewQuota]) for every replica, instead of one per process. Fifty replicas
// with a breaker each probe a dead dependency fifty times per open period and retry
// fifty budgets' worth; with these, once.
//
// Each policy is a Backstop policy like its local twin — same placement, so the
// ordering rules apply; same events and errors — and keeps that twin inside: a call
// never waits on Redis (the breaker and budgets count locally and sync in the
// background every SyncInterval; only the quota and a half-open breaker's probe lease
// ask Redis on a call's path, within Timeout). When Redis is down, slow or cut off,
// each policy decides on its local twin, reports a event.Fleet, and shares again when
// Redis answers. The event's Source is the policy's name. Its Reason is the policy's
// kind, [KindBreaker], [KindBudget] or [KindQuota], so a breaker and a budget named
// for the same dependency stay apart. Its Stage is the Placement.Kind of the stage
// the policy serves: "breaker", "budget", or "shed" for a quota.
//
// A breaker refuses as a local one does, with a *policy.RejectError that matches
// breaker.ErrOpen. While another process holds the probe lease, its Reason is
// "half_open" and its RetryAfter is OpenTimeout. The breaker's events have Stage
// "breaker".
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	s := policy.Must(fleet.New(rdb, fleet.Options{Observer: obs}))
//	br, err := fleet.NewBreaker(s, breaker.Options{Name: "payments"})
//	if err != nil {
//		return err
//	}
//	bu, err := fleet.NewRatio(s, budget.RatioOptions{Name: "payments"})
//	if err != nil {
//		return err
//	}
//	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), br, bu, policy.Must(retry.New(retry.Options{}))))
//	// register br.Local() with breaker.Registry and metrics as any breaker
//
// # State in Redis that no fleet policy wrote
//
// Redis is shared, and keys outlive processes. A policy never obeys what it could not
// have written: a probe lease always carries an expiry (the breaker's OpenTimeout),
// and a lease without one, with a longer one, or of another open episode is treated
// as absent; a breaker's open time is at most MaxOpenTimeout × (1 + OpenJitter) ahead;
// a key of another type or a field that is not a finite number is treated as
// absent. The script that meets such state repairs it, and the policy reports a
// event.Fleet to local whose Err matches [ErrBadState], deciding on its own
// until its next sync finds the repaired state.
//
// # Budgets shared fairly
//
// A [Ratio] grants each process a share of the fleet's headroom at every sync and
// holds the grant in Redis until that process syncs again, so processes that start
// together do not each take a share of the same floor.
//
// Times that every process must agree on — when a breaker reopens, which bucket of
// the window a count falls in — are the Redis server's, so the hosts' clocks need not
// agree.
//
// # Redis Cluster, Sentinel and failover
//
// The Store takes any redis.UniversalClient: a redis.NewClusterClient, or a
// redis.NewFailoverClient on Sentinel, serves as a single server does. Keys begin
// with Options.Prefix and carry a {hash tag} of the policy's kind and name, so a
// policy's keys share one slot, and each script (EVALSHA) names every key it touches
// in that slot. Different policies fall in different slots: 800 policies spread over
// 796 slots and all three primaries of a test cluster. A Prefix holding a brace would
// put every policy in one slot, and is refused.
//
// go-redis follows MOVED and ASK replies. A script that meets TRYAGAIN (its slot
// migrating), CLUSTERDOWN or a dead primary fails within Timeout, and the policy
// decides on its local twin: callers see no error. go-redis rereads the slot map on
// a redirect but not when a primary dies, so a failed call makes the Store ask its
// ClusterClient to reread it; the policy shares again as soon as the replica serves.
//
// Measured on loopback (cluster-node-timeout 500 ms; Sentinel down-after 500 ms),
// from SIGKILL of the primary holding every policy's keys, five runs each: a
// Cluster replica served after 1.4–2.0 s, breakers and budgets shared again after
// 1.5–1.9 s, quotas after 2.0–3.0 s (a quota asks again a second after it fell
// back); with Sentinel, 0.85–0.96 s, 0.9–1.5 s and 1.0–2.0 s. State written before
// the kill and replicated was kept; a breaker that trips while its policy is local
// republishes its state at the first sync that reaches Redis. Writes Redis had not
// yet replicated are lost with the primary: an open breaker's state comes back at
// its process's next sync, while a token bucket's lost failures do not.
package fleet
