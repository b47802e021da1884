package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/internal/missing"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// cluster is a real Redis Cluster for one test (three primaries, three replicas),
// stopped with it.
type cluster struct {
	*fleettest.Cluster
	admin *redis.ClusterClient
}

// startCluster starts a Redis Cluster for t; it is stopped when t ends. Without
// redis-server the test skips, saying how to install it.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	c, err := fleettest.StartCluster(ctx, t.TempDir(), 3)
	if errors.Is(err, fleettest.ErrNoRedis) {
		missing.Skip(t, "redis-server", "apt-get install redis-server")
	}
	require.NoError(t, err) // ErrNoRedisCli says which package brings redis-cli
	t.Cleanup(c.Stop)
	cl := &cluster{Cluster: c}
	cl.admin = cl.client(t)
	return cl
}

// client returns a cluster client with a pool of its own, as another process would
// have; hooks see every command sent to a node.
func (c *cluster) client(t testing.TB, hooks ...redis.Hook) *redis.ClusterClient {
	r := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true,
		DialTimeout: time.Second, PoolSize: 4, NewClient: func(o *redis.Options) *redis.Client {
			n := redis.NewClient(o)
			for _, h := range hooks {
				n.AddHook(h)
			}
			return n
		}})
	t.Cleanup(func() { r.Close() })
	return r
}

// slots returns the slot map as the first running node knows it.
func (c *cluster) slots(t testing.TB) []fleettest.SlotRange {
	t.Helper()
	var last error
	for _, a := range c.Addrs() {
		s, err := c.Slots(bg, a)
		if err == nil {
			return s
		}
		last = err
	}
	t.Fatal(last)
	return nil
}

// primaryOf returns the primary that serves key, by CLUSTER KEYSLOT and the slot map.
func (c *cluster) primaryOf(t testing.TB, slots []fleettest.SlotRange, key string) (slot int, primary string) {
	t.Helper()
	n, err := c.admin.ClusterKeySlot(bg, key).Result()
	require.NoError(t, err)
	for _, s := range slots {
		if int(n) >= s.Start && int(n) <= s.End {
			return int(n), s.Primary
		}
	}
	t.Fatalf("slot %d of %s is not in the slot map %v", n, key, slots)
	return 0, ""
}

// policyKeys returns the keys each kind of fleet policy named name keeps.
func policyKeys(s *Store, name string) map[string][]string {
	return map[string][]string{
		"breaker":     {s.key(KindBreaker, name), s.key(KindBreaker, name, "probe")},
		"ratio":       {s.key(KindBudget, name, "window"), s.key(KindBudget, name, "members"), s.key(KindBudget, name, "grants")},
		"tokenbucket": {s.key("tokens", name)},
		"quota":       {"rate:" + s.prefix + "quota:" + name}, // redis_rate's prefix, then ours
	}
}

// TestCluster_KeysSpreadOverThePrimaries: the keys of 200 policies of each kind, with
// different names, fall in many slots and on every primary, while each policy's own
// keys share one slot (its scripts are EVALSHA with every key in one slot).
func TestCluster_KeysSpreadOverThePrimaries(t *testing.T) {
	c := startCluster(t)
	s := policy.Must(New(c.admin, Options{}))
	slots := c.slots(t)
	perPrimary := map[string]int{}
	distinct := map[int]bool{}
	const names = 200
	for i := range names {
		for kind, keys := range policyKeys(s, fmt.Sprintf("dependency-%d", i)) {
			first, primary := c.primaryOf(t, slots, keys[0])
			for _, k := range keys[1:] {
				slot, _ := c.primaryOf(t, slots, k)
				require.Equal(t, first, slot, "%s: %s and %s are in different slots", kind, keys[0], k)
			}
			perPrimary[primary]++
			distinct[first] = true
		}
	}
	t.Logf("800 policies: %d distinct slots; per primary %v", len(distinct), perPrimary)
	require.Len(t, perPrimary, 3, "every primary holds some policies")
	for p, n := range perPrimary {
		require.Greater(t, n, 4*names/3/2, "primary %s holds %d of %d policies: far from a third", p, n, 4*names)
	}
	require.Greater(t, len(distinct), 4*names*9/10, "the policies' keys fall in many slots")

	// A prefix holding a hash tag of its own would put every policy in its slot.
	_, err := New(c.admin, Options{Prefix: "{backstop}:"})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// fleetLog records every event.Fleet of a process, with the time it arrived.
type fleetLog struct {
	mu  sync.Mutex
	got []fleetEvent
}

type fleetEvent struct {
	at                 time.Time
	source, reason, to string
	err                error
}

func (l *fleetLog) Observe(e event.Event) {
	if e.Kind != event.Fleet {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fleetEvent{at: time.Now(), source: e.Source, reason: e.Reason, to: e.To, err: e.Err})
}

func (l *fleetLog) list() []fleetEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// poll calls cond until it holds or d passes, and reports whether it held.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(5 * time.Millisecond)
	}
	return true
}

