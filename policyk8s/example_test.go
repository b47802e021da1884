package policyk8s_test

import (
	"fmt"

	"github.com/backstop-go/backstop/policyk8s"
)

// An Istio VirtualService without retries gets Istio's default retry policy: the
// explanation says so, in Istio's words, with the tries it makes.
func ExampleRoute_Explain() {
	set, err := policyk8s.Parse("reviews.yaml", []byte(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: bookinfo
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
    timeout: 3s
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := set.Routes[0]
	fmt.Println(r.Explain())
	fmt.Println("attempts at most:", r.AttemptsAtMost())
	// Output:
	// istio VirtualService bookinfo/reviews http[0] (reviews.yaml:9:5)
	// retries: not set, so Istio's default retry policy applies: attempts 2, up to 3 tries, retryOn connect-failure,refused-stream,unavailable,cancelled,503
	// retries.perTryTimeout: none; retries.backoff: 25ms base, each wait at most 10 × base (Envoy's back-off)
	// timeout: 3s
	// worst case: 3s
	// attempts at most: 3
}

// A misspelt field is refused at its line and column, with the field it meant.
func ExampleParse_unknownField() {
	_, err := policyk8s.Parse("route.yaml", []byte(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: checkout}
spec:
  rules:
  - retry: {attempts: 2, backof: 100ms}
`))
	fmt.Println(err)
	// Output:
	// policyk8s: invalid manifest: route.yaml:6:26: spec.rules[0].retry.backof: unknown field "backof" of HTTPRouteRetry; did you mean backoff?
}
