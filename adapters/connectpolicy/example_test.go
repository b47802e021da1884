package connectpolicy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/backstop-go/backstop/adapters/connectpolicy"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// One retry owner across a connect hop: the handler's context says which attempt of
// the caller's retry it serves, and a call made under an owner makes one attempt.
func ExampleNewInterceptor() {
	p, err := policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond})), policy.Name("echo"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ic := policy.Must(connectpolicy.NewInterceptor(p, connectpolicy.Options{}))

	var calls atomic.Int32
	h := connect.NewUnaryHandler("/echo.Echo/Say", func(ctx context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		n, upstream, _ := callpath.Attempt(ctx)
		fmt.Printf("handler: attempt %d, owned upstream: %v\n", n, upstream)
		if calls.Add(1) < 3 {
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("warming up"))
		}
		return connect.NewResponse(wrapperspb.String("hello")), nil
	}, connect.WithInterceptors(ic))
	srv := httptest.NewServer(h)
	defer srv.Close()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](&http.Client{Transport: tr}, srv.URL+"/echo.Echo/Say",
		connect.WithInterceptors(ic))
	res, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
	fmt.Println(res.Msg.GetValue(), err)

	calls.Store(0)
	_, err = client.CallUnary(callpath.WithAttempt(context.Background(), 1), connect.NewRequest(wrapperspb.String("hi")))
	fmt.Println("under an owner:", connect.CodeOf(err))
	// Output:
	// handler: attempt 1, owned upstream: true
	// handler: attempt 2, owned upstream: true
	// handler: attempt 3, owned upstream: true
	// hello <nil>
	// handler: attempt 1, owned upstream: true
	// under an owner: unavailable
}
