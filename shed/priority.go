package shed

import (
	"context"
	"net/http"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/internal/httpattempt"
)

// Priority orders work for shedding: sheddable work goes first, critical work last.
// The zero value is PriorityDefault.
type Priority int8

// The priorities, lowest first.
const (
	PrioritySheddable Priority = -1 // retries, prefetches, batch work: shed first, never queued
	PriorityDefault   Priority = 0
	PriorityCritical  Priority = 1 // served from the queue before anything else
)

// String returns "sheddable", "default" or "critical".
func (p Priority) String() string {
	switch {
	case p < 0:
		return "sheddable"
	case p > 0:
		return "critical"
	}
	return "default"
}

type priorityKey struct{}

// WithPriority returns a copy of ctx carrying p, for work admitted through the
// Shedder as a policy (queue consumers, gRPC handlers).
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// priorityOf returns the priority of work run under ctx: the one set with
// WithPriority, lowered to sheddable if ctx is a retry from upstream.
func priorityOf(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	if n, upstream, ok := callpath.Attempt(ctx); ok && upstream && n > 1 {
		p = min(p, PrioritySheddable)
	}
	return p
}

// requestPriority returns a request's priority and attempt: the Priority option's
// verdict, lowered to sheddable for a retry (an attempt header above 1). An untrusted
// header can lower a request's priority, never raise it.
func (s *Shedder) requestPriority(r *http.Request) (Priority, int, bool) {
	p := PriorityDefault
	if s.opts.Priority != nil {
		p = s.opts.Priority(r)
	}
	n, ok := httpattempt.FromHeader(r.Header)
	if ok && n > 1 {
		p = min(p, PrioritySheddable)
	}
	return p, n, ok
}
