package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/retry"
)

// reply is an error reply as go-redis returns it: a redis.Error.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	const (
		retried   = "retried"
		client    = "client error, not retried"
		permanent = "permanent"
		plain     = "not retried, counted"
		ctxErr    = "left to the retry"
	)
	cases := []struct {
		err  error
		safe bool
		want string
	}{
		{reply("LOADING Redis is loading the dataset in memory"), false, retried},
		{reply("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."), false, retried},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), false, retried},
		{reply("CLUSTERDOWN The cluster is down"), false, retried},
		{reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), false, retried},
		{fmt.Errorf("wrapped: %w", reply("LOADING")), false, retried},
		{reply("BUSYGROUP Consumer Group name already exists"), true, client}, // not BUSY
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), true, client},
		{reply("ERR syntax error"), true, client},
		{reply("READONLY You can't write against a read only replica."), false, retried},
		{reply("NOREPLICAS Not enough good replicas to write."), false, retried},
		{reply("ERR max number of clients reached"), false, retried},
		{reply("OOM command not allowed when used memory > 'maxmemory'."), true, plain},
		{dial, false, retried}, // never sent
		{io.EOF, true, retried},
		{io.EOF, false, permanent}, // may have run
		{reset, true, retried},
		{reset, false, permanent},
		{context.DeadlineExceeded, true, ctxErr},
		{context.DeadlineExceeded, false, permanent},
		{redis.ErrClosed, true, plain},
		{redis.ErrPoolTimeout, true, plain},
	}
	for _, tc := range cases {
		got := goredis.Classify(tc.err, tc.safe)
		m := fault.Of(got)
		var is string
		switch {
		case m.Permanent:
			is = permanent
		case m.Client:
			is = client
		case m.Retryable:
			is = retried
		case errors.Is(got, context.DeadlineExceeded):
			is = ctxErr
		default:
			is = plain
		}
		if is != tc.want {
			t.Errorf("Classify(%q, safe=%v) is %s, want %s", tc.err, tc.safe, is, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("Classify(%q, safe=%v) = %v, which does not unwrap to it", tc.err, tc.safe, got)
		}
		if tc.want == retried && !retry.DefaultShouldRetry(got) {
			t.Errorf("retry.DefaultShouldRetry(Classify(%q, safe=%v)) = false, want true", tc.err, tc.safe)
		}
		if tc.want != retried && tc.want != ctxErr && retry.DefaultShouldRetry(got) {
			t.Errorf("retry.DefaultShouldRetry(Classify(%q, safe=%v)) = true, want false", tc.err, tc.safe)
		}
	}
	if goredis.Classify(nil, false) != nil {
		t.Error("Classify(nil) != nil")
	}
}

func TestDefaultSafe(t *testing.T) {
	cases := []struct {
		args []any
		want bool
	}{
		{[]any{"get", "k"}, true},
		{[]any{"mget", "a", "b"}, true},
		{[]any{"hgetall", "h"}, true},
		{[]any{"set", "k", "v"}, true},
		{[]any{"set", "k", "v", "ex", 10}, true},
		{[]any{"set", "k", "v", "NX"}, false}, // a second run replies "not set"
		{[]any{"set", "k", "v", "get"}, false},
		{[]any{"set", "k", "v", "keepttl"}, false},
		{[]any{"mset", "a", 1}, true},
		{[]any{"incr", "n"}, false},
		{[]any{"del", "k"}, false}, // replies 1, then 0
		{[]any{"lpush", "l", "x"}, false},
		{[]any{"eval", "return 1", 0}, false},
		{[]any{"eval_ro", "return 1", 0}, true},
		{[]any{"blpop", "l", 0}, false},
	}
	for _, tc := range cases {
		if got := goredis.DefaultSafe(redis.NewCmd(context.Background(), tc.args...)); got != tc.want {
			t.Errorf("DefaultSafe(%v) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestNewHook_RefusesNilPipeline(t *testing.T) {
	_, err := goredis.NewHook(nil, goredis.Options{})
	if !errors.Is(err, goredis.ErrInvalidOptions) {
		t.Fatalf("NewHook(nil) = %v, want ErrInvalidOptions", err)
	}
	_, err = goredis.NewClient(redis.Options{}, nil, goredis.Options{})
	if !errors.Is(err, goredis.ErrInvalidOptions) {
		t.Fatalf("NewClient(nil pipeline) = %v, want ErrInvalidOptions", err)
	}
}