// nameOn returns a name, base-0, base-1…, whose keys for the policy of kind (a key
// of policyKeys) are served by primary.
func (c *cluster) nameOn(t testing.TB, s *Store, slots []fleettest.SlotRange, primary, kind, base string) string {
	t.Helper()
	for i := range 1000 {
		name := fmt.Sprintf("%s-%d", base, i)
		if _, p := c.primaryOf(t, slots, policyKeys(s, name)[kind][0]); p == primary {
			return name
		}
	}
	t.Fatalf("no name %s-… falls on %s", base, primary)
	return ""
}

// node returns a client of the one node at addr; on a replica it reads (READONLY).
func node(t testing.TB, addr string) *redis.Client {
	r := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error {
			if err := cn.ReadOnly(ctx).Err(); err != nil && !strings.Contains(err.Error(), "cluster support disabled") {
				return err
			}
			return nil
		}})
	t.Cleanup(func() { r.Close() })
	return r
}

// windowCalls returns the calls a Ratio's window holds.
func windowCalls(r redis.Cmdable, key string) int64 {
	f, err := r.HGetAll(bg, key).Result()
	if err != nil {
		return -1
	}
	var n int64
	for k, v := range f {
		if c, ok := strings.CutPrefix(k, "c:"); ok && c != "" {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
	}
	return n
}

// process is one process of the fleet: its own cluster client, Store and policies.
type process struct {
	log            fleetLog
	br, held       *Breaker
	ra             *Ratio
	tb, heldTokens *TokenBucket
	qu             *Quota
	p, pt          *policy.Pipeline
}

// TestCluster_PrimaryKilled: processes with cluster clients of their own run the
// fleet breaker, both budgets and the quota under traffic, every policy's keys on one
// primary; that primary is killed (SIGKILL). See [failover] for what is asserted.
func TestCluster_PrimaryKilled(t *testing.T) {
	c := startCluster(t)
	slots := c.slots(t)
	victim, replica := slots[0].Primary, slots[0].Replicas[0]
	names := policy.Must(New(c.admin, Options{}))
	on := func(kind, base string) string { return c.nameOn(t, names, slots, victim, kind, base) }
	failover(t, failoverSetup{
		client:  func() redis.UniversalClient { return c.client(t) },
		primary: node(t, victim), replica: node(t, replica),
		kill: func() { c.Kill(victim) },
		promoted: func(ctx context.Context) error {
			return c.WaitOK(ctx) // every node's cluster_state:ok, no slot on the dead primary
		},
		after:   func() redis.UniversalClient { return c.client(t) },
		breaker: on("breaker", "br"), ratio: on("ratio", "ra"), tokens: on("tokenbucket", "tb"),
		quotaKey: on("quota", "client"), held: on("breaker", "held"), heldTokens: on("tokenbucket", "held"),
	})
}

// failoverSetup is a Redis with a replica, and policy names whose keys its primary
// holds.
type failoverSetup struct {
	client                                             func() redis.UniversalClient // a process's own client
	primary, replica                                   *redis.Client                // the primary's node and its replica's (READONLY)
	kill                                               func()                       // kills the primary with SIGKILL
	promoted                                           func(context.Context) error  // waits until the replica serves as primary
	after                                              func() redis.UniversalClient // a new client, after the failover
	breaker, ratio, tokens, quotaKey, held, heldTokens string
}

// failover runs the fleet breaker, both budgets and the quota under traffic in
// processes with clients of their own, and kills the primary. No call fails; every
// policy falls back to its local twin and shares again once the replica is
// promoted, within a bound; the state written before the kill (an open breaker, a
// drained bucket, a budget's window) is there after it.
func failover(t *testing.T, f failoverSetup) {
	brName, raName, tbName, quKey := f.breaker, f.ratio, f.tokens, f.quotaKey
	heldName, heldTokensName := f.held, f.heldTokens
	names := policy.Must(New(f.client(), Options{}))
	procs := make([]*process, 3)
	if testing.Short() {
		procs = procs[:2]
	}
	for i := range procs {
		pr := &process{}
		s := policy.Must(New(f.client(), Options{ID: fmt.Sprintf("p%d", i), Observer: &pr.log}))
		var err error
		pr.br, err = NewBreaker(s, breaker.Options{Name: brName})
		require.NoError(t, err)
		pr.held, err = NewBreaker(s, breaker.Options{Name: heldName, ConsecutiveFailures: 1, OpenTimeout: time.Minute})
		require.NoError(t, err)
		pr.ra, err = NewRatio(s, budget.RatioOptions{Name: raName})
		require.NoError(t, err)
		pr.tb, err = NewTokenBucket(s, budget.TokenBucketOptions{Name: tbName, MaxTokens: 100, TokenRatio: 1})
		require.NoError(t, err)
		pr.heldTokens, err = NewTokenBucket(s, budget.TokenBucketOptions{Name: heldTokensName, MaxTokens: 10, TokenRatio: 0.1})
		require.NoError(t, err)
		pr.qu, err = NewQuota(s, QuotaOptions{Name: "quota", MaxLocalClients: 0})
		require.NoError(t, err)
		for _, cl := range []interface{ Close() error }{pr.br, pr.held, pr.ra, pr.tb, pr.heldTokens} {
			t.Cleanup(func() { cl.Close() })
		}
		pr.p = policy.Must(policy.Wrap(pr.br, pr.ra, policy.Must(retry.New(retry.Options{Base: time.Millisecond}))))
		pr.pt = policy.Must(policy.Wrap(pr.tb, policy.Must(retry.New(retry.Options{Base: time.Millisecond}))))
		procs[i] = pr
	}

	// A Ratio's first grant may be nothing: the first process to sync took the
	// fleet's floor. Retries start once every process holds a grant.
	require.True(t, poll(5*time.Second, func() bool {
		for _, pr := range procs {
			if pr.ra.Level() < 1 {
				return false
			}
		}
		return true
	}), "every process holds a share of the fleet's budget")

	// Traffic: every process calls a healthy dependency through both pipelines and
	// asks the quota, every 2 ms; one first attempt in 50 fails and is retried.
	var mu sync.Mutex
	var callErrs []error
	var calls, refusedByQuota int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, pr := range procs {
		wg.Go(func() {
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				attempt := 0
				flaky := func(context.Context) error {
					attempt++
					if n%50 == 49 && attempt == 1 {
						return fault.Retryable(errDown)
					}
					return nil
				}
				err1 := pr.p.Do(bg, flaky)
				attempt = 0
				err2 := pr.pt.Do(bg, flaky)
				_, allowed := pr.qu.Allow(bg, quKey, 1e6, 1e6)
				mu.Lock()
				calls++
				for i, err := range []error{err1, err2} {
					if err != nil {
						callErrs = append(callErrs, fmt.Errorf("pipeline %d at %v: %w; ratio shared %v level %v, bucket shared %v tokens %v", i, time.Now().Format("15:04:05.000"), err, pr.ra.Shared(), pr.ra.Level(), pr.tb.Shared(), pr.tb.Tokens()))
					}
				}
				if !allowed {
					refusedByQuota++
				}
				mu.Unlock()
			}
		})
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})

	// State written before the kill, and on the replica: the held breaker open for a
	// minute, the held bucket at 4 of 10 tokens, the budget's window with some calls.
	hp := policy.Must(policy.Wrap(procs[0].held))
	require.ErrorIs(t, hp.Do(bg, fail), errDown)
	for range 6 {
		procs[0].heldTokens.OnFailure()
	}
	require.True(t, poll(5*time.Second, func() bool {
		v := procs[1].held.view.Load()
		return v.open && time.Until(v.until) > 50*time.Second && procs[1].heldTokens.Tokens() == 4 &&
			windowCalls(f.primary, names.key(KindBudget, raName, "window")) > 0
	}), "the held state reached every process")
	heldGen := procs[1].held.view.Load().gen
	rep := f.replica
	before := windowCalls(f.primary, names.key(KindBudget, raName, "window"))
	require.True(t, poll(5*time.Second, func() bool {
		return rep.HGet(bg, names.key(KindBreaker, heldName), "s").Val() == "2" &&
			rep.Get(bg, names.key("tokens", heldTokensName)).Val() == "4000" &&
			windowCalls(rep, names.key(KindBudget, raName, "window")) >= before
	}), "the replica holds the state")
	for _, pr := range procs {
		require.Empty(t, pr.log.list(), "every policy shared all along before the kill")
	}

	kill := time.Now()
	f.kill()
	mu.Lock()
	callsAtKill := calls
	mu.Unlock()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	require.NoError(t, f.promoted(ctx), "the replica is promoted")
	promoted := time.Since(kill)

	// Every policy of every process falls back, then shares again.
	sources := []string{brName, heldName, raName, tbName, heldTokensName, "quota"}
	back := func(pr *process, source string) (local, shared time.Duration, ok bool) {
		var fell bool
		for _, e := range pr.log.list() {
			switch {
			case e.source == source && e.to == event.FleetLocal && !fell:
				fell, local = true, e.at.Sub(kill)
			case e.source == source && e.to == event.FleetShared && fell:
				return local, e.at.Sub(kill), true
			}
		}
		return 0, 0, false
	}
	const bound = 15 * time.Second
	require.True(t, poll(bound, func() bool {
		for _, pr := range procs {
			for _, s := range sources {
				if _, _, ok := back(pr, s); !ok {
					return false
				}
			}
		}
		return true
	}), "every policy shares again within %v of the kill", bound)
	var slowest, slowestSynced time.Duration
	var errs []string
	for i, pr := range procs {
		for _, s := range sources {
			local, shared, _ := back(pr, s)
			t.Logf("p%d %-12s local after %4d ms, shared again after %5d ms", i, s, local.Milliseconds(), shared.Milliseconds())
			slowest = max(slowest, shared)
			if s != "quota" {
				slowestSynced = max(slowestSynced, shared)
			}
		}
		for _, e := range pr.log.list() {
			if e.err != nil && !slices.Contains(errs, e.err.Error()) {
				errs = append(errs, e.err.Error())
			}
		}
	}
	t.Logf("replica promoted %d ms after the kill; breakers and budgets shared again after %d ms, every policy after %d ms (the quota asks again a second after it fell back)",
		promoted.Milliseconds(), slowestSynced.Milliseconds(), slowest.Milliseconds())
	t.Logf("errors that made policies local: %q", errs)

	// State written before the kill is kept: the held breaker's open episode, the
	// held bucket's tokens, the calls in the budget's window. A process that had
	// published state republishes it when it shares again, within one sync interval.
	require.True(t, poll(2*DefaultSyncInterval+DefaultTimeout, func() bool {
		v := procs[1].held.view.Load()
		return v.open && v.gen == heldGen && procs[1].heldTokens.Tokens() == 4
	}), "the open breaker and the drained bucket outlived the primary")
	_, open := procs[len(procs)-1].held.Local().OpenNow()
	require.True(t, open, "the breaker opened before the kill still refuses everywhere")
	require.GreaterOrEqual(t, windowCalls(f.after(), names.key(KindBudget, raName, "window")), before)

	close(stop)
	wg.Wait()
	require.Empty(t, callErrs, "no call failed, before, during or after the failover")
	require.Zero(t, refusedByQuota, "the quota refused nobody")
	require.Greater(t, calls, callsAtKill, "calls went on through the failover")
}

