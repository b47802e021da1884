package browsertest

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/breaker/breakerhttp"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
)

// wrapped is a script that lists the values on the page that a line break splits:
// every timestamp, every cell kept on one line (class t) and every button whose text
// the browser laid out on more than one line (text more than half a line
// apart in height).
const wrapped = `(() => {
  const bad = [];
  for (const el of document.querySelectorAll('time, .t, button')) {
    const tops = [];
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      const r = document.createRange();
      r.selectNodeContents(n);
      for (const x of r.getClientRects()) if (x.width > 0) tops.push(x.top);
    }
    if (Math.max(...tops) - Math.min(...tops) > 8) bad.push(el.tagName + ': ' + el.textContent.trim()); // a line is 16 px
  }
  return bad;
})()`

// halfOpen returns a breaker that tripped and whose 1 ms open time is up: it reads
// half-open, gobreaker not having moved it yet.
func halfOpen(t *testing.T, name string) *breaker.Breaker {
	t.Helper()
	b := policy.Must(breaker.New(breaker.Options{Name: name, ConsecutiveFailures: 1, OpenTimeout: time.Millisecond, MaxOpenTimeout: time.Millisecond, OpenJitter: -1}))
	_ = policy.Must(policy.Wrap(b)).Do(context.Background(), func(context.Context) error { return errDown })
	for b.State() != breaker.StateHalfOpen { // waits for the state, asserts nothing on time
		time.Sleep(time.Millisecond)
	}
	return b
}

// TestBreakersPageStates loads the page at 1280 × 800 with one breaker in each state —
// closed, open, half-open, forced open from closed, forced open from half-open by
// pressing the page's own button — and checks for each that the row says what
// happened, that no timestamp, state or button breaks across lines, that the table
// fits the window, and that a forced breaker's retry-after is the Retry-After of the
// 503 a server sends for its refusal. It saves a screenshot per state
// (breakers-<state>.png in BROWSERTEST_SCREENSHOTS when set).
func TestBreakersPageStates(t *testing.T) {
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	fail := func(context.Context) error { return errDown }
	for _, tt := range []struct {
		state string
		setup func(t *testing.T) *breaker.Breaker
		press bool     // press "force open" on the page
		want  []string // in the row's text
		not   []string
	}{
		{state: "closed", setup: func(*testing.T) *breaker.Breaker {
			b := policy.Must(breaker.New(breaker.Options{Name: "db"}))
			_ = policy.Must(policy.Wrap(b)).Do(context.Background(), func(context.Context) error { return nil })
			return b
		}, want: []string{"db closed 1 1 0 0 —"}},
		{state: "open", setup: func(*testing.T) *breaker.Breaker {
			b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 2, OpenTimeout: time.Hour, MaxOpenTimeout: time.Hour, OpenJitter: -1}))
			p := policy.Must(policy.Wrap(b))
			_, _ = p.Do(context.Background(), fail), p.Do(context.Background(), fail)
			return b
		}, want: []string{"db open 0 0 0 0 2 of 2 failed, 2 in a row", "3600 s", "closed → open at"}},
		{state: "half-open", setup: func(t *testing.T) *breaker.Breaker { return halfOpen(t, "db") },
			want: []string{"db half_open", "open → half_open at"}},
		{state: "forced-from-closed", setup: func(*testing.T) *breaker.Breaker { return policy.Must(breaker.New(breaker.Options{Name: "db"})) },
			press: true, want: []string{"db open (forced)", "1 s", "closed → open at"}},
		{state: "forced-from-half-open", setup: func(t *testing.T) *breaker.Breaker { return halfOpen(t, "db") },
			press: true, want: []string{"db open (forced)", "1 s", "half_open → open at"}, not: []string{"closed → open"}},
	} {
		t.Run(tt.state, func(t *testing.T) {
			var reg breaker.Registry
			b := tt.setup(t)
			if err := reg.Add(b); err != nil {
				t.Fatal(err)
			}
			before := b.Snapshot(time.Now())
			srv := httptest.NewServer(breakerhttp.Handler(&reg, breakerhttp.AllowControl(), breakerhttp.RefreshEvery(0)))
			defer srv.Close()
			if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("table"))); err != nil {
				t.Fatalf("loading the page: %v", err)
			}
			if tt.press {
				if err := chromedp.Do(ctx,
					chromedp.Click(chromedp.CSS(`#breaker-db button[value="open"]`)),
					chromedp.WaitVisible(chromedp.CSS(`#breaker-db td.open`))); err != nil {
					t.Fatalf("pressing force open: %v", err)
				}
			}
			text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#breaker-db")))
			if err != nil {
				t.Fatal(err)
			}
			text = strings.Join(strings.Fields(text), " ")
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("the row reads %q; want it to hold %q", text, w)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(text, w) {
					t.Errorf("the row reads %q; want no %q", text, w)
				}
			}
			if tt.press {
				s := b.Snapshot(time.Now())
				if !s.OpenedAt.After(before.OpenedAt) || !s.Last.At.After(before.Last.At) {
					t.Errorf("forced open at %v after %v: opened at %v, last transition %v; want both moved forward",
						s.Last.At, before.Last, s.OpenedAt, s.Last)
				}
				if opened := s.OpenedAt.UTC().Format(time.RFC3339); !strings.Contains(text, opened) {
					t.Errorf("the row reads %q; want opened at %s", text, opened)
				}
				// The 503 a server sends for the refusal says what the page says.
				w := httptest.NewRecorder()
				if !policyhttp.WriteRejection(w, policy.Must(policy.Wrap(b)).Do(context.Background(), fail)) {
					t.Fatal("a forced breaker did not refuse")
				}
				if ra := w.Header().Get("Retry-After"); !strings.Contains(text, " "+ra+" s ") {
					t.Errorf("the 503 sends Retry-After: %s; the row reads %q", ra, text)
				}
			}
			broken, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](wrapped))
			if err != nil {
				t.Fatal(err)
			}
			if len(broken) > 0 {
				t.Errorf("values broken across lines at 1280 px: %q", broken)
			}
			if w, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`)); err != nil || w > 1280 {
				t.Errorf("the page is %v px wide (%v); want it to fit 1280 px", w, err)
			}
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("screenshot: %v", err)
			}
			name := "breakers-" + tt.state + ".png"
			if err := os.WriteFile(filepath.Join(t.TempDir(), name), png, 0o644); err != nil {
				t.Fatal(err)
			}
			if dir := os.Getenv("BROWSERTEST_SCREENSHOTS"); dir != "" {
				if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
