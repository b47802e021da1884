package connectpolicy_test

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/backstop-go/backstop/adapters/connectpolicy"
	"github.com/backstop-go/backstop/policy"
)

// greetv1connect stands for the code connect generates for a GreetService.
var greetv1connect = struct {
	NewGreetServiceClient  func(connect.HTTPClient, string, ...connect.ClientOption) *connect.Client[wrapperspb.StringValue, wrapperspb.StringValue]
	NewGreetServiceHandler func(any, ...connect.HandlerOption) (string, http.Handler)
}{
	NewGreetServiceClient: func(c connect.HTTPClient, url string, o ...connect.ClientOption) *connect.Client[wrapperspb.StringValue, wrapperspb.StringValue] {
		return connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](c, url+"/greet.v1.GreetService/Greet", o...)
	},
	NewGreetServiceHandler: func(_ any, o ...connect.HandlerOption) (string, http.Handler) {
		return "/greet.v1.GreetService/", connect.NewUnaryHandler("/greet.v1.GreetService/Greet",
			func(context.Context, *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
				return connect.NewResponse(wrapperspb.String("hello")), nil
			}, o...)
	},
}

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(deadline, breaker, budget, retry policy.Policy, url string, svc any, mux *http.ServeMux) error {
	p, err := policy.Wrap(deadline, breaker, budget, retry)
	if err != nil {
		return err
	}
	ic, err := connectpolicy.NewInterceptor(p, connectpolicy.Options{})
	if err != nil {
		return err
	}
	client := greetv1connect.NewGreetServiceClient(http.DefaultClient, url, connect.WithInterceptors(ic))
	mux.Handle(greetv1connect.NewGreetServiceHandler(svc, connect.WithInterceptors(ic)))
	_ = client
	return nil
}
