package goredis

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/policy"
)

// NewClient returns a go-redis client for opt whose commands run through p, with the
// client's own retries turned off when p holds a retry ([DisableClientRetries]), so a
// call path has one retry owner, and with opt.ContextTimeoutEnabled set, so the
// deadlines of p bound each round trip. opt is copied.
func NewClient(opt redis.Options, p *policy.Pipeline, o Options) (*redis.Client, error) {
	h, err := NewHook(p, o)
	if err != nil {
		return nil, err
	}
	if owns(p) {
		DisableClientRetries(&opt)
	}
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(&opt)
	c.AddHook(h)
	return c, nil
}

// DisableClientRetries turns off go-redis's own retries in opt before a client is
// built from it: MaxRetries -1 (no command retried; go-redis reads 0 as its default of
// 3) and DialerRetries 1 (one dial per connection; go-redis reads 0 as 5). Use it
// with [NewHook] for a client [NewClient] does not build (a FailoverClient, a Ring's
// shards). A cluster client's redirects (MOVED, ASK, MaxRedirects) stay with it: they
// send a command to the node that owns its slot, which only go-redis knows. That loop
// (ClusterOptions.MaxRedirects, 3 by default) also resends a command after a network
// error or a refusal such as TRYAGAIN or CLUSTERDOWN, a command that may have run
// included: under a Backstop retry a cluster command may reach a server up to
// (MaxRedirects + 1) × the retry's attempts times, and this function cannot turn that
// off without turning off the redirects. Give a cluster client's pipeline no retry of
// its own (a breaker and deadlines only), or mark its non-idempotent commands with
// care.
func DisableClientRetries(opt *redis.Options) {
	opt.MaxRetries = -1
	opt.DialerRetries = 1
}

// owns reports whether p holds a retry: Backstop then owns the retries of its calls.
func owns(p *policy.Pipeline) bool {
	for _, st := range p.Explain().Stack {
		if st.Place.OwnsRetries {
			return true
		}
	}
	return false
}

// Explain says, in one line, how many times a command may reach the server when a
// client built with opt (a built client's Options(), where go-redis has read -1 as
// 0) runs commands through p: Backstop's attempts times the client's own.
func Explain(opt *redis.Options, p *policy.Pipeline) string {
	client := max(opt.MaxRetries, 0) + 1
	dials := max(opt.DialerRetries, 1)
	if opt.DialerRetries <= 0 {
		dials = 5
	}
	attempts := p.Explain().MaxAttempts
	owner := "one retry owner"
	if attempts > 1 && client > 1 {
		owner = "two retry owners: call DisableClientRetries"
	}
	return fmt.Sprintf("go-redis: at most %d sends per command that may run twice (%d by Backstop × %d by the client), %d per other command (%d on a refusal or a failed dial), dials per connection: %d; %s",
		attempts*client, attempts, client, client, attempts*client, dials, owner)
}
