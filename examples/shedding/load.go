package main

import (
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// clientTimeout is how long a client waits for an answer before it gives up.
const clientTimeout = 10 * time.Second

// poisson is a vegeta.Pacer of Poisson arrivals at rate(t) per second: open loop, the
// next arrival due whatever became of the last.
type poisson struct {
	rate  func(time.Duration) float64
	r     *rand.Rand
	times []time.Duration // when each hit is due; vegeta asks for them in order
}

func newPoisson(rate func(time.Duration) float64, seed uint64) *poisson {
	return &poisson{rate: rate, r: rand.New(rand.NewPCG(seed, 3))}
}

// Pace returns the wait until hit number hits is due.
func (p *poisson) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	for uint64(len(p.times)) <= hits {
		last := time.Duration(0)
		if n := len(p.times); n > 0 {
			last = p.times[n-1]
		}
		p.times = append(p.times, last+time.Duration(p.r.ExpFloat64()/p.rate(last)*float64(time.Second)))
	}
	return max(0, p.times[hits]-elapsed), false
}

// Rate is the arrival rate at elapsed.
func (p *poisson) Rate(elapsed time.Duration) float64 { return p.rate(elapsed) }

// attack offers url the arrivals of pacer for d with vegeta's attacker, open loop
// (a new worker for each arrival that finds none free), and returns every result as
// a record, the shedder's state each bucket if sample is set, and vegeta's metrics
// of the admitted requests (status 200) with their latency histogram.
func attack(url string, pacer vegeta.Pacer, d time.Duration, sample func() (limit, inflight int)) ([]record, []gauge, *vegeta.Metrics) {
	a := vegeta.NewAttacker(vegeta.Timeout(clientTimeout), vegeta.KeepAlive(true), vegeta.MaxBody(-1), vegeta.Connections(10000))
	target := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: url})
	var mu sync.Mutex
	var gauges []gauge
	begin := time.Now()
	done := make(chan struct{})
	var sampler sync.WaitGroup
	if sample != nil {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			t := time.NewTicker(bucket)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					at := time.Since(begin)
					limit, inflight := sample()
					mu.Lock()
					gauges = append(gauges, gauge{at, limit, inflight})
					mu.Unlock()
				case <-done:
					return
				}
			}
		}()
	}
	admitted := &vegeta.Metrics{Histogram: &vegeta.Histogram{Buckets: vegeta.Buckets{0, 10 * time.Millisecond, 100 * time.Millisecond,
		500 * time.Millisecond, time.Second, 5 * time.Second}}}
	var recs []record
	for res := range a.Attack(target, pacer, d, "shedding") {
		r := record{at: res.Timestamp.Sub(begin), latency: res.Latency, status: int(res.Code)}
		if res.Code == 0 {
			r.timedOut = strings.Contains(res.Error, "Timeout") || strings.Contains(res.Error, "deadline exceeded")
		}
		if ra := res.Headers.Get("Retry-After"); ra != "" {
			r.retryAfter, _ = strconv.Atoi(ra)
		}
		if res.Code == http.StatusOK {
			admitted.Add(res)
		}
		recs = append(recs, r)
	}
	admitted.Close()
	close(done)
	sampler.Wait()
	return recs, gauges, admitted
}

// spinEnv marks a child that only spins, a busy neighbour for -contend.
const spinEnv = "BACKSTOP_SHEDDING_SPIN"

// spin burns a core until its standard input closes.
func spin() {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		sink.Add(burn(1 << 20))
	}
}

// contend starts n busy processes beside the scenarios and returns what stops them.
func contend(n int) (stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var stdins []io.WriteCloser
	var cmds []*exec.Cmd
	stop = func() {
		for _, in := range stdins {
			in.Close()
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
	for range n {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1", spinEnv+"=1")
		in, err := cmd.StdinPipe()
		if err != nil {
			stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			stop()
			return nil, err
		}
		stdins, cmds = append(stdins, in), append(cmds, cmd)
	}
	return stop, nil
}
