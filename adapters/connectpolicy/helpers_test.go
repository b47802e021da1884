package connectpolicy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	service        = "backstop.test.Echo"
	sayProcedure   = "/" + service + "/Say"
	countProcedure = "/" + service + "/Count"
)

type (
	msg    = wrapperspb.StringValue
	client = connect.Client[msg, msg]
)

// echo is the test service: Say answers one message, Count streams three. Each call
// is recorded with its headers and the ownership its handler's context carries.
type echo struct {
	fail func(n int) error // the error of call n (1-based); nil or a nil result: answer
	hold chan struct{}     // if set, Say waits for it to close (after signalling entered)
	in   chan struct{}     // Say signals here when it starts, if hold is set

	mu     sync.Mutex // guards the fields below
	seen   []http.Header
	owners []string // "attempt N upstream" or "not owned", per call
	protos []int    // HTTP major version, per call
}

func (e *echo) record(ctx context.Context, h http.Header) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, h.Clone())
	o := "not owned"
	if n, upstream, ok := callpath.Attempt(ctx); ok {
		o = fmt.Sprintf("attempt %d upstream=%v", n, upstream)
	}
	e.owners = append(e.owners, o)
	return len(e.seen)
}

func (e *echo) calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

func (e *echo) headers(k string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, len(e.seen))
	for i, h := range e.seen {
		out[i] = h.Get(k)
	}
	return out
}

func (e *echo) ownership() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.owners...)
}

func (e *echo) say(ctx context.Context, req *connect.Request[msg]) (*connect.Response[msg], error) {
	n := e.record(ctx, req.Header())
	if e.hold != nil {
		e.in <- struct{}{}
		<-e.hold
	}
	if e.fail != nil {
		if err := e.fail(n); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(wrapperspb.String("hello " + req.Msg.GetValue())), nil
}

func (e *echo) count(ctx context.Context, req *connect.Request[msg], stream *connect.ServerStream[msg]) error {
	n := e.record(ctx, req.Header())
	if e.fail != nil {
		if err := e.fail(n); err != nil {
			return err
		}
	}
	for i := 1; i <= 3; i++ {
		if err := stream.Send(wrapperspb.String(fmt.Sprintf("%s %d", req.Msg.GetValue(), i))); err != nil {
			return err
		}
	}
	return nil
}

// handler serves e with the handler options given.
func (e *echo) handler(opts ...connect.HandlerOption) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(sayProcedure, connect.NewUnaryHandler(sayProcedure, e.say, opts...))
	mux.Handle(countProcedure, connect.NewServerStreamHandler(countProcedure, e.count, opts...))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.protos = append(e.protos, r.ProtoMajor)
		e.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

// wire is how a test's client reaches its server.
type wire struct {
	name     string
	h2c      bool
	protocol connect.ClientOption // nil: the Connect protocol
}

// wires are the transports and protocols every test runs over: the Connect protocol
// and gRPC-Web over HTTP/1.1, and those and gRPC over HTTP/2 without TLS.
var wires = []wire{
	{"HTTP/1.1 connect", false, nil},
	{"HTTP/1.1 grpc-web", false, connect.WithGRPCWeb()},
	{"h2c connect", true, nil},
	{"h2c grpc", true, connect.WithGRPC()},
	{"h2c grpc-web", true, connect.WithGRPCWeb()},
}

// serve starts h on 127.0.0.1, over HTTP/1.1 and, if h2c, HTTP/2 without TLS.
func serve(t *testing.T, h http.Handler, h2c bool) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	if h2c {
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	s.Start()
	if ap, err := netip.ParseAddrPort(s.Listener.Addr().String()); err != nil || !ap.Addr().IsLoopback() {
		t.Fatalf("test server listens on %v, want loopback", s.Listener.Addr())
	}
	t.Cleanup(s.Close)
	return s
}

// httpClient returns a client speaking HTTP/1.1 or, if h2c, HTTP/2 without TLS; its
// idle connections are closed when the test ends.
func httpClient(t *testing.T, h2c bool) *http.Client {
	tr := &http.Transport{}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// newClient returns a Say client and a Count client of the server at url over w.
func newClient(t *testing.T, url string, w wire, opts ...connect.ClientOption) (*client, *client) {
	hc := httpClient(t, w.h2c)
	if w.protocol != nil {
		opts = append(opts, w.protocol)
	}
	return connect.NewClient[msg, msg](hc, url+sayProcedure, opts...), connect.NewClient[msg, msg](hc, url+countProcedure, opts...)
}

func say(ctx context.Context, c *client) error {
	_, err := c.CallUnary(ctx, connect.NewRequest(wrapperspb.String("x")))
	return err
}

func autoClock() *policytest.Clock { return policytest.NewClock(time.Now()).AutoAdvance(true) }

// retrying is a pipeline of a 3-attempt retry whose sleeps pass at once on clock.
func retrying(t *testing.T, clock *policytest.Clock, extra ...policy.Policy) *policy.Pipeline {
	t.Helper()
	p, err := policy.Wrap(append(extra, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: 10 * time.Millisecond, Clock: clock})))...)
	require.NoError(t, err)
	return p
}

// failing returns the error of code c for the first n calls (every call for n < 0).
func failing(n int, c connect.Code) func(int) error {
	return func(i int) error {
		if n < 0 || i <= n {
			return connect.NewError(c, fmt.Errorf("call %d fails", i))
		}
		return nil
	}
}
