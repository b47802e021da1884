// Package grpcmetrics marks a gRPC channel's client calls so that a policyotel
// Observer records gRFC A96's retry metrics for them: grpc.client.call.retries,
// grpc.client.call.transparent_retries, grpc.client.call.hedges and
// grpc.client.call.retry_delay, each with grpc.method and grpc.target.
//
// # Wiring
//
// Put [DialOptions] before policygrpc's, so that its interceptors stand outside the
// ones that run the pipeline, and observe the pipeline with the same Observer:
//
//	obs, err := policyotel.New(mp)
//	p = p.With(policy.Observe(obs))
//	opts := append(grpcmetrics.DialOptions(obs, grpcmetrics.Options{}), policygrpc.DialOptions(p, policygrpc.Options{})...)
//	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
//	conn, err := grpc.NewClient(target, opts...)
//
// Each call starts a [policyotel.GRPCCall] in its context; the pipeline's events
// count its attempts and time the gaps between them, a stats handler counts gRPC's
// transparent retries, and the call's end records the metrics once. Placed inside
// policygrpc's interceptors, the interceptors would start a call per attempt that no
// event reaches: each would record a retry delay of 0 and nothing else.
//
// # Attributes
//
// grpc.method is the method's full name without its leading slash for a method
// generated from a service definition (grpc.StaticMethod among the call's options), and
// "other" for any other, as gRFC A66 bounds it; grpc.target is the channel's canonical
// target (grpc.ClientConn.CanonicalTarget).
package grpcmetrics
