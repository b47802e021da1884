package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/backstop-go/backstop/shed"
)

// The overload scenario's server runs apart, in a child process of this program held
// to one core (GOMAXPROCS=1), so that the load generator, on the other core, can
// offer it three times what it serves: on one machine of two cores, a server and a
// generator sharing both cannot overload each other. The child is this executable,
// started with serveEnv set; it serves the work on one loopback port and a control
// API on another, and exits when its standard input closes.
const (
	serveEnv      = "BACKSTOP_SHEDDING_SERVE"      // "bare" or "shed"
	iterationsEnv = "BACKSTOP_SHEDDING_ITERATIONS" // burn's iterations per request
)

// serveApart is the child: the CPU-bound handler, behind a shedder when mode is
// "shed", timed at the server from each request's arrival.
func serveApart(mode string) error {
	iterations, err := strconv.Atoi(os.Getenv(iterationsEnv))
	if err != nil || iterations < 1 {
		return fmt.Errorf("%s=%q: want a positive number of iterations", iterationsEnv, os.Getenv(iterationsEnv))
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sink.Add(burn(iterations)) })
	var s *shed.Shedder
	switch mode {
	case "bare":
	case "shed":
		s = policy.Must(shed.New(shed.Options{Name: "overload"}))
		h = shed.Middleware(h, s)
	default:
		return fmt.Errorf("%s=%q: want bare or shed", serveEnv, mode)
	}
	at := &served{t0: time.Now()}
	work, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		at.mu.Lock()
		at.t0, at.recs = time.Now(), nil
		at.mu.Unlock()
	})
	mux.HandleFunc("GET /gauge", func(w http.ResponseWriter, r *http.Request) {
		if s != nil {
			fmt.Fprintf(w, "%d %d", s.Limit(), s.InFlight())
		}
	})
	mux.HandleFunc("GET /records", func(w http.ResponseWriter, r *http.Request) {
		at.mu.Lock()
		rows := make([][3]int64, len(at.recs))
		for i, rec := range at.recs {
			rows[i] = [3]int64{int64(rec.at), int64(rec.latency), int64(rec.status)}
		}
		at.mu.Unlock()
		_ = json.NewEncoder(w).Encode(rows)
	})
	srv := &http.Server{Handler: at.wrap(h), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	control := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(work)    //nolint:errcheck // ends with the process
	go control.Serve(ctl) //nolint:errcheck // ends with the process
	fmt.Printf("%s %s\n", work.Addr(), ctl.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes it to stop the child
	return nil
}

// apart is the parent's handle on a child server.
type apart struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	url, ctl string
	c        *http.Client
}

// startApart starts a child serving burn(iterations) per request, on one core: bare,
// or behind a shedder of zero Options ("shed").
func startApart(iterations int, mode string) (*apart, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", serveEnv+"="+mode, iterationsEnv+"="+strconv.Itoa(iterations))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &apart{cmd: cmd, stdin: stdin, c: &http.Client{Timeout: 30 * time.Second}}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addrs := strings.Fields(line)
	if err != nil || len(addrs) != 2 {
		a.stop()
		return nil, errors.Join(fmt.Errorf("child server: first line %q: want its two addresses", line), err)
	}
	a.url, a.ctl = "http://"+addrs[0], "http://"+addrs[1]
	return a, nil
}

// reset starts the child's clock and forgets what it served.
func (a *apart) reset() error {
	res, err := a.c.Post(a.ctl+"/reset", "text/plain", nil)
	if err != nil {
		return err
	}
	return res.Body.Close()
}

// gauge reads the child shedder's limit and requests in flight; zeros without one.
func (a *apart) gauge() (limit, inflight int) {
	res, err := a.c.Get(a.ctl + "/gauge")
	if err != nil {
		return 0, 0
	}
	defer res.Body.Close()
	_, _ = fmt.Fscan(res.Body, &limit, &inflight)
	return limit, inflight
}

// records returns every request the child served since the last reset, timed there.
func (a *apart) records() ([]record, error) {
	res, err := a.c.Get(a.ctl + "/records")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var rows [][3]int64
	if err := json.NewDecoder(res.Body).Decode(&rows); err != nil {
		return nil, fmt.Errorf("child server's records: %w", err)
	}
	recs := make([]record, len(rows))
	for i, r := range rows {
		recs[i] = record{at: time.Duration(r[0]), latency: time.Duration(r[1]), status: int(r[2])}
	}
	return recs, nil
}

// stop ends the child and waits for it.
func (a *apart) stop() {
	a.stdin.Close()
	_ = a.cmd.Wait()
}
