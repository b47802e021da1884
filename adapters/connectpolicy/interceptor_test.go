package connectpolicy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/backstop-go/backstop/adapters/connectpolicy"
	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

func TestUnary_RetriesUnavailableOverEveryWire(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			e := &echo{fail: failing(2, connect.CodeUnavailable)}
			srv := serve(t, e.handler(connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(nil, connectpolicy.Options{})))), w.h2c)
			sayc, _ := newClient(t, srv.URL, w, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
			require.NoError(t, say(context.Background(), sayc))
			require.Equal(t, 3, e.calls(), "calls the server got")
			require.Equal(t, []string{"1", "2", "3"}, e.headers(callpath.HeaderAttempt))
			require.Equal(t, []string{"", "1", "2"}, e.headers(callpath.HeaderGRPCPreviousAttempts))
			require.Equal(t, []string{"attempt 1 upstream=true", "attempt 2 upstream=true", "attempt 3 upstream=true"}, e.ownership(),
				"the handler's context is owned upstream")
			major := 1
			if w.h2c {
				major = 2
			}
			require.Equal(t, []int{major, major, major}, e.protos, "HTTP version of each call")
		})
	}
}

func TestUnary_UnderAnOwnerMakesOneAttempt(t *testing.T) {
	for _, w := range wires {
		for _, tc := range []struct {
			name string
			ctx  context.Context
			want string // Backstop-Attempt sent
		}{
			{"owner in this process on its attempt 2", callpath.WithAttempt(context.Background(), 2), "2"},
			{"owner upstream", callpath.WithUpstreamAttempt(context.Background(), 3), "1"},
		} {
			t.Run(w.name+"/"+tc.name, func(t *testing.T) {
				e := &echo{fail: failing(-1, connect.CodeUnavailable)}
				srv := serve(t, e.handler(), w.h2c)
				sayc, _ := newClient(t, srv.URL, w, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
				err := say(tc.ctx, sayc)
				require.ErrorIs(t, err, retry.ErrOwner)
				require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "the last attempt's code")
				require.True(t, retry.DefaultShouldRetry(err), "the owner may retry it: %v", err)
				require.Equal(t, []string{tc.want}, e.headers(callpath.HeaderAttempt))
			})
		}
	}
}

func TestStream_CarriesTheOwnershipAcrossTheHop(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			e := &echo{}
			ic := policy.Must(connectpolicy.NewInterceptor(nil, connectpolicy.Options{}))
			srv := serve(t, e.handler(connect.WithInterceptors(ic)), w.h2c)
			_, countc := newClient(t, srv.URL, w, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
			stream, err := countc.CallServerStream(callpath.WithAttempt(context.Background(), 2), connect.NewRequest(wrapperspb.String("n")))
			require.NoError(t, err)
			var got []string
			for stream.Receive() {
				got = append(got, stream.Msg().GetValue())
			}
			require.NoError(t, stream.Err())
			require.NoError(t, stream.Close())
			require.Equal(t, []string{"n 1", "n 2", "n 3"}, got)
			require.Equal(t, []string{"attempt 2 upstream=true"}, e.ownership(), "the stream handler's context")
			require.Equal(t, []string{"1"}, e.headers(callpath.HeaderGRPCPreviousAttempts))

			// Under no owner the stream carries no attempt header, even one the caller set.
			req := connect.NewRequest(wrapperspb.String("n"))
			req.Header().Set(callpath.HeaderAttempt, "7")
			stream, err = countc.CallServerStream(context.Background(), req)
			require.NoError(t, err)
			for stream.Receive() {
			}
			require.NoError(t, stream.Close())
			require.Equal(t, "not owned", e.ownership()[1])
		})
	}
}

// TestHops_OneOwner counts the calls a back-end gets for one user call through a
// middle service, where every client retries 3 times on unavailable: connect-go
// alone (which retries nothing), each hop's own retry stacked naively (the middle
// handler does not read the caller's attempt), and the adapter on both sides.
func TestHops_OneOwner(t *testing.T) {
	for _, w := range wires {
		for _, tc := range []struct {
			name            string
			retries, server bool // clients retry through the adapter; handlers read the attempt
			want            int
		}{
			{"connect-go alone", false, false, 1},
			{"each hop retrying, the ownership not read", true, false, 9},
			{"the adapter on both sides", true, true, 3},
		} {
			t.Run(w.name+"/"+tc.name, func(t *testing.T) {
				back := &echo{fail: failing(-1, connect.CodeUnavailable)}
				var handlerOpts []connect.HandlerOption
				if tc.server {
					handlerOpts = append(handlerOpts, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(nil, connectpolicy.Options{}))))
				}
				backSrv := serve(t, back.handler(handlerOpts...), w.h2c)
				clientOpts := func() []connect.ClientOption {
					if !tc.retries {
						return nil
					}
					return []connect.ClientOption{connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{})))}
				}
				backc, _ := newClient(t, backSrv.URL, w, clientOpts()...)
				mid := &echo{fail: func(int) error { return nil }}
				midHandler := connect.NewUnaryHandler(sayProcedure, func(ctx context.Context, req *connect.Request[msg]) (*connect.Response[msg], error) {
					mid.record(ctx, req.Header())
					if err := say(ctx, backc); err != nil {
						return nil, err
					}
					return connect.NewResponse(wrapperspb.String("ok")), nil
				}, handlerOpts...)
				midSrv := serve(t, midHandler, w.h2c)
				front, _ := newClient(t, midSrv.URL, w, clientOpts()...)
				err := say(context.Background(), front)
				require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "the user's call: %v", err)
				if got := back.calls(); got != tc.want {
					t.Errorf("%s: the back end got %d calls, want %d", tc.name, got, tc.want)
				}
				t.Logf("figure: %-18s %-44s back end got %d calls", w.name, tc.name, back.calls())
			})
		}
	}
}

