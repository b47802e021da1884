package browsertest

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/breaker/breakerhttp"
	"github.com/backstop-go/backstop/internal/missing"
	"github.com/backstop-go/backstop/policy"
)

// browser starts headless Chromium for one test and returns its context, or skips
// the test if no Chromium is installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		missing.Skip(t, "chromium", "Debian: apt-get install chromium; .ci/run installs it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second) // a bound on a hung browser, not a timed assertion
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

var errDown = errors.New("db down")

// TestBreakersPage loads the inspection page with a breaker in each state, checks the
// rendered text of every row, presses "force open" on the closed one (a same-origin
// POST that must work) and saves a screenshot.
func TestBreakersPage(t *testing.T) {
	ctx := browser(t)

	var reg breaker.Registry
	closed := policy.Must(breaker.New(breaker.Options{Name: "cache"}))
	open := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: time.Hour}))
	half := policy.Must(breaker.New(breaker.Options{Name: "search", ConsecutiveFailures: 1, OpenTimeout: time.Millisecond, OpenJitter: -1}))
	forced := policy.Must(breaker.New(breaker.Options{Name: "payments"}))
	if err := reg.Add(closed, open, half, forced); err != nil {
		t.Fatal(err)
	}
	fail := func(context.Context) error { return errDown }
	_ = policy.Must(policy.Wrap(open)).Do(context.Background(), fail)
	_ = policy.Must(policy.Wrap(half)).Do(context.Background(), fail)
	forced.ForceOpen()
	for half.State() != breaker.StateHalfOpen { // its 1 ms open time passes
		time.Sleep(time.Millisecond)
	}

	srv := httptest.NewServer(breakerhttp.Handler(&reg, breakerhttp.AllowControl(), breakerhttp.RefreshEvery(0)))
	defer srv.Close()

	rowText := func(name string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#breaker-"+name)))
		if err != nil {
			t.Fatalf("reading the row of %s: %v", name, err)
		}
		return strings.Join(strings.Fields(s), " ")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("table"))); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	for _, tt := range []struct{ name, want string }{
		{"cache", "cache closed 0 0 0 0 —"},
		{"db", "db open 0 0 0 0 1 of 1 failed, 1 in a row"},
		{"search", "open → half_open"},
		{"payments", "payments open (forced)"},
	} {
		if got := rowText(tt.name); !strings.Contains(got, tt.want) {
			t.Errorf("row %s reads %q; want it to hold %q", tt.name, got, tt.want)
		}
	}
	if got := rowText("payments"); strings.Contains(got, "open → open") && !strings.Contains(got, "half_open → open") {
		t.Errorf("row payments reads %q; a forced breaker must not say open → open", got)
	}
	// The page's Content-Security-Policy allows its stylesheet (by its hash): the
	// states are coloured.
	if color, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('#breaker-db td.open')).color`)); err != nil || color != "rgb(204, 0, 0)" {
		t.Errorf("the open state is coloured %q (%v); want rgb(204, 0, 0): the policy blocks the stylesheet", color, err)
	}
	if generated, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#generated"))); err != nil || generated == "" {
		t.Errorf("the page does not say when it was generated: %q, %v", generated, err)
	}

	// Same-origin: the button works.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#breaker-cache button[value="open"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#breaker-cache td.open`)),
	); err != nil {
		t.Fatalf("pressing force open on cache: %v", err)
	}
	if closed.State() != breaker.StateOpen {
		t.Errorf("after force open from the page, cache is %v; want open", closed.State())
	}
	if got := rowText("cache"); !strings.Contains(got, "open (forced)") {
		t.Errorf("after force open the row reads %q; want open (forced)", got)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "breakers.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("BROWSERTEST_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "breakers.png"), png, 0o644)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}
