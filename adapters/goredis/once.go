package goredis

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// once runs a command unless its token is set, and sets the token to the command's
// reply (JSON) in the same atomic step; a token already set returns the reply kept.
// A nil reply reaches Lua as false, which RESP3 would return as a boolean: it is
// returned as nil.
var once = redis.NewScript(`
local reply
local kept = redis.call('GET', KEYS[1])
if kept then
	reply = cjson.decode(kept)
else
	reply = redis.call(unpack(ARGV, 2))
	redis.call('SET', KEYS[1], cjson.encode(reply), 'PX', ARGV[1])
end
if reply == false then
	return nil
end
return reply
`)

// Once sends the command args (as for Client.Do) so that it runs at most once per
// token, however often it is sent: it makes a write that is not idempotent (INCR,
// LPUSH, XADD) safe to retry after a lost reply, and resolves the outcome of one.
//
// A Lua script runs the command and sets the key token to its reply, in one atomic
// step, unless token is set already; then the command does not run again and the
// first reply is returned. The command is sent under [Idempotent], so the hook
// retries it after a broken connection or a timeout: the retry either runs it, if
// the lost attempt never did, or returns the reply of the one that did. When every
// attempt failed, the outcome stays unknown until Once is called again with the same
// token, after the server is back: that call gives the reply of the run, or runs the
// command once.
//
// token is a key the caller makes unique per logical call (a request's id), kept for
// ttl: longer than any call may be resolved, and at least a millisecond. The reply
// is kept as JSON: integers above 2^53 lose precision on a replay. The command's
// keys are not declared to the script: on a cluster, give token the same hash tag
// as those keys ("{user:1}:once:42" with "{user:1}:n"). An error reply leaves the
// token unset: the command did not run.
func Once(ctx context.Context, c redis.Scripter, token string, ttl time.Duration, args ...any) *redis.Cmd {
	if token == "" || ttl < time.Millisecond || len(args) == 0 {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("%w: Once needs a token, a ttl of 1 ms or more and a command; got token %q, ttl %v, %d arguments",
			ErrInvalidOptions, token, ttl, len(args)))
		return cmd
	}
	return once.Run(Idempotent(ctx), c, []string{token}, append([]any{ttl.Milliseconds()}, args...)...)
}
