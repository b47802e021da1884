package connectpolicy_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/connectpolicy"
	"github.com/backstop-go/backstop/callpath"
)

// TestConnectGo_RetriesNothingOnItsOwn checks the package doc's claim about connect-go
// at each of its idempotency levels, on every wire: a connect-go client alone sends a
// unary call once to a server that answers unavailable, whatever the level (a
// no-side-effects call as an HTTP GET in the Connect protocol). The same call through
// the interceptor is retried by the pipeline at every level, since unavailable says
// the server did not run it. Under an owner upstream it is sent once, as connect-go
// alone sends it. The caller sees the same error in all three.
func TestConnectGo_RetriesNothingOnItsOwn(t *testing.T) {
	levels := []struct {
		name  string
		level connect.IdempotencyLevel
		get   bool // the client sends the call as a GET where the protocol allows
	}{
		{"IdempotencyNoSideEffects", connect.IdempotencyNoSideEffects, true},
		{"IdempotencyIdempotent", connect.IdempotencyIdempotent, false},
		{"IdempotencyUnknown", connect.IdempotencyUnknown, false},
	}
	setups := []struct {
		name        string
		interceptor bool
		ctx         context.Context
		want        int // calls the server gets
	}{
		{"connect-go alone", false, context.Background(), 1},
		{"through the interceptor", true, context.Background(), 3},
		{"through the interceptor under an owner upstream", true, callpath.WithUpstreamAttempt(context.Background(), 2), 1},
	}
	for _, w := range wires {
		for _, l := range levels {
			for _, st := range setups {
				t.Run(w.name+"/"+l.name+"/"+st.name, func(t *testing.T) {
					e := &echo{fail: failing(-1, connect.CodeUnavailable)}
					var mu sync.Mutex
					var methods []string
					h := e.handler(connect.WithIdempotency(l.level))
					srv := serve(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
						mu.Lock()
						methods = append(methods, r.Method)
						mu.Unlock()
						h.ServeHTTP(rw, r)
					}), w.h2c)
					opts := []connect.ClientOption{connect.WithIdempotency(l.level)}
					if l.get {
						opts = append(opts, connect.WithHTTPGet())
					}
					if st.interceptor {
						opts = append(opts, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
					}
					sayc, _ := newClient(t, srv.URL, w, opts...)
					err := say(st.ctx, sayc)
					require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "the caller's error: %v", err)
					require.Equal(t, st.want, e.calls(), "calls the server got")
					want := http.MethodPost
					if l.get && w.protocol == nil {
						want = http.MethodGet // only the Connect protocol has GET calls
					}
					for i, m := range methods {
						require.Equal(t, want, m, "the method of call %d", i+1)
					}
				})
			}
		}
	}
}
