package fleettest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ErrNoRedis is returned by Start when redis-server is not on the PATH.
var ErrNoRedis = errors.New("fleettest: redis-server is not installed (Debian: apt-get install -y redis-server)")

// Server is a redis-server process. It is not safe for concurrent use.
type Server struct {
	port  int
	conf  string // a configuration file, first on the command line; "" for none
	ready string // the line of its log that says it accepts connections; "" for a server's
	args  []string
	cmd   *exec.Cmd
}

// Installed returns ErrNoRedis when redis-server is not on the PATH, else nil.
func Installed() error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return ErrNoRedis
	}
	return nil
}

// startTimeout bounds how long Restart waits for a server to be ready.
const startTimeout = 10 * time.Second

// Start starts a redis-server on a free loopback port and returns once it accepts
// connections. args are more redis-server options ("--replica-serve-stale-data",
// "no"), given on every Restart too.
func Start(args ...string) (*Server, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{port: port, args: args}
	return s, s.Restart()
}

// Addr returns the server's host:port; it stays the same across Stop and Restart.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Restart starts the server again on its port, empty, after Stop.
func (s *Server) Restart() error {
	if s.cmd != nil {
		return errors.New("fleettest: the server is running")
	}
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "notice")
	args = append(args, s.args...)
	cmd := exec.Command("redis-server", args...)
	dieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	// It says on stdout when it is ready; the rest of its log is drained.
	readyLine := s.ready
	if readyLine == "" {
		readyLine = "Ready to accept connections"
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var log []string
		for sc.Scan() {
			log = append(log, sc.Text())
			if strings.Contains(sc.Text(), readyLine) {
				ready <- nil
				for sc.Scan() {
				}
				return
			}
		}
		ready <- fmt.Errorf("fleettest: redis-server on port %d exited before it was ready:\n%s", s.port, strings.Join(log, "\n"))
	}()
	select {
	case err := <-ready:
		if err != nil {
			_ = cmd.Wait()
			return err
		}
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("fleettest: redis-server on port %d did not say %q within %v", s.port, readyLine, startTimeout)
	}
	s.cmd = cmd
	return nil
}

// Stop kills the server and waits for it to exit. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
