// Package shed is a server-side load shedder: it admits work up to a concurrency
// limit that follows the server's latency, lets a short queue absorb bursts, and
// answers the rest at once with 429 (or 503) and a Retry-After, so that well-behaved
// clients back off by themselves and the work that is admitted finishes fast.
//
// # Admission
//
// Each request takes a slot if fewer than the limit are in flight (an atomic
// compare-and-swap, no lock). The limit is adaptive by default, in the gradient
// family of Netflix concurrency-limits and Envoy's adaptive concurrency filter: every
// sample window (100 ms and 10 requests) the mean latency of the work that succeeded
// is compared with a baseline, the best window of the last 100 (the third best once
// twenty are known).
//
// The limit starts at its largest (1000) and comes down only on evidence of
// congestion, so a healthy server is refused nothing while the limit learns: 5 000
// requests/s of 20 ms (100 in flight) from a cold start, or a warm server stepped
// from 500 to 5 000 requests/s.
//
//   - Latency within Tolerance (1.5×) and the limit full: the limit grows to what
//     Little's law says the load needs (arrival rate × latency, plus 25 %), at most
//     doubling a window, and more gently as latency nears the tolerance.
//   - Latency beyond it with half the limit in use: the limit moves Smoothing (70 %)
//     of the way to limit × 1.5 × baseline / latency, at most halving a window.
//     Latency over 3 × Tolerance with less in use brings the limit down to twice the
//     in-flight peak first, so a queue that builds under the high start is cut
//     within a few windows.
//   - A slow-down that a lower limit does not cure (a slower dependency) becomes the
//     new baseline within a few windows and the limit returns; a latency that sits near
//     the tolerance is checked by a probe at half the limit for two windows.
//   - Failures are not timed (a handler answering 5xx because its dependency is down
//     says nothing about this server's load), and a window that used less than half
//     the limit, or did not fill it, changes nothing.
//
// # CPU
//
// A CPU-bound server's queue is where no concurrency limit sees it: requests wait
// for a CPU in the run queue before the shedder reads them, while the handlers in
// flight run to completion one after another. So the shedder also watches its
// process's CPUs, on by default. A window finds them the bound when more than 16
// goroutines a CPU are runnable (/sched/goroutines/runnable:goroutines) and the 90th
// percentile of the waits for a CPU (/sched/latencies:seconds) is over
// Limit.SchedLatency (20 ms). From then on it refuses new work (ReasonCPU) at the
// share the CPUs cannot serve: 1 − capacity ÷ arrivals. Arrivals count the requests
// still queued in front of it; capacity is the most completed in a window lately,
// or GOMAXPROCS ÷ the baseline latency for work that holds its CPU. A trim on the
// queue corrects the share: up while the queue grows, down while it is short. The
// guard stands down once the demand fits. Critical work is never refused; sheddable
// work goes first. The runnable count is a metric of Go 1.26: built with Go 1.25 the
// guard sees no queue and never acts.
//
// Busy neighbours — other processes, a container's CPU quota — lengthen the waits
// but not this process's own queue, and the guard does not act on them; a window in
// which goroutines waited for a CPU does not lower the limit either. Batch work in
// the same process does fill the queue: a process that runs CPU-heavy batch work
// beside its server turns the guard off with Limit.SchedLatency = [SchedLatencyOff]
// (-1).
//
// Measured on a machine of 2 cores (examples/shedding -duration 4s, zero Options): a
// handler of 20 ms from a cold start is refused nothing at 500, 2 000 and 5 000
// requests/s, nor when stepped from 500 to 5 000; a handler burning 2 ms of CPU on
// one core, offered 3× what it serves, keeps 82–94 % of its closed-loop capacity
// with none timed out and an admitted p99 of 0.15–0.45 s (without the shedder: 72 %
// of requests time out at 10 s). Beside two busy processes the overload keeps 82 %
// and the 20 ms handler stepped to 5 000 requests/s is refused up to 5 % of that
// second.
//
// Options.Limit.Fixed fixes the limit instead. The adaptive limit's settings are the
// fields of Options.Limit ([LimitOptions]):
//
//	| setting         | default | meaning                                   |
//	|-----------------|---------|-------------------------------------------|
//	| Initial         | 1000    | limit before any measurement (= Max)      |
//	| Min             | 1       | never below                               |
//	| Max             | 1000    | never above                               |
//	| Smoothing       | 0.7     | how far a congested window moves the limit|
//	| Tolerance       | 1.5     | latency rise tolerated over the baseline  |
//	| Headroom        | 4       | least growth of a full window             |
//	| Window          | 100 ms  | sample window (and MinSamples 10)         |
//	| LatencySamples  | 256     | latencies timed a window; a busy server   |
//	|                 |         | times one request in k, at random         |
//	| SchedLatency    | 20 ms   | wait for a CPU over which a long queue    |
//	|                 |         | is refused; SchedLatencyOff (-1): off     |
//	| baseline        | the best of the last 100 window means     |
//
// # What holds a slot
//
// A request holds its slot while it does this server's work. It gives the slot back
// while it waits on something else: a retry's backoff in the handler, a read of the
// request's body from the client (a slow upload cannot fill the limit), a call through
// policyhttp's transport to a dependency (which sheds for itself), and, for gRPC
// streams, a wait for the client's next message — each through the callpath.Pauser this
// shedder puts in the request's context (for a request admitted while half the limit
// or more is in use, or sent by a retry owner upstream: a new context costs a copy of
// the request, and on a server with room a held slot costs nothing). Pauses nest. A
// paused request is still timed in full, but while paused it is not in flight, and a
// window whose in-flight peak stayed under half the limit moves nothing. Taking the
// slot back needs no admission (the
// work was admitted), so in flight can pass the limit by as many requests as were
// paused at once, until they finish: bound them with the server's own timeouts
// (ReadTimeout for bodies, the pipeline's deadline for dependencies) and its
// connection limit.
//
// # Queue
//
// A request that finds no free slot waits in a short queue (Options.Queue.Max 64) timed in the
// manner of CoDel, as Facebook describes in "Fail at Scale": it waits at most the
// interval, but once a standing queue exists (the queue has not been empty for the
// interval) only 5 ms, and the newest request is served first (LIFO), since the oldest
// are the likeliest to have been given up on. The interval is 100 ms for fast work and
// 20 of the work's baseline latencies for slower work, at most 500 ms: four workers of
// 25 ms near their capacity keep a queue that drains and re-forms every few requests,
// and refusing from it after 100 ms loses answers the workers had time for — the
// refused come back as retries, and the server answers fewer calls than it would
// with no shedder at all. Critical requests leave the queue first. While requests
// wait, a slot that frees is handed to them: a newcomer queues behind them (or, if
// sheddable, is refused) rather than take it. A request whose deadline would pass
// before a typical request completes is not queued.
//
// # Priorities
//
// [PriorityCritical], [PriorityDefault] and [PrioritySheddable] come from
// Options.Priority. Retries — requests whose Backstop-Attempt, x-envoy-attempt-count
// or grpc-previous-rpc-attempts header says they are not a first attempt — are
// sheddable whatever it says: the header can lower a request's priority, never raise
// it. Sheddable work may fill only SheddableShare (75 %) of the limit, but always at
// least one slot, and is never queued: an idle server admits a retry, and under
// pressure retries are shed before first attempts.
//
// # Options that meet
//
// Defaults give way to the values set: Limit.Max 10 alone starts the limit at 10,
// Limit.Initial 20 alone at 20, Queue.Target 200 ms alone raises the interval to
// 200 ms.
// Values set that contradict each other are refused with an error naming them, and so
// is Limit.Fixed together with any field of the adaptive limit.
//
// # Rejections
//
// [Middleware] answers a refused request with status 429 (or 503), Retry-After in
// whole seconds and an application/problem+json body, without reading the request
// body and without allocating. The Retry-After is the shedder's estimate of when a
// refused client will be admitted: with a share ρ of requests refused over the last
// second, a client that comes back each second waits 1 / (1 − ρ) s on average — 1 s
// while under a third are refused, 2 s at half, 10 s at 90 % — back to 1 s after a
// calm second. The share counts 10 admitted requests besides those seen, so that a
// handful of requests is no evidence of pressure: a lone client refused while one
// slot is busy reads 1 refusal as 9 %, not 100 %, and is told 1 or 2 s each time it
// comes back; a second of 1 000 refusals reads as 99 %. It is sent as a whole number of seconds drawn uniformly from
// [base, base + ⌈base/2⌉], never above Refusal.MaxRetryAfter (30 s) jitter included (1 or 2
// at base 1 s; 16…24 at 16 s), so that rejected clients do not return together:
// 1 000 clients refused over one second come back with a peak of about 1.2× the mean
// per 100 ms (BenchmarkRetryAfterSpread). A refusal for want of a slot also tells
// Backstop callers (callpath.HeaderRetryAfterMillis) the same estimate with a slot's
// time in place of the second: twice the baseline latency times the base, in steps of
// 10 ms, at most a second.
// Per-client quotas (Options.Quota, on golang.org/x/time/rate) answer 429 with the
// time until the client's next token. Requests whose Key names no client share one
// bucket (Quota.NoKey: or are refused, or — by choice — exempt), and a key longer than
// MaxQuotaKey is kept as its hash, so neither a missing header nor long keys get
// around the quota or fill memory; an open Options.Breaker answers 503 with the
// breaker's remaining open time.
//
// Every request is either served or answered: the shedder never drops, hangs or times
// out a request without a response. [Shedder.Stats] counts both sides.
//
// # As a policy
//
// A Shedder is also a policy of kind [Kind] for servers that are not HTTP (queue
// consumers, gRPC handlers): policy.Wrap(shedder, deadline, breaker). It stands
// outermost and never with a retry (rule O5). A refusal is a *policy.RejectError:
// its Policy is "shed", its Reason a [Reason]'s name, and its RetryAfter the
// Retry-After the middleware would send. It matches [ErrShed] and
// policy.ErrRejected. Refusals share their errors (one per reason and Retry-After):
// treat them as read-only.
//
// Every refusal is reported as an event.Shed whose Stage is [Kind].
package shed

// Kind is the shed's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "shed"
