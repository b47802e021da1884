package policyotel

import (
	"context"
	"sync"
	"time"

	"github.com/backstop-go/backstop/clock"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/retry"
)

// The instruments of gRFC A96 (OTel metrics for retries), recorded once per gRPC
// client call at its end. See the package doc's gRPC section.
const (
	MetricGRPCRetries            = "grpc.client.call.retries"
	MetricGRPCTransparentRetries = "grpc.client.call.transparent_retries"
	MetricGRPCHedges             = "grpc.client.call.hedges"
	MetricGRPCRetryDelay         = "grpc.client.call.retry_delay"
)

// The bucket boundaries gRFC A96 recommends: [1, 5] for retries and hedges, and up to
// 10 for transparent retries. The delay has gRFC A66's latency buckets (seconds).
var (
	retryBounds       = []float64{1, 2, 3, 4, 5}
	transparentBounds = []float64{1, 2, 3, 4, 5, 10}
	latencyBounds     = []float64{0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002,
		0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03,
		0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25, 0.3, 0.4, 0.5, 0.65,
		0.8, 1, 2, 5, 10, 20, 50, 100}
)

// grpcInstruments are the A96 histograms.
type grpcInstruments struct {
	retries, transparent, hedges metric.Int64Histogram
	delay                        metric.Float64Histogram
}

func newGRPCInstruments(m metric.Meter) (*grpcInstruments, []error) {
	g := &grpcInstruments{}
	var errs []error
	count := func(name, unit, desc string, bounds []float64) metric.Int64Histogram {
		h, err := m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	g.retries = count(MetricGRPCRetries, "{retry}",
		"Number of retries during the client call. If there were no retries, 0 is not reported.", retryBounds)
	g.transparent = count(MetricGRPCTransparentRetries, "{transparent_retry}",
		"Number of transparent retries during the client call. If there were no transparent retries, 0 is not reported.", transparentBounds)
	g.hedges = count(MetricGRPCHedges, "{hedge}",
		"Number of hedges during the client call. If there were no hedges, 0 is not reported.", retryBounds)
	var err error
	g.delay, err = m.Float64Histogram(MetricGRPCRetryDelay, metric.WithUnit("s"),
		metric.WithDescription("Total time of delay while there is no active attempt during the client call."),
		metric.WithExplicitBucketBoundaries(latencyBounds...))
	errs = append(errs, err)
	return g, errs
}

// A GRPCCall gathers what gRFC A96 records of one gRPC client call. That is the
// attempts the pipeline's retry or hedge made, the transparent retries gRPC made below
// it, and the time no attempt was in flight between them. Start one with
// [Observer.StartGRPCCall]; package grpcmetrics does it for a channel.
//
// The events of a pipeline feed the GRPCCall found in their context if the Observer
// that started it observes the pipeline, alone or among others. A GRPCCall is safe for
// concurrent use: a hedge's attempts report from goroutines of their own.
type GRPCCall struct {
	o     *Observer
	inst  *grpcInstruments
	clock clock.Clock
	attrs metric.MeasurementOption // grpc.method, grpc.target

	mu          sync.Mutex // guards the fields below
	last        int        // the highest attempt number started
	hedged      bool       // the attempts after the first were hedges
	active      int        // attempts in flight
	idleSince   time.Time  // when the last attempt in flight ended; zero before the first ends
	delay       time.Duration
	transparent int
	ended       bool
}

type grpcCallKey struct{}

// StartGRPCCall returns ctx carrying a new GRPCCall for a call of method on the channel
// of target, and the call.
//
// The method is gRFC A66's grpc.method: the full name without its leading slash
// ("pkg.Service/Method"). It is "other" for a method not generated from a service
// definition, so its values form a bounded set. The target is the channel's canonical
// target ("dns:///host:443"). The clock times the delays between attempts; nil means
// clock.System().
//
// Start the call outside the pipeline that runs it (before policygrpc's interceptor),
// so that the pipeline's events carry it. End it with [GRPCCall.End].
func (o *Observer) StartGRPCCall(ctx context.Context, method, target string, clk clock.Clock) (context.Context, *GRPCCall) {
	if !o.grpcCalls.Load() {
		o.grpcCalls.Store(true)
	}
	c := &GRPCCall{o: o, inst: o.grpc, clock: clock.Or(clk), attrs: o.grpcAttrs(method, target)}
	return context.WithValue(ctx, grpcCallKey{}, c), c
}

// grpcAttrs returns the attribute set {grpc.method, grpc.target}, made once per pair.
// Both come from bounded sets: generated methods or "other", and the channels' targets.
func (o *Observer) grpcAttrs(method, target string) metric.MeasurementOption {
	key := [2]string{method, target}
	if a, ok := o.grpcSets.Load(key); ok {
		return a.(metric.MeasurementOption)
	}
	a, _ := o.grpcSets.LoadOrStore(key, metric.WithAttributeSet(attribute.NewSet(
		attribute.String("grpc.method", method), attribute.String("grpc.target", target))))
	return a.(metric.MeasurementOption)
}

// GRPCCallFrom returns the GRPCCall ctx carries, or nil.
func GRPCCallFrom(ctx context.Context) *GRPCCall {
	if ctx == nil {
		return nil
	}
	c, _ := ctx.Value(grpcCallKey{}).(*GRPCCall)
	return c
}

// TransparentRetry counts a transparent retry: gRPC sent an attempt again, below the
// interceptors, because the first never reached the server application.
func (c *GRPCCall) TransparentRetry() {
	c.mu.Lock()
	c.transparent++
	c.mu.Unlock()
}

// End records the call's A96 metrics, the first time it is called. It records retries
// or hedges and transparent retries if there were any (0 is not reported), and the
// delay always. Later calls do nothing.
func (c *GRPCCall) End(ctx context.Context) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	extra, hedged, transparent, delay := c.last-1, c.hedged, c.transparent, c.delay
	c.mu.Unlock()
	switch {
	case extra > 0 && hedged:
		c.inst.hedges.Record(ctx, int64(extra), c.attrs)
	case extra > 0:
		c.inst.retries.Record(ctx, int64(extra), c.attrs)
	}
	if transparent > 0 {
		c.inst.transparent.Record(ctx, int64(transparent), c.attrs)
	}
	c.inst.delay.Record(ctx, delay.Seconds(), c.attrs)
}

