// Package goredis runs go-redis v9 commands through a Backstop pipeline, so a call
// path that reaches Redis has one retry owner: Backstop's, not Backstop's and the
// client's together.
//
// # Who owns the retries
//
// go-redis retries on its own: MaxRetries (3 by default) resends a command after a
// broken connection, a timeout or a LOADING, MASTERDOWN, TRYAGAIN reply, and
// DialerRetries (5 by default) dials each connection again. Put a Backstop retry
// around such a client and the two multiply: 3 attempts × 4 sends = 12 sends of one
// GET to a replica that lost its primary, where either alone makes 4 or 3. go-redis
// also resends a write whose reply was lost: an INCR whose replies never arrive runs
// 4 times on the server, 12 under a Backstop retry, once through this package.
//
// [NewClient] builds the client with its own retries off ([DisableClientRetries])
// when the pipeline holds a retry, and adds a [Hook] that runs every command and
// every pipeline of commands through the pipeline, one round trip per attempt:
//
//	p, err := policy.Wrap(deadline.MustNew(time.Second), br, retry.MustNew(retry.Options{}),
//		deadline.MustPerAttempt(200*time.Millisecond), policy.Name("redis"))
//	rdb, err := goredis.NewClient(redis.Options{Addr: addr}, p, goredis.Options{})
//
// The pipeline's deadlines bound each round trip (NewClient sets
// ContextTimeoutEnabled), its breaker counts commands, and under a caller that already
// owns the call path a command makes one attempt, as any Backstop pipeline does.
// [Explain] says how many times one command may reach the server.
//
// What stays with go-redis: connections and their pool, a cluster client's redirects
// (MOVED, ASK: they route a command, only go-redis knows where), pub/sub, and what a
// command means.
//
// # What is retried
//
// [Classify] reads each round trip's error. A reply by which the server says it did
// not run the command ([Refused]: LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN,
// READONLY, NOREPLICAS, max clients) and a failed dial are retried for every
// command: it did not run. A broken connection
// or a timeout leaves unknown whether it ran, so only a command that may run twice is
// retried: one [Options].Safe accepts ([DefaultSafe]: the reads, SET without NX, XX,
// GET or KEEPTTL, MSET), or one sent under [Idempotent]. Every other error reply is
// the command's fault, not the server's (fault.Client: no breaker counts it), and is
// not retried. A pipeline of commands is retried only if every command in it may run
// twice, or when its dial failed.
//
// Blocking commands (BLPOP, XREAD BLOCK) wait on the server: run them through a
// pipeline without a per-attempt timeout, or on a client of their own.
package goredis
