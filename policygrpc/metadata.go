package policygrpc

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"

	"github.com/backstop-go/backstop/callpath"
)

// Metadata keys, lower case as gRPC carries them.
const (
	// MetadataAttempt is Backstop's attempt number (callpath.HeaderAttempt).
	MetadataAttempt = "backstop-attempt"
	// MetadataPreviousAttempts is gRPC's count of the attempts before this one (A6).
	MetadataPreviousAttempts = "grpc-previous-rpc-attempts"
	// MetadataEnvoyAttempt is Envoy's 1-based attempt count.
	MetadataEnvoyAttempt = "x-envoy-attempt-count"
	// MetadataPushback is the server's pushback trailer, in milliseconds (A6).
	MetadataPushback = "grpc-retry-pushback-ms"
	// MetadataEnvoyMaxRetries is Envoy's bound on the retries its router makes
	// (callpath.HeaderEnvoyMaxRetries). Attempts made under a retry owner send "0".
	MetadataEnvoyMaxRetries = "x-envoy-max-retries"
)

// withAttemptMetadata returns ctx with the outgoing attempt metadata of the call path's
// owner, as policyhttp's transport sends its header: the attempt number of a retry in
// this process, or 1 under an owner in another process (this process makes the call
// once: the ownership is carried on, not the number). Under no owner the keys are
// removed, even if the caller copied them from an incoming call.
//
// With noRetries, an owned attempt also tells an Envoy beneath not to retry
// ([MetadataEnvoyMaxRetries] "0"). A caller's own value of that key is kept
// otherwise.
func withAttemptMetadata(ctx context.Context, noRetries bool) context.Context {
	n, owned := callpath.Outgoing(ctx)
	noRetries = noRetries && owned
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		// The common case: no outgoing metadata yet, nothing to remove.
		mds, outs := &attemptMD, &backgroundOutgoing
		if noRetries {
			mds, outs = &attemptMDNoRetries, &backgroundOutgoingNoRetries
		}
		switch {
		case !owned:
			return ctx
		case n >= 1 && n < len(mds):
			if ctx == backgroundAttempts[n] {
				return outs[n]
			}
			return metadata.NewOutgoingContext(ctx, mds[n])
		}
		kv := []string{MetadataAttempt, count(n), MetadataPreviousAttempts, count(n - 1)}
		if noRetries {
			kv = append(kv, MetadataEnvoyMaxRetries, "0")
		}
		return metadata.AppendToOutgoingContext(ctx, kv...)
	}
	md.Delete(MetadataAttempt) // md is a copy: FromOutgoingContext copies
	md.Delete(MetadataPreviousAttempts)
	if owned {
		md.Set(MetadataAttempt, count(n))
		if n > 1 {
			md.Set(MetadataPreviousAttempts, count(n-1))
		}
	}
	if noRetries {
		md.Set(MetadataEnvoyMaxRetries, "0")
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// attemptMD are the outgoing metadata of small attempt numbers, made once and shared:
// gRPC only reads an outgoing context's metadata, and metadata.FromOutgoingContext
// hands out copies. backgroundAttempts are the contexts a retry marks its attempts
// with under a bare context.Background() (callpath.WithAttempt makes them once), and
// backgroundOutgoing the same with their metadata, so that a call under
// context.Background() carries its attempt metadata with no allocation at all.
//
// The NoRetries twins also carry MetadataEnvoyMaxRetries "0".
var attemptMD, backgroundAttempts, backgroundOutgoing = func() (md [17]metadata.MD, bg, out [17]context.Context) {
	for n := 1; n < len(md); n++ {
		md[n] = metadata.MD{MetadataAttempt: {count(n)}}
		if n > 1 {
			md[n][MetadataPreviousAttempts] = []string{count(n - 1)}
		}
		bg[n] = callpath.WithAttempt(context.Background(), n)
		out[n] = metadata.NewOutgoingContext(bg[n], md[n])
	}
	return md, bg, out
}()

var attemptMDNoRetries, backgroundOutgoingNoRetries = func() (md [17]metadata.MD, out [17]context.Context) {
	for n := 1; n < len(md); n++ {
		md[n] = attemptMD[n].Copy()
		md[n][MetadataEnvoyMaxRetries] = []string{"0"}
		out[n] = metadata.NewOutgoingContext(backgroundAttempts[n], md[n])
	}
	return md, out
}()

// counts are the decimal forms of small attempt numbers, so that marking an attempt
// formats nothing.
var counts = func() (c [17]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

func count(n int) string {
	if n >= 0 && n < len(counts) {
		return counts[n]
	}
	return strconv.Itoa(n)
}

// attemptOf reads the attempt metadata of an incoming call with callpath.ParseAttempt.
func attemptOf(ctx context.Context) (int, bool) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return 0, false
	}
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return callpath.ParseAttempt(first(MetadataAttempt), first(MetadataEnvoyAttempt), first(MetadataPreviousAttempts))
}
