package goredis

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/fault"
)

// Refused lists the error replies by which a Redis server says it did not run a
// command and may run it soon: [Classify] marks them retryable for every command.
//
//   - LOADING: the server is loading its dataset into memory.
//   - BUSY: a script or function is running past busy-reply-threshold.
//   - TRYAGAIN: a multi-key command during resharding (Cluster).
//   - CLUSTERDOWN: the cluster cannot serve the slot now.
//   - MASTERDOWN: a replica lost its primary and does not serve stale data.
//   - READONLY: a write reached a replica — after a failover, a client still
//     connected to the old primary (go-redis closes that connection, so the retry
//     dials again).
//   - NOREPLICAS: too few replicas acknowledge writes (min-replicas-to-write).
//
// "ERR max number of clients reached" (the server at maxclients) is one too, by its
// text: its first word is ERR.
var Refused = [...]string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "NOREPLICAS"}

// maxClients is the reply of a server at its maxclients.
const maxClients = "ERR max number of clients reached"

// Classify marks err, the error of one round trip, with what it means for a retry
// and for a breaker; safe says whether the commands sent may run twice. nil stays nil.
//
//   - An error reply in [Refused]: fault.Retryable — the command did not run.
//   - A failed dial (a *net.OpError whose Op is "dial"): fault.Retryable — nothing was
//     sent.
//   - Any other error reply (WRONGTYPE, ERR, NOSCRIPT, NOAUTH, BUSYGROUP…) but OOM:
//     fault.Client — the command was wrong, not the server, so a breaker does not
//     count it; never retried.
//   - OOM, redis.ErrClosed, redis.ErrPoolTimeout: unmarked — not retried, counted by
//     a breaker (the client's pool waits on a slow server).
//   - The context's end: unmarked when safe (a per-attempt timeout is retried, the
//     caller's deadline or cancellation never is), else fault.Permanent.
//   - Any other error — a broken connection, a read timeout: the command may have run.
//     fault.Retryable when safe, else fault.Permanent: no layer retries it, this
//     process or another.
func Classify(err error, safe bool) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !isNetwork(err) {
		word, _, _ := strings.Cut(rerr.Error(), " ")
		for _, r := range Refused {
			if word == r {
				return fault.Retryable(err)
			}
		}
		if strings.HasPrefix(rerr.Error(), maxClients) {
			return fault.Retryable(err)
		}
		if word == "OOM" {
			return err
		}
		return fault.Client(err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fault.Retryable(err)
	}
	switch {
	case errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout):
		return err
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		if safe {
			return err
		}
		return fault.Permanent(err)
	case safe:
		return fault.Retryable(err)
	}
	return fault.Permanent(err)
}

// isNetwork reports whether err, which says it is a Redis error reply, is a network
// error too (go-redis's own timeouts are both in some versions).
func isNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}
