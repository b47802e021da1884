// Package pgserver starts a real PostgreSQL server for tests and examples: a new
// cluster in a temporary directory (initdb), listening on a free 127.0.0.1 port with
// trust authentication and no Unix socket, stopped and removed by its caller.
//
// PostgreSQL refuses to run as root: when the test runs as root, initdb and postgres
// run as the system's postgres user (created by Debian's postgresql package).
package pgserver

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoPostgres is returned by Start when no PostgreSQL binaries are found.
var ErrNoPostgres = errors.New("pgserver: PostgreSQL is not installed (Debian: apt-get install -y postgresql)")

// Server is a postgres process. It is not safe for concurrent use.
type Server struct {
	dir  string
	port int
	cmd  *exec.Cmd
}

// bin finds a PostgreSQL program: on the PATH, else in Debian's versioned directory.
func bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(found) == 0 {
		return "", ErrNoPostgres
	}
	return found[len(found)-1], nil
}

// Start makes a cluster with one superuser, "backstop", and starts postgres on it. It
// returns once the server accepts connections.
func Start() (*Server, error) {
	initdb, err := bin("initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := bin("postgres")
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "backstop-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			s.Stop()
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "backstop", "-A", "trust", "-E", "UTF8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("pgserver: initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	// fsync off: the cluster dies with the test. deadlock_timeout short: a test that
	// makes a deadlock waits for its detection.
	cmd = exec.Command(postgres, "-D", data, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "deadlock_timeout=20ms", "-c", "max_connections=20")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.Stop()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		s.Stop()
		return nil, err
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var log []string
		for sc.Scan() {
			log = append(log, sc.Text())
			if strings.Contains(sc.Text(), "ready to accept connections") {
				ready <- nil
				for sc.Scan() {
				}
				return
			}
		}
		ready <- fmt.Errorf("pgserver: postgres on port %d exited before it was ready:\n%s", s.port, strings.Join(log, "\n"))
	}()
	if err := <-ready; err != nil {
		_ = cmd.Wait()
		s.Stop()
		return nil, err
	}
	s.cmd = cmd
	return s, nil
}

// credential returns the postgres user's when this process runs as root, else nil:
// the programs then run as this process's user.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgserver: running as root, and PostgreSQL refuses to: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// DSN returns a connection string for database postgres as user backstop.
func (s *Server) DSN() string { return DSN(s.Addr()) }

// DSN returns a connection string for database postgres as user backstop at addr
// (the server's, or a proxy's in front of it).
func DSN(addr string) string {
	return "postgres://backstop@" + addr + "/postgres?sslmode=disable"
}

// Stop shuts the server down (a fast shutdown), waits for it and removes its
// directory. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		_ = s.cmd.Wait()
		s.cmd = nil
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}
