package policygrpc_test

import (
	"fmt"

	"github.com/backstop-go/backstop/policygrpc"
)

// A channel configured for grpc-go's built-in retry moves to Backstop unchanged: the
// service config becomes one pipeline per methodConfig entry, sharing the channel's
// retryThrottling bucket. Dial with cfg.DialOptions() so the channel has one owner.
func ExampleParseServiceConfig() {
	cfg, err := policygrpc.ParseServiceConfig([]byte(`{
	  "methodConfig": [{
	    "name": [{"service": "orders.Orders"}],
	    "timeout": "2s",
	    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
	                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
	  }],
	  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Pipeline("/orders.Orders/Get"))
	fmt.Println(cfg.Pipeline("/other.Service/Get"))
	fmt.Println(cfg.Budget().MaxTokens())

	// Every problem is reported at once, each where it is.
	_, err = policygrpc.ParseServiceConfig([]byte(`{"methodConfig": [{"name": [{"service": "s"}],
	  "retryPolicy": {"maxAttempts": 1, "initialBackoff": "100ms", "maxBackoff": "1s",
	                  "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`))
	fmt.Println(err)
	// Output:
	// deadline → budget → retry
	// (nil pipeline)
	// 10
	// policygrpc: invalid service config: line 2, column 20: methodConfig[0].retryPolicy.maxAttempts is 1; want > 1
	// policygrpc: invalid service config: line 2, column 38: methodConfig[0].retryPolicy.initialBackoff is "100ms"; want a duration > 0 such as "0.1s"
}