// replies records the first word of every error a cluster's nodes answered.
type replies struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *replies) add(cmd redis.Cmder, err error) {
	if err == nil || errors.Is(err, redis.Nil) || cmd.Name() == "client" { // CLIENT SETINFO, new in Redis 7.2
		return
	}
	w, _, _ := strings.Cut(err.Error(), " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[w]++
}

func (r *replies) count(w string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[w]
}

func (r *replies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *replies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.add(cmd, err)
		return err
	}
}
func (r *replies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.add(c, c.Err())
		}
		return err
	}
}

// TestCluster_SlotMovesAndGoesDown moves the slot of each kind of policy to another
// primary, as a resharding does, then takes a slot out of service. Every call
// succeeds throughout; the nodes answer MOVED, ASK, TRYAGAIN and CLUSTERDOWN; the
// client follows MOVED and ASK (a one-key script is served by ASK mid-migration), a
// policy whose script meets TRYAGAIN or CLUSTERDOWN decides locally, and every
// policy shares again, its state kept, once the slot is served.
func TestCluster_SlotMovesAndGoesDown(t *testing.T) {
	c := startCluster(t)
	slots := c.slots(t)
	var rs replies
	rs.seen = map[string]int{}
	type proc struct {
		br *Breaker
		ra *Ratio
		tb *TokenBucket
		p  *policy.Pipeline
		s  *Store
	}
	var procs []proc
	for _, id := range []string{"a", "b"} {
		rdb := c.client(t, &rs)
		s := policy.Must(New(rdb, Options{ID: id, SyncInterval: time.Hour}))
		s.manual = true // the test syncs
		br, err := NewBreaker(s, breaker.Options{Name: "moving"})
		require.NoError(t, err)
		ra, err := NewRatio(s, budget.RatioOptions{Name: "moving"})
		require.NoError(t, err)
		tb, err := NewTokenBucket(s, budget.TokenBucketOptions{Name: "moving", MaxTokens: 10, TokenRatio: 0.1})
		require.NoError(t, err)
		procs = append(procs, proc{br, ra, tb, policy.Must(policy.Wrap(br, ra, policy.Must(retry.New(retry.Options{})))), s})
	}
	a, b := procs[0], procs[1]
	syncAll := func() {
		for _, p := range procs {
			p.br.sync()
			p.ra.sync()
			p.tb.sync()
		}
	}
	calls := func() {
		for _, p := range procs {
			require.NoError(t, p.p.Do(bg, ok), "a call through the fleet breaker and budget")
			p.tb.Withdraw()
		}
	}
	for range 3 {
		a.tb.OnFailure()
	}
	for range 20 {
		calls()
	}
	syncAll()
	syncAll()
	require.Equal(t, 7.0, b.tb.Tokens())
	window := a.s.key(KindBudget, "moving", "window")
	before := windowCalls(c.admin, window)
	require.Equal(t, int64(40), before)

	ids := map[string]string{}
	for _, addr := range c.Addrs() {
		ids[addr] = node(t, addr).ClusterMyID(bg).Val()
	}
	setSlot := func(addr string, slot int, args ...any) {
		require.NoError(t, node(t, addr).Do(bg, append([]any{"CLUSTER", "SETSLOT", slot}, args...)...).Err())
	}
	shared := func(p proc) bool { return p.br.Shared() && p.ra.Shared() && p.tb.Shared() }

	for _, kind := range []string{"tokenbucket", "breaker", "ratio"} {
		keys := policyKeys(a.s, "moving")[kind]
		slot, src := c.primaryOf(t, slots, keys[0])
		var dst string
		for _, r := range slots {
			if r.Primary != src {
				dst = r.Primary
			}
		}
		host, port, _ := strings.Cut(dst, ":")
		setSlot(dst, slot, "IMPORTING", ids[src])
		setSlot(src, slot, "MIGRATING", ids[dst])
		syncAll()
		calls()
		for {
			moving := node(t, src).ClusterGetKeysInSlot(bg, slot, 100).Val()
			if len(moving) == 0 {
				break
			}
			args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
			for _, k := range moving {
				args = append(args, k)
			}
			require.NoError(t, node(t, src).Do(bg, args...).Err())
		}
		syncAll()
		calls()
		if kind == "tokenbucket" {
			require.True(t, a.tb.Shared(), "a one-key script is served by ASK while its slot migrates")
		}
		for _, r := range slots {
			setSlot(r.Primary, slot, "NODE", ids[dst])
		}
		syncAll()
		calls()
		syncAll()
		for _, p := range procs {
			require.True(t, shared(p), "%s: every policy shares again once its slot has moved", kind)
		}
		slots = c.slots(t)
	}
	require.Equal(t, 7.0, b.tb.Tokens(), "the bucket's tokens moved with its slot")
	require.GreaterOrEqual(t, windowCalls(c.client(t), window), before, "the budget's window moved with its slot")

	// A slot that no primary serves: CLUSTERDOWN. Its policy decides locally.
	slot, owner := c.primaryOf(t, slots, policyKeys(a.s, "moving")["tokenbucket"][0])
	require.NoError(t, node(t, owner).ClusterDelSlots(bg, slot).Err())
	a.tb.sync()
	require.False(t, a.tb.Shared(), "a policy whose slot is not served decides locally")
	calls()
	require.NoError(t, node(t, owner).ClusterAddSlots(bg, slot).Err())
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	require.NoError(t, c.WaitOK(ctx))
	syncAll()
	require.True(t, shared(a), "shared again once the slot is served")
	require.Equal(t, 7.0, a.tb.Tokens())

	t.Logf("the nodes answered: %v", rs.seen)
	for _, w := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		require.Positive(t, rs.count(w), "no %s answer: the test did not make the cluster send one", w)
	}
	require.Zero(t, rs.count("CROSSSLOT"), "every script's keys are in one slot")
	require.Zero(t, rs.count("ERR"), "no script touched a key of another slot, or failed")
}

// TestSentinel_PrimaryKilled: the same code on a primary, its replica and Redis
// Sentinel, through redis.NewFailoverClient: see [failover].
func TestSentinel_PrimaryKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	st, err := fleettest.StartSentinel(ctx, t.TempDir())
	if errors.Is(err, fleettest.ErrNoRedis) {
		missing.Skip(t, "redis-server", "apt-get install redis-server")
	}
	require.NoError(t, err)
	t.Cleanup(st.Stop)
	client := func() redis.UniversalClient {
		r := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: fleettest.MasterName,
			SentinelAddrs: []string{st.Sentinel.Addr()}, ContextTimeoutEnabled: true, DialTimeout: time.Second, PoolSize: 4})
		t.Cleanup(func() { r.Close() })
		return r
	}
	failover(t, failoverSetup{
		client: client, after: client,
		primary: node(t, st.Primary.Addr()), replica: node(t, st.Replica.Addr()),
		kill: st.Primary.Stop, promoted: st.WaitPromoted,
		breaker: "db", ratio: "db-budget", tokens: "db-tokens", quotaKey: "client", held: "held", heldTokens: "held-tokens",
	})
}
