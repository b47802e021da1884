package lossy_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/internal/lossy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An echo server behind the proxy answers every line; the answer to "cut" is lost
// and the connection breaks.
func TestProxy_LosesTheAnswerToAWatchedRequest(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4) // what the server received
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			got <- line
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	}()
	p, err := lossy.Start(l.Addr().String(), func(up []byte) bool { return bytes.Contains(up, []byte("cut")) })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	defer l.Close()

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); line != "hello\n" || err != nil {
		t.Fatalf("answer to hello = %q, %v; want \"hello\\n\"", line, err)
	}
	if _, err := c.Write([]byte("cut\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != io.EOF {
		t.Fatalf("answer to cut = %q, %v; want io.EOF", line, err)
	}
	if a, b := <-got, <-got; a != "hello\n" || b != "cut\n" {
		t.Fatalf("the server received %q, %q; want hello, cut", a, b)
	}
	p.Close()
	<-done
}
