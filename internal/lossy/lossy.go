// Package lossy is a TCP proxy for tests of clients against real servers: it forwards
// both ways, and when a request it is told to watch goes up, it lets the server run
// it and breaks the connection before the answer comes down — the failure after which
// no client can know whether a write ran.
package lossy

import (
	"net"
	"sync"
)

// Proxy is a proxy on a loopback port. Build it with [Start]; it is safe for
// concurrent use.
type Proxy struct {
	l     net.Listener
	to    string
	cut   func(up []byte) bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // guarded by mu
}

// Start listens on a free 127.0.0.1 port and forwards each connection to the server
// at to. When cut reports true for bytes a client sent, those bytes still go up, and
// the connection breaks as soon as the server answers.
func Start(to string, cut func(up []byte) bool) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, to: to, cut: cut, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Close stops the proxy, breaks its connections and waits for its goroutines.
func (p *Proxy) Close() {
	p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, s)
		var mu sync.Mutex
		// armed, guarded by mu: a watched request went up.
		armed := false
		// Client to server: forward, and arm on a watched request.
		p.wg.Go(func() {
			defer p.forget(c, s)
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if p.cut(buf[:n]) {
						mu.Lock()
						armed = true
						mu.Unlock()
					}
					if _, err := s.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
		// Server to client: forward, until an answer comes to an armed connection.
		p.wg.Go(func() {
			defer p.forget(c, s)
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				mu.Lock()
				cut := armed
				mu.Unlock()
				if n > 0 && cut {
					return // the server answered the watched request: its answer is lost
				}
				if n > 0 {
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}
