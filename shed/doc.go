// Package shed is a server-side load shedder. It admits work up to a concurrency limit
// that follows the server's latency, and lets a short queue absorb bursts. It answers
// the rest at once with 429 (or 503) and a Retry-After. Well-behaved clients then back
// off by themselves, and the work that is admitted finishes fast.
//
// # Admission
//
// Each request takes a slot if fewer than the limit are in flight. Taking one is an
// atomic compare-and-swap, with no lock. The limit is adaptive by default, in the
// gradient family of Netflix concurrency-limits and Envoy's adaptive concurrency
// filter. Every sample window (100 ms and 10 requests), the mean latency of the work
// that succeeded is compared with a baseline. The baseline is the best window of the
// last 100 (the third best once twenty are known).
//
// The limit starts at its largest (1000) and comes down only on evidence of congestion.
// So a healthy server is refused nothing while the limit learns. That holds for 5 000
// requests/s of 20 ms (100 in flight) from a cold start. It holds too for a warm server
// stepped from 500 to 5 000 requests/s.
//
//   - Latency within Tolerance (1.5×) and the limit full: the limit grows to what
//     Little's law says the load needs. That is arrival rate × latency, plus 25 %. It
//     at most doubles a window, and grows more gently as latency nears the tolerance.
//   - Latency beyond it with half the limit in use: the limit moves Smoothing (70 %) of
//     the way to limit × 1.5 × baseline / latency. It at most halves a window. Latency
//     over 3 × Tolerance with less in use first brings the limit down to twice the
//     in-flight peak. So a queue that builds under the high start is cut within a few
//     windows.
//   - A slow-down that a lower limit does not cure (a slower dependency) becomes the
//     new baseline within a few windows, and the limit returns. A latency that sits
//     near the tolerance is checked by a probe at half the limit for two windows.
//   - Failures are not timed. A handler answering 5xx because its dependency is down
//     says nothing about this server's load. A window that used less than half the
//     limit, or did not fill it, changes nothing.
//
// # How the limit learns
//
// The baseline is one of the best recent windows, not their average. An average would
// drift upwards with the queue it tolerates. One of the best follows real improvements
// within a few windows. It follows real slow-downs after 100 windows, or sooner (see
// above).
//
// Each window enters the baseline at its mean plus the mean's standard error, and is
// judged at its mean less it. Noisy latencies are why. Take a database whose query
// times are drawn from an exponential distribution. The very best of a hundred windows'
// means of ten is a fraction of the mean that no concurrency achieves. Against it most
// windows would look congested. The limit would fall to one in flight in front of four
// workers. The standard error lifts a window of few or scattered samples. The third
// best leaves out the one or two windows luck made faster still. With no noise both are
// the mean.
//
// A baseline learnt while the server already queued would let the limit sit well past
// the knee. A probe finds it. Envoy's adaptive concurrency filter re-measures its
// minimum RTT the same way, on a timer. Here only a latency that sits near the
// tolerance starts a probe, so a server with room never pays for one. A probe that
// finds the baseline right makes the next one wait twice as long. A server near its
// capacity sits in that band for good. A probe every fifth window would idle its
// workers a tenth of the time.
//
// Only successes are timed. A fast failure (a 5xx of a handler whose dependency is
// down) says nothing about this server's load. A baseline learnt from it would make
// every success after the dependency returns look slow.
//
// A busy server times only about LatencySamples requests a window, one in k at random.
// The mean of a uniform random sample of a window's latencies estimates its mean as
// well as all of them do. For a few hundred samples it is within a few per cent.
// Reading the clock twice is most of what admitting a request costs.
//
// # CPU
//
// A CPU-bound server's queue is where no concurrency limit sees it. Requests wait for a
// CPU in the run queue before the shedder reads them. Meanwhile the handlers in flight
// run to completion one after another. So the shedder also watches its process's CPUs,
// on by default. A window finds the CPUs the bound on two signs. More than 16
// goroutines a CPU are runnable (/sched/goroutines/runnable:goroutines). And the 90th
// percentile of the waits for a CPU (/sched/latencies:seconds) is over
// Limit.SchedLatency (20 ms).
//
// From then on the shedder refuses new work (ReasonCPU) at the share the CPUs cannot
// serve: 1 − capacity ÷ arrivals. Arrivals count the requests still queued in front of
// it. Capacity is the most completed in a window lately. For work that holds its CPU,
// it is at least GOMAXPROCS ÷ the baseline latency. A trim on the queue corrects the
// share: up while the queue grows, down while it is short. The guard stands down once
// the demand fits. Critical work is never refused; sheddable work goes first. The
// runnable count is a metric of Go 1.26. Built with Go 1.25, the guard sees no queue
// and never acts.
//
// Busy neighbours, such as other processes or a container's CPU quota, lengthen the
// waits. They do not lengthen this process's own queue, and the guard does not act on
// them. A window in which goroutines waited for a CPU does not lower the limit either.
// Batch work in the same process does fill the queue. A process that runs CPU-heavy
// batch work beside its server turns the guard off with Limit.SchedLatency =
// [SchedLatencyOff] (-1).
//
// The shedder was measured on a machine of 2 cores (examples/shedding -duration 4s,
// zero Options). A handler of 20 ms from a cold start is refused nothing at 500, 2 000
// and 5 000 requests/s. Nor is it when stepped from 500 to 5 000. A handler burning
// 2 ms of CPU on one core is offered 3× what it serves. It keeps 82–94 % of its
// closed-loop capacity, with none timed out and an admitted p99 of 0.15–0.45 s. Without
// the shedder, 72 % of requests time out at 10 s. Beside two busy processes the
// overload keeps 82 %. There the 20 ms handler stepped to 5 000 requests/s is refused
// up to 5 % of that second.
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
// while it waits on something else. That may be a retry's backoff in the handler, or a
// read of the request's body from the client (a slow upload cannot fill the limit). It
// may be a call through policyhttp's transport to a dependency, which sheds for itself.
// For gRPC streams, it may be a wait for the client's next message. Each goes through
// the callpath.Pauser this shedder puts in the request's context.
//
// The shedder puts it there for a request admitted while half the limit or more is in
// use, or sent by a retry owner upstream. A new context costs a copy of the request,
// and on a server with room a held slot costs nothing. Pauses nest. A paused request is
// still timed in full, but while paused it is not in flight. A window whose in-flight
// peak stayed under half the limit moves nothing.
//
// Taking the slot back needs no admission, since the work was admitted. So in flight
// can pass the limit by as many requests as were paused at once, until they finish.
// Bound them with the server's own timeouts and its connection limit: ReadTimeout for
// bodies, the pipeline's deadline for dependencies.
//
// # Queue
//
// A request that finds no free slot waits in a short queue (Options.Queue.Max 64). The
// queue is timed in the manner of CoDel, as Facebook describes in "Fail at Scale". A
// request waits at most the interval. Once a standing queue exists (the queue has not
// been empty for the interval), it waits only 5 ms. The newest request is served first
// (LIFO), since the oldest are the likeliest to have been given up on.
//
// The interval is 100 ms for fast work. For slower work it is 20 of the work's baseline
// latencies, at most 500 ms. Take four workers of 25 ms near their capacity. They keep
// a queue that drains and re-forms every few requests. Refusing from it after 100 ms
// loses answers the workers had time for. The refused come back as retries, and the
// server answers fewer calls than it would with no shedder at all. The bound of 500 ms
// is half of a typical per-attempt timeout (1 s). A request held longer has likely been
// given up on by the time it is served.
//
// Critical requests leave the queue first. While requests wait, a slot that frees is
// handed to them. A newcomer queues behind them (or, if sheddable, is refused) rather
// than take it. A request whose deadline would pass before a typical request completes
// is not queued.
//
// # Priorities
//
// [PriorityCritical], [PriorityDefault] and [PrioritySheddable] come from
// Options.Priority. Retries are sheddable whatever it says. A retry is a request whose
// Backstop-Attempt, x-envoy-attempt-count or grpc-previous-rpc-attempts header says it
// is not a first attempt. The header can lower a request's priority, never raise it.
// Sheddable work may fill only SheddableShare (75 %) of the limit, but always at least
// one slot. It is never queued. So an idle server admits a retry, and under pressure
// retries are shed before first attempts.
//
// # Options that meet
//
// Defaults give way to the values set. Limit.Max 10 alone starts the limit at 10, and
// Limit.Initial 20 alone at 20. Queue.Target 200 ms alone raises the interval to
// 200 ms. Values set that contradict each other are refused with an error naming them.
// So is Limit.Fixed together with any field of the adaptive limit.
//
// # Rejections
//
// [Middleware] answers a refused request at once. It sends status 429 (or 503),
// Retry-After in whole seconds and an application/problem+json body. It does not read
// the request body and does not allocate.
//
// The Retry-After is the shedder's estimate of when a refused client will be admitted.
// Say a share ρ of requests was refused over the last second. A client that comes back
// each second then waits 1 / (1 − ρ) s on average. That is 1 s while under a third are
// refused, 2 s at half and 10 s at 90 %. It is back to 1 s after a calm second.
//
// The share counts 10 admitted requests besides those seen, so that a handful of
// requests is no evidence of pressure. A lone client refused while one slot is busy
// reads 1 refusal as 9 %, not 100 %. It is told 1 or 2 s each time it comes back. A
// second of 1 000 refusals reads as 99 %.
//
// The Retry-After is sent as a whole number of seconds, drawn uniformly from [base,
// base + ⌈base/2⌉]. Jitter included, it is never above Refusal.MaxRetryAfter (30 s).
// That gives 1 or 2 at base 1 s, and 16…24 at 16 s. So rejected clients do not return
// together. 1 000 clients refused over one second come back with a peak of about 1.2×
// the mean per 100 ms (BenchmarkRetryAfterSpread). Whole seconds are what RFC 9110's
// delay-seconds can say. Clients that arrive over time then return spread over the
// whole range.
//
// Per-client quotas (Options.Quota, on golang.org/x/time/rate) answer 429 with the time
// until the client's next token. Requests whose Key names no client share one bucket.
// Quota.NoKey can have them refused instead or, by choice, exempt. A key longer than
// MaxQuotaKey is kept as its hash. So neither a missing header nor long keys get around
// the quota or fill memory. An open Options.Breaker answers 503 with the breaker's
// remaining open time.
//
// Every request is either served or answered. The shedder never drops, hangs or times
// out a request without a response. [Shedder.Stats] counts both sides.
//
// # Retry-After for Backstop callers
//
// A refusal for want of a slot also tells Backstop callers when to come back, in
// callpath.HeaderRetryAfterMillis. It is the same estimate, with a slot's time in place
// of Retry-After's second. A slot's time is about two requests' time: twice the
// baseline latency. So the header says twice the baseline latency times the base, in
// steps of 10 ms, at most a second.
//
// On a server that refuses only briefly, that is two requests' time. A slot frees that
// soon, and a caller with a short deadline can still use it. While refusals go on, it
// grows with them. A Backstop caller retries once per call path, and after such a
// refusal at most a few times, sheddable, within its deadline. Retry-After's whole
// seconds are for everyone else.
//
// An open breaker's refusal carries the breaker's remaining open time in the header
// instead. The breaker probes sooner than whole seconds say. So a Backstop caller waits
// the real time, plus one request's time (the baseline latency). It comes back when the
// probe has answered, not while it is in flight.
//
// # As a policy
//
// A Shedder is also a policy of kind [Kind] for servers that are not HTTP, such as
// queue consumers and gRPC handlers: policy.Wrap(shedder, deadline, breaker). It stands
// outermost and never with a retry (rule O5). A refusal is a *policy.RejectError. Its
// Policy is "shed", its Reason a [Reason]'s name, and its RetryAfter the Retry-After
// the middleware would send. It matches [ErrShed] and policy.ErrRejected. Refusals
// share their errors (one per reason and Retry-After), so treat them as read-only.
//
// Every refusal is reported as an event.Shed whose Stage is [Kind].
package shed

// Kind is the shed's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "shed"
