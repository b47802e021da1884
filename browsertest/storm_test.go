package browsertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// stormReport returns the folder of a storm report named by STORM_REPORT, which
// .ci/run sets after it runs go run ./examples/storm; without it the tests that read
// a report skip.
func stormReport(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STORM_REPORT")
	if dir == "" {
		t.Skip("STORM_REPORT is not set: .ci/run sets it to the report of go run ./examples/storm")
	}
	return dir
}

// modeSummary is the part of a mode's entry in summary.json that is checked.
type modeSummary struct {
	UserCalls       int      `json:"user_calls"`
	OK              int      `json:"ok"`
	Failed          int      `json:"failed"`
	Lost            int      `json:"lost"`
	DBOneActionDown *int     `json:"db_requests_one_action_db_down"`
	RecoverySeconds *float64 `json:"recovery_seconds"`
}

// TestStormSummary checks the claims of the storm's summary.json: every call is
// accounted for in every mode, Backstop loses none, and one user action against a
// database that is down costs the naive stack 4 × 4 × 4 = 64 database requests and
// the others at most 4.
func TestStormSummary(t *testing.T) {
	dir := stormReport(t)
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var modes map[string]modeSummary
	if err := json.Unmarshal(b, &modes); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	for _, name := range []string{"naive", "owner_only", "backstop"} {
		m, ok := modes[name]
		if !ok {
			t.Fatalf("summary.json has no mode %q: %s", name, b)
		}
		if m.UserCalls == 0 || m.OK+m.Failed+m.Lost != m.UserCalls {
			t.Errorf("%s: ok %d + failed %d + lost %d ≠ user_calls %d", name, m.OK, m.Failed, m.Lost, m.UserCalls)
		}
		if m.DBOneActionDown == nil {
			t.Errorf("%s: db_requests_one_action_db_down is missing", name)
			continue
		}
		switch n := *m.DBOneActionDown; {
		case name == "naive" && n != 64:
			t.Errorf("naive: one user action, database down, made %d database requests; want 4 × 4 × 4 = 64", n)
		case name != "naive" && n > 4:
			t.Errorf("%s: one user action, database down, made %d database requests; want at most 4", name, n)
		}
	}
	if lost := modes["backstop"].Lost; lost != 0 {
		t.Errorf("backstop lost %d calls; want 0", lost)
	}
}

// TestStormReportPage renders the storm's index.html in Chromium and checks that the
// explanation, the table and every chart are there, with no external asset.
func TestStormReportPage(t *testing.T) {
	dir := stormReport(t)
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`src="http`, `href="http`, `<script`, `<link`} {
		if strings.Contains(string(html), bad) {
			t.Errorf("index.html holds %q; want no external asset", bad)
		}
	}
	ctx := browser(t)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(srv.URL+"/index.html"),
		chromedp.WaitVisible(chromedp.CSS("#table"))); err != nil {
		t.Fatalf("loading the report: %v", err)
	}
	table, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#table")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"naive", "owner_only", "backstop", "database requests for one user action, database down",
		"ok + error + lost = user calls"} {
		if !strings.Contains(table, want) {
			t.Errorf("the rendered table lacks %q:\n%s", want, table)
		}
	}
	what, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#what")))
	if err != nil || !strings.Contains(what, "64") {
		t.Errorf("the what-to-look-at paragraph reads %q (%v); want it to explain the 64", what, err)
	}
	// Every chart decoded: an image that failed to load has naturalWidth 0.
	widths, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[...document.images].map(i => i.naturalWidth)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(widths) < 6 {
		t.Errorf("the report shows %d charts; want at least 6 (one user action, database, goodput, outcomes of each mode)", len(widths))
	}
	// The mission's number has its own chart, first.
	if first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.images[0].id + ': ' + document.images[0].alt`)); err != nil ||
		!strings.HasPrefix(first, "one-action.png") || !strings.Contains(first, "naive 64") {
		t.Errorf("the first chart is %q (%v); want one-action.png, naive 64", first, err)
	}
	// The outcome charts say how to read them.
	if read, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#read-outcomes"))); err != nil || !strings.Contains(read, "when the answer came") {
		t.Errorf("the outcome charts' note reads %q (%v)", read, err)
	}
	// The table fits 1280 px: no line of it scrolls.
	if fit, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(e => [e.scrollWidth, e.clientWidth])(document.querySelector('#table'))`)); err != nil || len(fit) != 2 || fit[0] > fit[1] {
		t.Errorf("the table is [scroll width, box width] %v px (%v); want it to fit at 1280 px", fit, err)
	}
	if w, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`)); err != nil || w > 1280 {
		t.Errorf("the report is %v px wide (%v); want it to fit 1280 px", w, err)
	}
	for i, w := range widths {
		if w == 0 {
			t.Errorf("chart %d did not render", i+1)
		}
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "storm-report.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("BROWSERTEST_SCREENSHOTS"); out != "" {
		_ = os.WriteFile(filepath.Join(out, "storm-report.png"), png, 0o644)
	}
}