func TestUnary_Classification(t *testing.T) {
	withMeta := func(c connect.Code, k, v string) func(int) error {
		return func(int) error {
			err := connect.NewError(c, errors.New("busy"))
			err.Meta().Set(k, v)
			return err
		}
	}
	for _, w := range []wire{wires[0], wires[3]} {
		for _, tc := range []struct {
			name    string
			fail    func(int) error
			codes   []connect.Code
			want    int             // calls
			waits   []time.Duration // the retry's sleeps, when exact
			atLeast time.Duration   // else the least first sleep
			client  bool            // the error is marked fault.Client
		}{
			{name: "unavailable is retried", fail: failing(-1, connect.CodeUnavailable), want: 3},
			{name: "resource_exhausted is not, by default", fail: failing(-1, connect.CodeResourceExhausted), want: 1},
			{name: "resource_exhausted is when listed", fail: failing(-1, connect.CodeResourceExhausted),
				codes: []connect.Code{connect.CodeResourceExhausted}, want: 3},
			{name: "invalid_argument is the caller's", fail: failing(-1, connect.CodeInvalidArgument), want: 1, client: true},
			{name: "a pushback is waited exactly", fail: withMeta(connect.CodeUnavailable, connectpolicy.HeaderPushback, "250"), want: 3,
				waits: []time.Duration{250 * time.Millisecond, 250 * time.Millisecond}},
			{name: "a negative pushback forbids the retry", fail: withMeta(connect.CodeUnavailable, connectpolicy.HeaderPushback, "-1"), want: 1},
			{name: "a Retry-After is waited at least", fail: withMeta(connect.CodeUnavailable, connectpolicy.HeaderRetryAfter, "2"), want: 3,
				atLeast: 2 * time.Second},
		} {
			t.Run(w.name+"/"+tc.name, func(t *testing.T) {
				e := &echo{fail: tc.fail}
				srv := serve(t, e.handler(), w.h2c)
				clock := autoClock()
				sayc, _ := newClient(t, srv.URL, w, connect.WithInterceptors(
					policy.Must(connectpolicy.NewInterceptor(retrying(t, clock), connectpolicy.Options{RetryableCodes: tc.codes}))))
				err := say(context.Background(), sayc)
				require.Error(t, err)
				require.Equal(t, tc.want, e.calls(), "calls; error %v", err)
				require.Equal(t, tc.client, fault.Of(err).Client, "fault.Of(%v).Client", err)
				switch {
				case tc.waits != nil:
					require.Equal(t, tc.waits, clock.Waits())
				case tc.atLeast > 0:
					require.GreaterOrEqual(t, clock.Waits()[0], tc.atLeast)
				}
			})
		}
	}
}

// TestUnary_BreakerIgnoresTheCallersMistakes: invalid_argument leaves a breaker
// outside the retry closed; unavailable opens it, and it then refuses with unavailable.
func TestUnary_BreakerIgnoresTheCallersMistakes(t *testing.T) {
	e := &echo{fail: func(n int) error {
		if n <= 3 {
			return connect.NewError(connect.CodeInvalidArgument, errors.New("bad"))
		}
		return connect.NewError(connect.CodeUnavailable, errors.New("down"))
	}}
	srv := serve(t, e.handler(), false)
	b := policy.Must(breaker.New(breaker.Options{Name: "back", ConsecutiveFailures: 1, IsExcluded: func(err error) bool { return fault.Of(err).Client }}))
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 1}))))
	sayc, _ := newClient(t, srv.URL, wires[0], connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(p, connectpolicy.Options{}))))
	for range 3 {
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(say(context.Background(), sayc)))
	}
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(say(context.Background(), sayc)))
	err := say(context.Background(), sayc)
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "an open breaker's refusal")
	require.Equal(t, 4, e.calls(), "the open breaker sent nothing")
}

