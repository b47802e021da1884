package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/throttle"
)

func TestObserver_AddThrottle(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	th := policy.Must(throttle.New(throttle.Options{Name: "inventory", Rand: policytest.NewRand(0)})) // refuses whenever p > 0
	require.NoError(t, obs.AddThrottle("inventory", th))
	require.NoError(t, obs.AddThrottle("inventory", th), "the same throttle again")
	require.ErrorIs(t, obs.AddThrottle("inventory", policy.Must(throttle.New(throttle.Options{Name: "inventory"}))), metrics.ErrInvalidOptions, "another under its name")
	require.ErrorIs(t, obs.AddThrottle("x", nil), metrics.ErrInvalidOptions)

	p := policy.Must(policy.Wrap(th))
	overloaded := func(context.Context) error { return shedRefusal{} }
	for range 3 {
		_ = p.Do(context.Background(), overloaded)
	}
	// 1st: sent, refused by the backend (p was 0); 2nd: p = 1/2, refused locally; 3rd: p = 2/3, refused.
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_throttle_probability The chance that a client-side adaptive throttle refuses a request now.
# TYPE backstop_throttle_probability gauge
backstop_throttle_probability{throttle="inventory"} 0.75
# HELP backstop_throttle_refused_total Requests a client-side adaptive throttle refused locally.
# TYPE backstop_throttle_refused_total counter
backstop_throttle_refused_total{throttle="inventory"} 2
`), "backstop_throttle_probability", "backstop_throttle_refused_total")
	require.NoError(t, err)
}

// shedRefusal is a backend's refusal of work, as policyhttp reports a 429.
type shedRefusal struct{}

func (shedRefusal) Error() string        { return "429" }
func (shedRefusal) Is(target error) bool { return target == policy.ErrRejected }
