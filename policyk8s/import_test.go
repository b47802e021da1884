package policyk8s_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policyk8s"
)

// TestImport_BuildsEachRoute: every route of every source converts into a stack
// that config builds, making as many tries as the route, with its fields placed
// in the manifest.
func TestImport_BuildsEachRoute(t *testing.T) {
	for _, file := range []string{"testdata/gateway.yaml", "testdata/istio.yaml", "testdata/linkerd.yaml"} {
		set, err := policyk8s.Load(file)
		require.NoError(t, err)
		im := policyk8s.Import(file, set)
		c, err := im.Build(config.Options{})
		require.NoError(t, err, "%s", file)
		require.Len(t, c.Stacks(), len(set.Routes))
		for i, r := range set.Routes {
			stack := c.Stacks()[i]
			o, ok := c.Origin(stack)
			require.True(t, ok)
			require.Equal(t, r.Source, o.Format)
			require.Same(t, r, o.Source)
			want := max(r.Tries, 1) // 0, left to the implementation: the stack makes one
			require.Equal(t, want, c.Pipeline(stack).Explain().MaxAttempts, "%s %s", file, stack)
			_, pos := o.Field("")
			require.Equal(t, config.Pos{File: file, Line: r.Line, Column: r.Column}, pos, "%s: the stack is placed at its rule", stack)
		}
		// The whole file round-trips through config's own format.
		yml, err := config.Encode(im.File)
		require.NoError(t, err)
		_, err = config.Parse("converted.yaml", yml, config.Options{})
		require.NoError(t, err, "%s converted:\n%s", file, yml)
	}
}

// TestImport_Istio: the converted stack of an Istio rule has its timeout, tries,
// per-try timeout, Envoy's back-off, the statuses of retryOn, the DestinationRule's
// budget, breaker and bulkhead, and notes for what differs.
func TestImport_Istio(t *testing.T) {
	set, err := policyk8s.Load("testdata/istio.yaml")
	require.NoError(t, err)
	im := policyk8s.Import("testdata/istio.yaml", set)
	s := im.File.Stacks[0]
	require.Equal(t, "VirtualService_bookinfo_reviews_http_0", s.Name)
	require.Equal(t, 5*time.Second, s.Stack.Deadline.D)
	require.Equal(t, time.Second, s.Stack.AttemptTimeout.D)
	require.Equal(t, 4, *s.Stack.Retry.Attempts)
	require.Equal(t, "envoy", *s.Stack.Retry.Strategy)
	require.Equal(t, 25*time.Millisecond, s.Stack.Retry.Base.D)
	require.Equal(t, []int{409, 502, 503, 504}, s.Stack.Retry.HTTPStatuses, "gateway-error and 409")
	require.InDelta(t, 0.10, *s.Stack.Budget.Ratio.Ratio, 1e-9)
	require.Equal(t, 7, *s.Stack.Breaker.ConsecutiveFailures)
	require.Equal(t, 3*time.Minute, s.Stack.Breaker.OpenTimeout.D)
	require.Equal(t, 50, *s.Stack.Bulkhead.MaxConcurrent)
	require.Equal(t, 10, *s.Stack.Bulkhead.MaxQueue)
	// Istio's default policy on the second entry: 3 tries, 503 and two gRPC codes.
	d := im.File.Stacks[1].Stack.Retry
	require.Equal(t, 3, *d.Attempts)
	require.Equal(t, []int{503}, d.HTTPStatuses)
	require.Equal(t, []string{"UNAVAILABLE", "CANCELLED"}, d.GRPCCodes)
	require.Nil(t, im.File.Stacks[2].Stack.Retry, "attempts 0: no retry")
	require.True(t, im.File.Stacks[2].Stack.Deadline.Off, "no timeout: Istio's disabled")
	var msgs []string
	for _, n := range im.Notes {
		if n.Stack == s.Name {
			msgs = append(msgs, n.Reason+" "+n.Field+": "+n.Msg)
		}
	}
	require.Len(t, msgs, 5, "%s", strings.Join(msgs, "\n"))
	require.Contains(t, msgs[0], "retryBudget")
	require.Contains(t, msgs[1], "outlierDetection")
	require.Contains(t, msgs[2], "connectionPool")
	require.Contains(t, msgs[3], "prefix /api/v2 matches any path")
	require.Contains(t, msgs[4], `host "reviews" (a wildcard, a short name or a port)`)
	// The patterns of the first entry: its prefix, and what is under it.
	require.Equal(t, "/api/v2", *im.File.HTTP.Routes[0].Match)
	require.Equal(t, "/api/v2/", *im.File.HTTP.Routes[1].Match)
	// retries.attempts is where the stack's attempts came from.
	c, err := im.Build(config.Options{})
	require.NoError(t, err)
	o, _ := c.Origin(s.Name)
	field, pos := o.Field("retry.attempts")
	require.Equal(t, "retries.attempts", field)
	require.Equal(t, 21, pos.Line)
}

// TestImport_GatewayAndLinkerd: the Gateway API's backoff is a minimum (strategy
// equal, every wait in [backoff, 2 × backoff)); Linkerd's codes become statuses and
// its retries are noted as immediate; a gRPC route becomes a gRPC route.
func TestImport_GatewayAndLinkerd(t *testing.T) {
	set, err := policyk8s.Load("testdata/gateway.yaml")
	require.NoError(t, err)
	im := policyk8s.Import("g.yaml", set)
	r := im.File.Stacks[0].Stack.Retry
	require.Equal(t, "equal", *r.Strategy)
	require.Equal(t, 200*time.Millisecond, r.Base.D)
	require.Equal(t, []int{500, 502, 503, 504}, r.HTTPStatuses)
	require.Equal(t, 0.25, *im.File.Stacks[0].Stack.Budget.Ratio.Ratio)
	require.Equal(t, 5.0, *im.File.Stacks[0].Stack.Budget.Ratio.MinPerSecond)
	require.Equal(t, "POST shop.example.com/cart", *im.File.HTTP.Routes[0].Match)
	require.Equal(t, "shop.Inventory/Reserve", *im.File.GRPC.Routes[0].Name)
	var implementation bool
	for _, n := range im.Notes {
		implementation = implementation || n.Field == "retry.attempts" && n.Reason == config.NoteNotCarried
	}
	require.True(t, implementation, "attempts left to the implementation is noted")

	set, err = policyk8s.Load("testdata/linkerd.yaml")
	require.NoError(t, err)
	im = policyk8s.Import("l.yaml", set)
	r = im.File.Stacks[0].Stack.Retry
	require.Equal(t, 4, *r.Attempts)
	require.Contains(t, r.HTTPStatuses, 429)
	require.Contains(t, r.HTTPStatuses, 599)
	require.Equal(t, 300*time.Millisecond, im.File.Stacks[0].Stack.AttemptTimeout.D)
	require.Equal(t, []string{"UNAVAILABLE"}, im.File.Stacks[1].Stack.Retry.GRPCCodes)
	require.Equal(t, "Linkerd retries at once; the stack waits its back-off between tries", im.Notes[0].Msg)
	require.Equal(t, 9, im.Notes[0].Pos.Line, "placed at retry.linkerd.io/limit")
}
