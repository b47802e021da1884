package goredis

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// readOnly holds the commands that only read: running one twice returns what once
// would have, at the time of the second.
var readOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range strings.Fields(`
		get mget getrange substr strlen getbit bitcount bitpos lcs
		exists type ttl pttl expiretime pexpiretime touch dbsize randomkey keys scan dump
		hget hmget hgetall hkeys hvals hlen hexists hstrlen hrandfield hscan
		lrange llen lindex lpos
		smembers sismember smismember scard srandmember sinter sintercard sunion sdiff sscan
		zrange zrangebyscore zrangebylex zrevrange zrevrangebyscore zrevrangebylex zrank
		zrevrank zscore zmscore zcard zcount zlexcount zrandmember zscan zinter zunion zdiff
		pfcount geopos geodist geohash georadius_ro georadiusbymember_ro geosearch
		xrange xrevrange xlen xinfo xpending
		ping echo time info memory object command
		eval_ro evalsha_ro fcall_ro`) {
		m[name] = true
	}
	return m
}()

// DefaultSafe is the default [Options].Safe. It accepts the commands that only read
// (GET, MGET, HGETALL, ZRANGE, SCAN, PING, EVAL_RO… — XREAD and the other blocking
// reads excepted: they wait on the server, and a per-attempt timeout would cut the
// wait short), and two writes that leave the same state and reply when run twice:
// MSET, and SET without NX, XX, GET or KEEPTTL. Every other command may have done
// something that running it again would do twice (INCR, LPUSH, a script) or reply
// differently the second time (DEL, HSET, SET NX), and is not.
func DefaultSafe(cmd redis.Cmder) bool {
	name := cmd.Name()
	switch {
	case readOnly[name]:
		return true
	case name == "mset":
		return true
	case name == "set":
		for _, a := range cmd.Args()[min(3, len(cmd.Args())):] {
			s, ok := a.(string)
			if !ok {
				continue
			}
			switch strings.ToLower(s) {
			case "nx", "xx", "get", "keepttl":
				return false
			}
		}
		return true
	}
	return false
}
