package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestCommittedDashboardIsGenerated: dashboards/backstop.json is what this code
// renders; regenerate with `go run ./dashboards/gen > dashboards/backstop.json`.
func TestCommittedDashboardIsGenerated(t *testing.T) {
	want, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../backstop.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("dashboards/backstop.json is stale: run go run ./dashboards/gen > dashboards/backstop.json")
	}
}

// TestEveryPanelQueriesBackstop: every panel other than a row has a unique id and
// at least one Prometheus query on the ${datasource} variable naming a backstop_ series.
func TestEveryPanelQueriesBackstop(t *testing.T) {
	out, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr       string `json:"expr"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != UID {
		t.Fatalf("uid %q, want %q", d.UID, UID)
	}
	seen := map[int]string{}
	graphs := 0
	for _, p := range d.Panels {
		if prev, dup := seen[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		seen[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		graphs++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if !bytes.Contains([]byte(q.Expr), []byte("backstop_")) || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: query %q on data source %q", p.Title, q.Expr, q.Datasource.UID)
			}
		}
	}
	if graphs < 18 {
		t.Fatalf("%d panels, want at least 18", graphs)
	}
}

// TestQueriesNameNoStage: the dashboard reads what stages publish: rejections,
// waits and backstop_stage_* gauges, whatever their kind. No query names a stage.
func TestQueriesNameNoStage(t *testing.T) {
	out, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"bulkhead", "ratelimit", "rate_limit", "limiter"} {
		if bytes.Contains(bytes.ToLower(out), []byte(stage)) {
			t.Errorf("the dashboard names %q; query backstop_rejections_total, backstop_wait_seconds or backstop_stage_* instead", stage)
		}
	}
	for _, family := range []string{"backstop_rejections_total", "backstop_wait_seconds_bucket", `backstop_stage_.+`} {
		if !bytes.Contains(out, []byte(family)) {
			t.Errorf("no query reads %s", family)
		}
	}
}
