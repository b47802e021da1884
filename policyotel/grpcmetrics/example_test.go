package grpcmetrics_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyotel"
	"github.com/backstop-go/backstop/policyotel/grpcmetrics"
	"github.com/backstop-go/backstop/retry"
)

// A channel whose calls a retrying pipeline runs, with gRFC A96's retry metrics.
func Example() {
	mp := sdkmetric.NewMeterProvider() // with the application's reader or exporter
	defer mp.Shutdown(context.Background())
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3}))))
	target := "dns:///orders.internal:443"

	obs, err := policyotel.New(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	p = p.With(policy.Observe(obs))
	opts := append(grpcmetrics.DialOptions(obs, grpcmetrics.Options{}), policygrpc.DialOptions(p, policygrpc.Options{})...)
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println(conn.CanonicalTarget())
	// Output: dns:///orders.internal:443
}