// observe counts e, an event of the pipeline running the call.
//
// An attempt numbered above 1 is a retry, or a hedge if the call is hedged. A hedge
// timer's retry_scheduled (Reason retry.ReasonHedge) says the call is hedged. So does
// an attempt that starts while another is in flight. The delay sums the spans with no
// attempt in flight that ended when the next attempt started. gRPC's own call tracers
// time it so.
func (c *GRPCCall) observe(e event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Kind {
	case event.AttemptStart:
		c.last = max(c.last, e.Attempt)
		if e.Attempt > 1 && c.active > 0 {
			c.hedged = true
		}
		if c.active == 0 && !c.idleSince.IsZero() {
			c.delay += c.clock.Now().Sub(c.idleSince)
			c.idleSince = time.Time{}
		}
		c.active++
	case event.AttemptEnd:
		if c.active > 0 {
			c.active--
		}
		if c.active == 0 {
			c.idleSince = c.clock.Now()
		}
	case event.RetryScheduled:
		if e.Reason == retry.ReasonHedge {
			c.hedged = true
		}
	}
}

// observeGRPC hands e to the GRPCCall its context carries, if o started it. Until o has
// started one, it costs an atomic load, not a walk up the context.
func (o *Observer) observeGRPC(e event.Event) {
	if !o.grpcCalls.Load() {
		return
	}
	if c := GRPCCallFrom(e.Context); c != nil && c.o == o {
		c.observe(e)
	}
}
