// Package fleet shares Backstop's state among the processes of a fleet through the
// Redis they already run: one circuit breaker ([NewBreaker]), one retry budget
// ([NewRatio], or gRFC A6's token bucket, [NewTokenBucket]) and one per-client quota
// for shed ([NewQuota]) for every replica, instead of one per process. Fifty replicas
// with a breaker each probe a dead dependency fifty times per open period and retry
// fifty budgets' worth; with these, once.
//
// Each policy is a Backstop policy like its local twin — same kinds, so the ordering
// rules apply; same events and errors — and keeps that twin inside: a call never waits
// on Redis (the breaker and budgets count locally and sync in the background every
// SyncInterval; only the quota and a half-open breaker's probe lease ask Redis on a
// call's path, within Timeout). When Redis is down, slow or cut off, each policy
// decides on its local twin, reports a policy.EventFleet, and shares again when Redis
// answers.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	s := fleet.MustNew(rdb, fleet.Options{Observer: obs})
//	br, err := fleet.NewBreaker(s, "payments", breaker.Options{})
//	...
//	bu, err := fleet.NewRatio(s, "payments", budget.RatioOptions{})
//	...
//	p := policy.MustWrap(deadline.MustNew(2*time.Second), br, bu, retry.MustNew(retry.Options{}))
//	// register br.Local() with breaker.Registry and metrics as any breaker
//
// Times that every process must agree on — when a breaker reopens, which bucket of
// the window a count falls in — are the Redis server's, so the hosts' clocks need not
// agree. Keys begin with Options.Prefix and carry a {hash tag} per policy, so a
// policy's keys share one Redis Cluster slot.
package fleet
