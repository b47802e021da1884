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
// also resends a write whose reply was lost: an INCR whose reply is lost once runs
// twice on the server and reports one increment; through this package it runs once,
// and its error says it may have run ([Once] resolves it).
//
// [NewClient] builds the client with its own retries off ([DisableClientRetries])
// when the pipeline holds a retry, and adds a [Hook] that runs every command and
// every pipeline of commands through the pipeline, one round trip per attempt:
//
//	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), br, policy.Must(retry.New(retry.Options{})),
//		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 200 * time.Millisecond})), policy.Name("redis"))
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
// The error replies retried are those go-redis's own MaxRetries retries, and BUSY,
// which go-redis does not retry although the server says it ran nothing; MOVED and
// every other reply are retried by neither. After a broken connection or a timeout,
// go-redis sends any command again, and Backstop only one that may run twice. A
// conformance test runs both owners against real servers, class by class.
//
// Blocking commands (BLPOP, XREAD BLOCK) wait on the server: run them through a
// pipeline without a per-attempt timeout, or on a client of their own.
//
// # Lost replies
//
// When a connection breaks after a command was sent, the command ran if the reply
// was lost, and did not if the request was; the client cannot tell which. [Once]
// makes such a command safe to send again. A Lua script runs it and sets a token
// key to its reply, in one atomic step, unless the token is set already: then the
// command does not run again and the kept reply is returned. Once sends under
// [Idempotent], so the hook retries it after a lost reply; when every attempt
// failed, Once called again with the same token later resolves the outcome:
//
//	token := "once:" + requestID // unique per logical call
//	n, err := goredis.Once(ctx, rdb, token, time.Hour, "incr", "visits").Int64()
//	if err != nil {
//		// unknown, for now: send Once(ctx, rdb, token, …) again when the server is
//		// back; it runs the INCR once, or returns the reply of the run that happened
//	}
package goredis
