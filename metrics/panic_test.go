package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// panicInHedge runs a call whose hedged second attempt panics, observed by obs.
func panicInHedge(t *testing.T, obs event.Observer) {
	t.Helper()
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: -1})))).With(policy.Name("orders"), policy.Observe(obs))
	err := p.Do(context.Background(), func(ctx context.Context) error {
		if n, _, _ := callpath.Attempt(ctx); n == 2 {
			panic("attempt exploded")
		}
		<-ctx.Done()
		return ctx.Err()
	})
	var pe *policy.PanicError
	require.ErrorAs(t, err, &pe)
}

func TestObserver_CountsPanics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	panicInHedge(t, obs)
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_panics_total Panics in user code recovered on goroutines Backstop started, by what started them (coalesce, hedge, redeliver/jetstream).
# TYPE backstop_panics_total counter
backstop_panics_total{pipeline="orders",source="hedge"} 1
`), "backstop_panics_total")
	require.NoError(t, err)
}

func TestSlog_LogsPanics(t *testing.T) {
	var buf bytes.Buffer
	panicInHedge(t, metrics.Slog(slog.New(slog.NewJSONHandler(&buf, nil)), slog.LevelError))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, "a hedge scheduled, then the panic")
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &line))
	require.Equal(t, "panic recovered", line["msg"])
	require.Equal(t, "hedge", line["source"])
	require.Equal(t, 2.0, line["attempt"])
	require.True(t, strings.HasPrefix(line["error"].(string), "panic: attempt exploded"), "error = %q", line["error"])
}
