// Package policyk8s reads the retry and timeout policy that Kubernetes resources
// give a mesh or gateway — Gateway API routes, Istio's VirtualService and
// DestinationRule, Linkerd's annotations — into the projects' own Go types, counts
// the tries each route makes exactly as its source documents them, and converts
// them into Backstop stacks ([Import]), so that a whole call path can be
// explained and linted across the mesh and the application.
//
// # What it reads
//
// [Parse] reads one file of multi-document YAML or JSON; [Load] a file or a
// directory, recursively (*.yaml, *.yml, *.json), one document at a time. Each
// document is checked against its kind's Go type (sigs.k8s.io/gateway-api v1 and
// apisx/v1alpha1, istio.io/client-go networking/v1): a field the type does not
// have is refused with the field it was meant to be ("did you mean retry?"), a
// value of the wrong kind is refused with how to write it. Every problem is
// reported, each a [*ConfigError] placed at file:line:column, joined in the
// input's order. A YAML syntax error stops the file; the YAML reader names its
// line only, so it is placed at the line's first character, and a parser error at
// the line where the block it was reading starts. Another kind (Deployment,
// ConfigMap, a Service without Linkerd's annotations) is skipped with a [Note];
// List objects are read item by item.
//
// Each rule becomes a [Route]: Tries (the first included), RetryOn, PerTryTimeout,
// Timeout, Backoff, the retry Budget of a policy attached to its backends, and the
// fields it leaves to defaults (Route.Defaults) or that Backstop cannot carry
// (Route.Unsupported). [Route.WorstCase] is the longest a request can take at the
// route's layer; [Route.Explain] says it in the source's words.
//
// # Gateway API (HTTPRoute, GRPCRoute, XBackendTrafficPolicy)
//
//	field                          read as                           counting rule / default
//	rules[].retry.attempts         Tries = attempts + 1              "the maximum number of times an individual request
//	                                                                 … should be retried": retries. Absent: implementation-
//	                                                                 specific, Tries 0. Minimum 1.
//	rules[].retry (absent)         Tries = 1                         no retry as written; an implementation may retry by its
//	                                                                 own defaults (Explain says so)
//	rules[].retry.codes            RetryOn                           400–599; absent: implementation-specific
//	rules[].retry.backoff          Backoff                           "the minimum duration … between retry attempts": a
//	                                                                 minimum, so waits are unbounded above (WorstCase 0
//	                                                                 without a request timeout); absent: implementation-specific
//	rules[].timeouts.request       Timeout                           absent: implementation-specific; 0s disables it
//	rules[].timeouts.backendRequest PerTryTimeout                    each try; must be ≤ request
//	XBackendTrafficPolicy          Budget of routes to the targeted  budget {percent 20, interval 10s} and minRetryRate
//	  .spec.retryConstraint        Services                          {count 10, interval 1s} by default (the CRD's)
//
// A GRPCRoute rule has no retry or timeouts field in the Gateway API: Tries 1.
// Durations are GEP-2257's (1 to 4 parts, units h, m, s, ms).
//
// # Istio (VirtualService, DestinationRule)
//
//	field                          read as                           counting rule / default
//	http[].retries.attempts        Tries = attempts + 1              "Number of retries … The maximum possible number of
//	                                                                 requests made will be 1 + attempts". 0 or absent inside
//	                                                                 retries: no retry (Istio returns no policy).
//	http[].retries (absent)        Tries = 3                         Istio's default policy: 2 retries on connect-failure,
//	                                                                 refused-stream, unavailable, cancelled and 503
//	                                                                 (IstioDefaultRetryOn); the mesh config may change it
//	http[].retries.retryOn         RetryOn                           Envoy conditions and HTTP statuses; absent: the default's
//	http[].retries.perTryTimeout   PerTryTimeout                     absent: none (the route timeout)
//	http[].retries.backoff         Backoff                           absent: 25ms; Envoy waits up to (2^n − 1) × base before
//	                                                                 retry n, at most 10 × base
//	http[].timeout                 Timeout                           absent or 0s: disabled
//	DestinationRule .trafficPolicy Policy: outlierDetection →        consecutive5xxErrors 5, interval 10s, baseEjectionTime
//	                               Breaker; connectionPool →         30s, maxEjectionPercent 10; pool limits 2^32−1;
//	                               Bulkhead; retryBudget → Budget    retryBudget percent 20, minRetryConcurrency 3,
//	                                                                 budgetInterval 0 (requests in flight only)
//
// Durations are read as Istio writes them ("1h", "1m", "1s", "1ms", "1.5s"). A
// destination host or DestinationRule host is a Service name read in the
// resource's namespace ("reviews" is reviews.<ns>.svc.cluster.local).
//
// # Linkerd (annotations, 2.16 and later)
//
//	annotation                     read as                           counting rule / default
//	retry.linkerd.io/limit         Tries = limit + 1                 "the maximum number of times a request can be
//	                                                                 retried"; absent: 1; "0" is read as absent
//	retry.linkerd.io/http          RetryOn (HTTPRoute)               statuses, ranges (500-504), gateway-error, 5xx
//	retry.linkerd.io/grpc          RetryOn (GRPCRoute)               cancelled, deadline-exceeded, internal,
//	                                                                 resource-exhausted, unavailable
//	retry.linkerd.io/timeout       PerTryTimeout                     absent: timeouts.backendRequest, else none
//	timeout.linkerd.io/request     Timeout                           the route's wins over its timeouts.request;
//	                                                                 a Service's only where the rule sets none
//	timeout.linkerd.io/response,   Unsupported                       not retried, not carried
//	  /idle
//
// Retries are on when limit, timeout or a condition of the route's kind is set, as
// Linkerd's policy controller reads them. Linkerd's documentation names no back-off;
// its policy controller gives each retry an exponential one, fully jittered, from
// LinkerdBackoff (25 ms) to LinkerdMaxBackoff (250 ms), and so does WorstCase. With
// no condition written, the proxy's own defaults apply, which Linkerd does not
// document: RetryOn is empty and Defaults names the condition annotation. A Service
// with retry annotations and no route attached to it is a route of its own (Kind
// "Service"): Linkerd applies them to all traffic to the Service.
// A route with Linkerd annotations has Source SourceLinkerd. The annotations may sit
// on the parent Service of a mesh route (parentRefs kind Service): a route without
// retry (or timeout) annotations of its own takes the Service's, and
// Route.InheritedFrom names it. retry.linkerd.io/http on a GRPCRoute, /grpc on an
// HTTPRoute, are ignored by Linkerd and noted; alone, they turn no retry on. Annotation values must be strings:
// an unquoted number is refused, as Kubernetes refuses it.
//
// # Memory
//
// Load keeps only what it returns: for each route its fields and the positions of
// its rule and metadata. Measured on 10 000 files of one HTTPRoute each
// (TestLoad_TenThousandManifests logs it), the Set holds about 3 KB per route.
package policyk8s
