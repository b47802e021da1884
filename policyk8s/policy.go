package policyk8s

import (
	"time"
)

// Policy is a resource that shapes the traffic to a backend rather than routing it:
// a Gateway API XBackendTrafficPolicy (its retry budget), an Istio DestinationRule
// (outlier detection, connection pool, retry budget), or a Service carrying
// Linkerd's retry and timeout annotations, which the routes to it inherit. Read it
// as a value.
type Policy struct {
	// Source is SourceGatewayAPI, SourceIstio or SourceLinkerd; Kind
	// "XBackendTrafficPolicy", "DestinationRule" or "Service".
	Source, Kind, Namespace, Name string
	// File, Line and Column are where the resource is written.
	File         string
	Line, Column int
	// Targets are what it attaches to, as written: "Service/api" for a targetRef,
	// a DestinationRule's host, a Service's own name.
	Targets []string
	// Budget is the retry budget it sets; nil for none.
	Budget *Budget
	// Breaker is a DestinationRule's outlierDetection; nil for none.
	Breaker *Breaker
	// Bulkhead is a DestinationRule's connectionPool; nil for none.
	Bulkhead *Bulkhead
	// Annotations are a Service's Linkerd retry and timeout annotations, by name.
	Annotations map[string]string
	// Defaults and Unsupported are as a [Route]'s.
	Defaults    []string
	Unsupported []string

	annotations map[string]string
	services    []string       // its targets, fully qualified
	pos         map[string]pos // its fields, by path from the document's root
}

// Breaker is an Istio outlierDetection: Envoy ejects a host from the load balancing
// pool after consecutive errors, for a time that grows with each ejection.
type Breaker struct {
	// Consecutive5xxErrors ejects a host after this many 5xx in a row (Istio's
	// default 5; 0 turns it off).
	Consecutive5xxErrors int
	// ConsecutiveGatewayErrors ejects a host after this many 502, 503 or 504 in a
	// row (default 0: off).
	ConsecutiveGatewayErrors int
	// Interval is how often hosts are scanned (default 10s).
	Interval time.Duration
	// BaseEjectionTime is the first ejection's length, multiplied by the number of
	// ejections (default 30s).
	BaseEjectionTime time.Duration
	// MaxEjectionPercent caps the share of hosts ejected (default 10).
	MaxEjectionPercent int
}

// Bulkhead is an Istio connectionPool. A zero count is Istio's default, 2^32−1:
// no limit.
type Bulkhead struct {
	// MaxConnections is tcp.maxConnections: connections per host.
	MaxConnections int
	// MaxPendingRequests is http.http1MaxPendingRequests: requests queued for a
	// connection.
	MaxPendingRequests int
	// MaxRequests is http.http2MaxRequests: requests active to the destination.
	MaxRequests int
	// MaxRetries is http.maxRetries: retries outstanding to all hosts at once.
	MaxRetries int
	// ConnectTimeout is tcp.connectTimeout (default 10s).
	ConnectTimeout time.Duration
}

// Position returns where one of the policy's fields is written, named from the
// document's root ("spec.trafficPolicy.outlierDetection"); a field left out gives
// the deepest field above it that is written.
func (p *Policy) Position(field string) (line, col int) {
	for f := field; f != ""; f = parent(f) {
		if q, ok := p.pos[f]; ok {
			return q.line, q.col
		}
	}
	return p.Line, p.Column
}

// budgetAt places a budget at field of p.
func (p *Policy) budgetAt(b *Budget, field string) *Budget {
	b.Source, b.File = p.Source, p.File
	b.Line, b.Column = p.Position(field)
	return b
}
