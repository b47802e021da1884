// Command gen writes dashboards/backstop.json, Backstop's Grafana dashboard, from
// code: one panel for each question an on-call engineer asks of the backstop_*
// series package metrics exports.
//
//	go run ./dashboards/gen > dashboards/backstop.json
//
// The test in this directory fails when the committed JSON and this code disagree.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's stable identifier, so links to it survive re-imports.
const UID = "backstop-overview"

func main() {
	out, err := Render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

// Render returns the dashboard as indented JSON ending in a newline.
func Render() ([]byte, error) {
	d, err := Dashboard().Build()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(ds).Expr(expr).LegendFormat(legend)
}

var legend = common.NewVizLegendOptionsBuilder().ShowLegend(true).
	DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)

func series(title, description, unit string, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Id(id()).Title(title).Description(description).Datasource(ds).
		Unit(unit).Min(0).Span(12).Height(8).Legend(legend)
	for _, t := range targets {
		p = p.WithTarget(t)
	}
	return p
}

// ids numbers panels and rows in order, so each has its own id as Grafana expects.
var ids uint32

func id() uint32 { ids++; return ids }

// Dashboard builds the dashboard: calls and retries per pipeline, why retries
// were refused, breaker states, shedding, budgets, latency, coalescing caches,
// redelivery, fallbacks, and what every stage reports: rejections, waits and the
// gauges it publishes.
//
//lint:ignore SA1019 the v1 dashboard model is the JSON Grafana imports today; dashboardv2 needs Grafana 12's v2 API
func Dashboard() *dashboard.DashboardBuilder {
	const pipe = `pipeline=~"$pipeline"`
	ids = 0
	//lint:ignore SA1019 see Dashboard's doc
	return dashboard.NewDashboardBuilder("Backstop").
		Uid(UID).
		Description("Calls, retries, suppressed retries, breakers, shedding and budgets from Backstop's backstop_* series.").
		Tags([]string{"backstop", "resilience"}).
		Refresh("30s").
		Time("now-1h", "now").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("pipeline").Label("Pipeline").Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(backstop_calls_total, pipeline)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Multi(true).IncludeAll(true).AllValue(".*")).
		WithRow(dashboard.NewRowBuilder("Pipelines").Id(id())).
		WithPanel(series("Calls by outcome", "Calls that left each pipeline, by outcome.", "reqps",
			query(`sum by (pipeline, outcome) (rate(backstop_calls_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}} {{outcome}}"))).
		WithPanel(series("Retry ratio", "Retries per call: the share of extra load a pipeline puts on its dependency. Alert BackstopRetryRateHigh fires above 10 %.", "percentunit",
			query(`sum by (pipeline) (rate(backstop_retries_total{`+pipe+`}[$__rate_interval])) / sum by (pipeline) (rate(backstop_calls_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}}"))).
		WithPanel(series("Retries by reason", "Retries scheduled, by why the error was retryable.", "reqps",
			query(`sum by (pipeline, reason) (rate(backstop_retries_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}} {{reason}}"))).
		WithPanel(series("Retries suppressed", "Retries that would have happened and did not: owner (another layer owns retries), budget, deadline, hint.", "reqps",
			query(`sum by (pipeline, why) (rate(backstop_retries_suppressed_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}} {{why}}"))).
		WithPanel(series("Call latency p50 / p99", "Time calls spent in a pipeline, retries and backoff included.", "s",
			query(`histogram_quantile(0.5, sum by (pipeline, le) (rate(backstop_call_duration_seconds_bucket{`+pipe+`}[$__rate_interval])))`, "{{pipeline}} p50"),
			query(`histogram_quantile(0.99, sum by (pipeline, le) (rate(backstop_call_duration_seconds_bucket{`+pipe+`}[$__rate_interval])))`, "{{pipeline}} p99"))).
		WithPanel(series("Deadlines exceeded", "Calls (deadline) or attempts (attempt_timeout) whose time ran out.", "reqps",
			query(`sum by (pipeline, kind) (rate(backstop_deadlines_exceeded_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}} {{kind}}"))).
		WithRow(dashboard.NewRowBuilder("Breakers and budgets").Id(id())).
		WithPanel(statetimeline.NewPanelBuilder().Id(id()).Title("Breaker state").
			Description("Each breaker's state. Alert BackstopBreakerOpen fires after 5 minutes open.").
			Datasource(ds).Span(12).Height(8).
			Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText,
				Options: map[string]dashboard.ValueMappingResult{
					"0": {Text: cog.ToPtr("closed"), Color: cog.ToPtr("green")},
					"1": {Text: cog.ToPtr("half-open"), Color: cog.ToPtr("yellow")},
					"2": {Text: cog.ToPtr("open"), Color: cog.ToPtr("red")},
				}}}}).
			WithTarget(query(`max by (breaker) (backstop_breaker_state)`, "{{breaker}}"))).
		WithPanel(series("Breaker transitions", "Breaker state changes.", "short",
			query(`sum by (breaker, from, to) (increase(backstop_breaker_transitions_total[$__rate_interval]))`, "{{breaker}} {{from}}→{{to}}"))).
		WithPanel(series("Retry budget level", "Retries each budget would allow now. At zero, retries are refused (BackstopRetryBudgetExhausted).", "short",
			query(`backstop_budget_level`, "{{budget}}"))).
		WithPanel(series("Attempts by outcome", "Attempts each pipeline's retry made.", "reqps",
			query(`sum by (pipeline, outcome) (rate(backstop_attempts_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}} {{outcome}}"))).
		WithRow(dashboard.NewRowBuilder("Load shedding").Id(id())).
		WithPanel(stat.NewPanelBuilder().Id(id()).Title("Shed ratio").
			Description("Share of requests each shedder refused. Alert BackstopShedRateHigh fires above 5 %.").
			Datasource(ds).Unit("percentunit").Span(6).Height(8).
			WithTarget(query(`sum by (shedder) (rate(backstop_shed_requests_total[$__rate_interval])) / (sum by (shedder) (rate(backstop_shed_requests_total[$__rate_interval])) + sum by (shedder) (rate(backstop_shed_admitted_total[$__rate_interval])))`, "{{shedder}}"))).
		WithPanel(series("Shed by reason", "Requests refused, by reason and priority.", "reqps",
			query(`sum by (shedder, reason, priority) (rate(backstop_shed_requests_total[$__rate_interval]))`, "{{shedder}} {{reason}} {{priority}}")).Span(18)).
		WithPanel(series("In flight, limit and queue", "Admitted requests against the concurrency limit, and the queue behind them.", "short",
			query(`backstop_shed_inflight`, "{{shedder}} in flight"),
			query(`backstop_shed_limit`, "{{shedder}} limit"),
			query(`backstop_shed_queue_length`, "{{shedder}} queued"))).
		WithPanel(series("Retry-After sent p50 / p99", "The Retry-After refusals carried, so clients spread their return.", "s",
			query(`histogram_quantile(0.5, sum by (shedder, le) (rate(backstop_shed_retry_after_seconds_bucket[$__rate_interval])))`, "{{shedder}} p50"),
			query(`histogram_quantile(0.99, sum by (shedder, le) (rate(backstop_shed_retry_after_seconds_bucket[$__rate_interval])))`, "{{shedder}} p99"))).
		WithRow(dashboard.NewRowBuilder("Coalescing caches").Id(id())).
		WithPanel(series("Cache gets by result", "Gets of each coalescing cache: hit, miss, coalesced (waited for another caller's load), stale (a stale value served).", "reqps",
			query(`sum by (cache, result) (rate(backstop_cache_requests_total[$__rate_interval]))`, "{{cache}} {{result}}"))).
		WithPanel(series("Origin loads and failures", "Loads each cache sent to its origin, and those that failed: one per key per expiry when coalescing works.", "reqps",
			query(`sum by (cache) (rate(backstop_cache_refreshes_total[$__rate_interval]))`, "{{cache}} loads"),
			query(`sum by (cache) (rate(backstop_cache_load_errors_total[$__rate_interval]))`, "{{cache}} failed"))).
		WithRow(dashboard.NewRowBuilder("Queues and jobs").Id(id())).
		WithPanel(series("Deliveries, redeliveries and dead-letters", "What each redelivery policy decided per second: every delivery, those redelivered, those dead-lettered by reason.", "reqps",
			query(`sum by (queue) (rate(backstop_redeliver_deliveries_total[$__rate_interval]))`, "{{queue}} deliveries"),
			query(`sum by (queue) (rate(backstop_redeliver_delay_seconds_count[$__rate_interval]))`, "{{queue}} redelivered"),
			query(`sum by (queue, reason) (rate(backstop_redeliver_dead_lettered_total[$__rate_interval]))`, "{{queue}} dead-lettered {{reason}}"))).
		WithPanel(series("Redelivery delay p50 / p99", "The delays redeliveries were asked to wait: growing delays mean jobs keep failing.", "s",
			query(`histogram_quantile(0.5, sum by (queue, le) (rate(backstop_redeliver_delay_seconds_bucket[$__rate_interval])))`, "{{queue}} p50"),
			query(`histogram_quantile(0.99, sum by (queue, le) (rate(backstop_redeliver_delay_seconds_bucket[$__rate_interval])))`, "{{queue}} p99"))).
		WithRow(dashboard.NewRowBuilder("Fallbacks and stages").Id(id())).
		WithPanel(series("Fallback ratio", "Share of each pipeline's calls a fallback answered. Alert BackstopFallbackRateHigh fires above 5 %.", "percentunit",
			query(`sum by (pipeline) (rate(backstop_fallbacks_total{`+pipe+`}[$__rate_interval])) / sum by (pipeline) (rate(backstop_calls_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}}"))).
		WithPanel(series("Fallbacks by reason", "Failed calls a fallback answered, by the failure (failure, rejected, deadline) and what answered (value, func, last_good).", "reqps",
			query(`sum by (pipeline, fallback, reason, from) (rate(backstop_fallbacks_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}} {{reason}} by {{from}}"))).
		WithPanel(series("Rejections by stage", "Calls or attempts a stage rejected client-side, by the stage's kind (policy), its name and why.", "reqps",
			query(`sum by (pipeline, policy, name, reason) (rate(backstop_rejections_total{`+pipe+`}[$__rate_interval]))`, "{{pipeline}} {{policy}} {{name}} {{reason}}"))).
		WithPanel(series("Waits p50 / p99", "How long stages held calls before letting them through.", "s",
			query(`histogram_quantile(0.5, sum by (policy, name, le) (rate(backstop_wait_seconds_bucket[$__rate_interval])))`, "{{policy}} {{name}} p50"),
			query(`histogram_quantile(0.99, sum by (policy, name, le) (rate(backstop_wait_seconds_bucket[$__rate_interval])))`, "{{policy}} {{name}} p99"))).
		WithPanel(series("Published gauges", "Every gauge a stage publishes (policy.Gauge): a line per stage kind (policy), name and gauge.", "short",
			query(`{__name__=~"backstop_stage_.+"}`, "{{policy}} {{name}} {{__name__}}")))
}
