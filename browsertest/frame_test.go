package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/breaker/breakerhttp"
)

// stripping serves h with the named response headers removed: the page as it would
// be served without them.
func stripping(h http.Handler, names ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&stripWriter{ResponseWriter: w, names: names}, r)
	})
}

type stripWriter struct {
	http.ResponseWriter
	names []string
	wrote bool
}

func (w *stripWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	for _, n := range w.names {
		w.Header().Del(n)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *stripWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

// TestBreakersPageCannotBeFramed is a clickjacking attack in Chromium: a page on
// another origin (another port of 127.0.0.1) frames the breakers page over the
// whole window, and a real click lands where the closed breaker's "force open"
// button is. The browser refuses to render the frame, by either header alone, so the
// click presses nothing. The control, the page served without both headers, shows
// the attack the headers stop: the frame renders and the click forces the breaker
// open with a same-origin POST that cross-origin protection cannot tell apart.
func TestBreakersPageCannotBeFramed(t *testing.T) {
	ctx := browser(t)
	const width, height = 1600, 900 // the whole table fits: the button is on screen
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		strip  []string
		framed bool
	}{
		{"as served", nil, false},
		{"without X-Frame-Options", []string{"X-Frame-Options"}, false},
		{"without Content-Security-Policy", []string{"Content-Security-Policy"}, false},
		{"control: without either", []string{"X-Frame-Options", "Content-Security-Policy"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reg breaker.Registry
			cache := policy.Must(breaker.New(breaker.Options{Name: "cache"}))
			if err := reg.Add(cache); err != nil {
				t.Fatal(err)
			}
			posted := make(chan struct{}, 1)
			h := stripping(breakerhttp.Handler(&reg, breakerhttp.AllowControl(), breakerhttp.RefreshEvery(0)), tt.strip...)
			victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r)
				if r.Method == http.MethodPost {
					select {
					case posted <- struct{}{}:
					default:
					}
				}
			}))
			defer victim.Close()
			attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				fmt.Fprintf(w, `<!DOCTYPE html><html><body style="margin:0">
<p>Win a prize: click anywhere!</p>
<iframe id="victim" src="%s/" onload="window.framed=true"
 style="position:fixed;top:0;left:0;width:100%%;height:100%%;border:0"></iframe></body></html>`, victim.URL)
			}))
			defer attacker.Close()

			// Where the button is when the page fills the window, as the frame makes it.
			type point struct{ X, Y float64 }
			if err := chromedp.Do(ctx,
				chromedp.Navigate(victim.URL),
				chromedp.WaitVisible(chromedp.CSS(`#breaker-cache button[value="open"]`)),
			); err != nil {
				t.Fatalf("loading the breakers page: %v", err)
			}
			at, err := chromedp.Run(ctx, chromedp.Evaluate[point](`(() => {
				const r = document.querySelector('#breaker-cache button[value="open"]').getBoundingClientRect();
				return {X: r.left + r.width/2, Y: r.top + r.height/2}; })()`))
			if err != nil {
				t.Fatalf("finding the button: %v", err)
			}
			if at.X <= 0 || at.X >= width || at.Y <= 0 || at.Y >= height {
				t.Fatalf("the button is at %+v, off a %d×%d window", at, width, height)
			}

			if err := chromedp.Do(ctx,
				chromedp.Navigate(attacker.URL),
				chromedp.Steps(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := chromedp.Poll[chromedp.Void](`window.framed === true`)(ctx, tg) // the frame's load event: it fires for a refused frame too
					return err
				})),
			); err != nil {
				t.Fatalf("loading the framing page: %v", err)
			}
			tree, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (*page.FrameTree, error) {
				r, err := cdp.Call(ctx, tg, page.GetFrameTree, cdp.Empty{})
				if err != nil {
					return nil, err
				}
				return r.FrameTree, nil
			})
			if err != nil {
				t.Fatalf("reading the frame tree: %v", err)
			}
			if len(tree.ChildFrames) != 1 {
				t.Fatalf("the framing page has %d frames; want 1", len(tree.ChildFrames))
			}
			frame := tree.ChildFrames[0].Frame
			rendered := strings.HasPrefix(frame.URL, victim.URL)
			if rendered != tt.framed {
				t.Fatalf("the frame holds %q (unreachable %q): rendered %v; want %v", frame.URL, frame.UnreachableURL, rendered, tt.framed)
			}

			if err := chromedp.Do(ctx, chromedp.MouseClickXY(at.X, at.Y)); err != nil {
				t.Fatalf("clicking: %v", err)
			}
			if tt.framed {
				select {
				case <-posted:
				case <-ctx.Done():
					t.Fatal("the click on the framed page posted nothing: the control does not show the attack")
				}
				if cache.State() != breaker.StateOpen {
					t.Fatalf("after the click on the framed page cache is %v; the control expects the attack to work", cache.State())
				}
				return
			}
			// The frame holds the browser's error page: nothing there to press.
			t.Logf("the refused frame holds %q", frame.URL)
			if cache.State() != breaker.StateClosed {
				t.Errorf("after the click cache is %v; want closed", cache.State())
			}
		})
	}
}
