package connectpolicy_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/backstop-go/backstop/adapters/connectpolicy"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/shed"
)

func totalRejected(s *shed.Shedder) uint64 {
	var n uint64
	for _, v := range s.Stats().Rejected {
		n += v
	}
	return n
}

// TestShed_RefusesInTheCallsProtocol: with its one slot held, the shedder answers a
// unary call and a stream at once, without their handlers, with resource_exhausted
// and the metadata that tells each kind of client when to come back; a Backstop client
// retries the refusal after the hint and counts it as the server's refusal.
func TestShed_RefusesInTheCallsProtocol(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			s := policy.Must(shed.New(shed.Options{Name: "echo", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
			e := &echo{hold: make(chan struct{}), in: make(chan struct{}, 1)}
			srv := serve(t, e.handler(connect.WithInterceptors(policy.Must(connectpolicy.NewShedInterceptor(s, connectpolicy.ShedOptions{})))), w.h2c)
			sayc, countc := newClient(t, srv.URL, w)

			first := connect.NewRequest(wrapperspb.String("first"))
			first.Header().Set(callpath.HeaderAttempt, "1") // from a retry owner upstream
			done := make(chan error, 1)
			go func() {
				_, err := sayc.CallUnary(context.Background(), first)
				done <- err
			}()
			<-e.in // the first call holds the only slot

			err := say(context.Background(), sayc)
			var ce *connect.Error
			require.ErrorAs(t, err, &ce)
			require.Equal(t, connect.CodeResourceExhausted, ce.Code(), "%v", err)
			secs, perr := strconv.Atoi(ce.Meta().Get(connectpolicy.HeaderRetryAfter))
			require.NoError(t, perr, "Retry-After %q", ce.Meta().Get(connectpolicy.HeaderRetryAfter))
			require.GreaterOrEqual(t, secs, 1)
			require.Equal(t, strconv.Itoa(secs*1000), ce.Meta().Get(connectpolicy.HeaderPushback), "the pushback says the same")
			require.Equal(t, "limit", ce.Meta().Get(callpath.HeaderRefused))

			stream, err := countc.CallServerStream(context.Background(), connect.NewRequest(wrapperspb.String("n")))
			if err == nil {
				for stream.Receive() {
				}
				err = stream.Err()
				require.NoError(t, stream.Close())
			}
			require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "the stream: %v", err)

			clock := autoClock()
			backstopc, _ := newClient(t, srv.URL, w, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, clock), connectpolicy.Options{}))))
			before := totalRejected(s)
			err = say(context.Background(), backstopc)
			require.True(t, fault.Of(err).Refused, "a Backstop client reads the refusal as the server's: %v", err)
			require.Equal(t, uint64(3), totalRejected(s)-before, "a refusal is retried after its hint")
			for _, d := range clock.Waits() {
				require.GreaterOrEqual(t, d.Milliseconds(), int64(1000), "the retries waited the server's hint")
			}

			close(e.hold)
			require.NoError(t, <-done)
			require.Equal(t, 1, e.calls(), "only the admitted call reached a handler")
			require.Equal(t, []string{"attempt 1 upstream=true"}, e.ownership(), "the admitted handler's context is owned upstream")
		})
	}
}

func TestNewShedInterceptor_RefusesBadOptions(t *testing.T) {
	_, err := connectpolicy.NewShedInterceptor(nil, connectpolicy.ShedOptions{})
	require.ErrorContains(t, err, "Shedder is nil")
	_, err = connectpolicy.NewShedInterceptor(policy.Must(shed.New(shed.Options{})), connectpolicy.ShedOptions{RejectCode: connect.CodeInternal})
	require.ErrorContains(t, err, "RejectCode is internal")
}

// TestShed_AHandlerWaitingOnAConnectCallHoldsNoSlot: a handler admitted to the only
// slot gives it back while its connect call waits on the next service, so a second
// call is admitted, not refused.
func TestShed_AHandlerWaitingOnAConnectCallHoldsNoSlot(t *testing.T) {
	back := &echo{hold: make(chan struct{}), in: make(chan struct{}, 2)}
	backSrv := serve(t, back.handler(), false)
	backc, _ := newClient(t, backSrv.URL, wires[0], connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
	s := policy.Must(shed.New(shed.Options{Name: "front", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
	front := connect.NewUnaryHandler(sayProcedure, func(ctx context.Context, _ *connect.Request[msg]) (*connect.Response[msg], error) {
		if err := say(ctx, backc); err != nil {
			return nil, err
		}
		return connect.NewResponse(wrapperspb.String("ok")), nil
	}, connect.WithInterceptors(policy.Must(connectpolicy.NewShedInterceptor(s, connectpolicy.ShedOptions{}))))
	frontc, _ := newClient(t, serve(t, front, false).URL, wires[0])

	release := sync.OnceFunc(func() { close(back.hold) })
	t.Cleanup(release) // before the servers close, should the test fail

	done := make(chan error, 2)
	for i := range 2 {
		go func() { done <- say(context.Background(), frontc) }()
		select {
		case <-back.in: // this call was admitted and waits on the back end
		case err := <-done:
			t.Fatalf("call %d ended before it reached the back end (%v): the first held the slot", i+1, err)
		}
	}
	release()
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	require.Empty(t, s.Stats().Rejected, "nothing refused")
}