func TestUnary_CallersDeadline(t *testing.T) {
	e := &echo{fail: failing(-1, connect.CodeUnavailable)}
	srv := serve(t, e.handler(), false)
	sayc, _ := newClient(t, srv.URL, wires[0], connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := say(ctx, sayc)
	require.Equal(t, connect.CodeCanceled, connect.CodeOf(err), "%v", err)
	require.Equal(t, 0, e.calls())
}

func TestUnary_RefusesAHedge(t *testing.T) {
	e := &echo{}
	srv := serve(t, e.handler(), false)
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: time.Hour}))))
	sayc, _ := newClient(t, srv.URL, wires[0], connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(p, connectpolicy.Options{}))))
	require.ErrorIs(t, say(context.Background(), sayc), connectpolicy.ErrHedged)
	require.Equal(t, 0, e.calls())
}

func TestNewInterceptor_RefusesBadCodes(t *testing.T) {
	_, err := connectpolicy.NewInterceptor(nil, connectpolicy.Options{RetryableCodes: []connect.Code{connect.CodeUnavailable, 0}})
	require.ErrorContains(t, err, "RetryableCodes[1] is 0")
	_, err = connectpolicy.NewInterceptor(nil, connectpolicy.Options{RetryableCodes: []connect.Code{17}})
	require.ErrorContains(t, err, "RetryableCodes[0] is 17")
}

func TestClassify(t *testing.T) {
	require.NoError(t, connectpolicy.Classify(nil))
	plain := errors.New("plain")
	require.Same(t, plain, connectpolicy.Classify(plain))
	twice := connect.NewError(connect.CodeUnavailable, errors.New("x"))
	twice.Meta()[http.CanonicalHeaderKey(connectpolicy.HeaderPushback)] = []string{"10", "20"}
	require.False(t, retry.DefaultShouldRetry(connectpolicy.Classify(twice)), "a pushback given twice forbids the retry")
	refused := connect.NewError(connect.CodeResourceExhausted, errors.New("shed"))
	refused.Meta().Set(callpath.HeaderRefused, "limit")
	refused.Meta().Set(callpath.HeaderRetryAfterMillis, "40")
	m := fault.Of(connectpolicy.Classify(refused))
	require.True(t, m.Refused && m.Hint == 40*time.Millisecond, "a Backstop server's refusal: %+v", m)
}

func TestExplain(t *testing.T) {
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3})), policy.Name("echo")))
	require.Equal(t, `connect: pipeline "echo" makes at most 3 attempts of a unary call, 1 under a retry owner further up or upstream; streams are not retried`,
		connectpolicy.Explain(p))
}

// TestUnary_LeavesTheCallersRequestAsItWas: attempts carry the owner's headers, not
// ones the caller copied from elsewhere, and the caller's request keeps its own.
func TestUnary_LeavesTheCallersRequestAsItWas(t *testing.T) {
	e := &echo{fail: failing(1, connect.CodeUnavailable)}
	srv := serve(t, e.handler(), false)
	sayc, _ := newClient(t, srv.URL, wires[0], connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
	req := connect.NewRequest(wrapperspb.String("x"))
	req.Header().Set(callpath.HeaderAttempt, "7")
	_, err := sayc.CallUnary(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2"}, e.headers(callpath.HeaderAttempt), "the retry's own attempts")
	require.Equal(t, "7", req.Header().Get(callpath.HeaderAttempt), "the caller's header afterwards")
	require.Empty(t, req.Header().Values(callpath.HeaderGRPCPreviousAttempts))
}

// TestUnary_PerAttemptTimeout: the pipeline's per-attempt timeout ends each attempt
// at a server that never answers — connect-go sends it on as the call's timeout —
// and the retry makes the next.
func TestUnary_PerAttemptTimeout(t *testing.T) {
	for _, w := range []wire{wires[0], wires[3]} {
		t.Run(w.name, func(t *testing.T) {
			e := &echo{}
			srv := serve(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				e.record(r.Context(), r.Header)
				_, _ = io.Copy(io.Discard, r.Body) // then net/http sees the client hang up
				<-r.Context().Done()
			}), w.h2c)
			p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond, Clock: autoClock()})),
				policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 50 * time.Millisecond}))))
			sayc, _ := newClient(t, srv.URL, w, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(p, connectpolicy.Options{}))))
			err := say(context.Background(), sayc)
			require.ErrorIs(t, err, retry.ErrExhausted)
			require.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(err), "%v", err)
			require.Equal(t, 3, e.calls())
			timeouts := e.headers("Connect-Timeout-Ms")
			if w.protocol != nil {
				timeouts = e.headers("Grpc-Timeout")
			}
			for _, v := range timeouts {
				require.NotEmpty(t, v, "the attempt's timeout is sent on")
			}
		})
	}
}
