package breakerhttp_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/breaker/breakerhttp"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite golden files")

var errDown = errors.New("db down")

func fail(context.Context) error { return errDown }
func ok(context.Context) error   { return nil }

// fixture builds, in a synctest bubble starting 2000-01-01, a registry with a closed
// breaker and one that tripped on 2 failures at the start; then 10 s pass.
func fixture(t *testing.T) *breaker.Registry {
	t.Helper()
	var reg breaker.Registry
	db := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 2, OpenTimeout: 30 * time.Second, MaxOpenTimeout: 30 * time.Second, OpenJitter: -1}))
	cache := policy.Must(breaker.New(breaker.Options{Name: "cache"}))
	require.NoError(t, reg.Add(db, cache))
	p := policy.Must(policy.Wrap(db))
	_ = p.Do(context.Background(), fail)
	_ = p.Do(context.Background(), fail)
	_ = policy.Must(policy.Wrap(cache)).Do(context.Background(), ok)
	time.Sleep(10 * time.Second)
	return &reg
}

func TestHandler_JSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := breakerhttp.Handler(fixture(t))
		for _, req := range []*http.Request{
			httptest.NewRequest("GET", "/debug/breakers?format=json", nil),
			func() *http.Request {
				r := httptest.NewRequest("GET", "/debug/breakers", nil)
				r.Header.Set("Accept", "application/json")
				return r
			}(),
		} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, 200, w.Code)
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.JSONEq(t, `{"generated_at": "2000-01-01T00:00:10Z", "breakers": [
				{"name": "cache", "state": "closed", "forced": false, "retry_after_seconds": 0,
				 "counts": {"requests": 1, "total_successes": 1, "total_failures": 0, "total_exclusions": 0, "consecutive_successes": 1, "consecutive_failures": 0}},
				{"name": "db", "state": "open", "forced": false, "retry_after_seconds": 20,
				 "counts": {"requests": 0, "total_successes": 0, "total_failures": 0, "total_exclusions": 0, "consecutive_successes": 0, "consecutive_failures": 0},
				 "tripped_counts": {"requests": 2, "total_successes": 0, "total_failures": 2, "total_exclusions": 0, "consecutive_successes": 0, "consecutive_failures": 2},
				 "opened_at": "2000-01-01T00:00:00Z", "until": "2000-01-01T00:00:30Z",
				 "last_transition": {"from": "closed", "to": "open", "at": "2000-01-01T00:00:00Z"}}
			]}`, w.Body.String())
		}
	})
}

func get(t *testing.T, h http.Handler) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/debug/breakers", nil))
	require.Equal(t, 200, w.Code)
	require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	return w.Body.String()
}

func TestHandler_HTMLGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := get(t, breakerhttp.Handler(fixture(t)))
		require.NotContains(t, got, "http://", "the page loads no external assets")
		require.NotContains(t, got, "https://")
		const golden = "testdata/handler.golden.html"
		if *update {
			require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
		}
		want, err := os.ReadFile(golden)
		require.NoError(t, err)
		require.Equal(t, string(want), got)
	})
}

// row returns the page's table row of the breaker named name.
func row(t *testing.T, page, name string) string {
	t.Helper()
	i := strings.Index(page, `<tr id="breaker-`+name+`">`)
	require.GreaterOrEqual(t, i, 0, "no row for %s in\n%s", name, page)
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}

func TestHandler_PageSaysWhatHappened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := fixture(t)
		h := breakerhttp.Handler(reg)
		page := get(t, h)
		require.Contains(t, page, "Generated at <time id=\"generated\">2000-01-01T00:00:10Z</time>")
		require.Contains(t, page, "refreshes every 5 s")
		db := row(t, page, "db")
		require.Contains(t, db, "2 of 2 failed, 2 in a row", "the counts at the moment of tripping")
		require.Contains(t, db, `<td class="t">20 s</td>`, "retry after")

		// Half-open: its time is up, gobreaker has not moved yet.
		time.Sleep(20*time.Second + time.Nanosecond)
		db = row(t, get(t, h), "db")
		require.Contains(t, db, `class="half_open t">half_open`)
		require.Contains(t, db, `open → half_open</span> at <time class="t">2000-01-01T00:00:30Z</time>`)

		// Forced open from closed: closed → open, never open → open.
		reg.Get("cache").ForceOpen()
		cache := row(t, get(t, h), "cache")
		require.Contains(t, cache, "open (forced)")
		require.Contains(t, cache, "closed → open")
		require.NotContains(t, cache, "<td>open → open")

		// Forced open while open: the last transition stays the real one.
		reg.Get("cache").Reset()
		_ = policy.Must(policy.Wrap(reg.Get("db"))).Do(context.Background(), fail) // the probe fails: open again
		reg.Get("db").ForceOpen()
		db = row(t, get(t, h), "db")
		require.Contains(t, db, "open (forced)")
		require.Contains(t, db, "half_open → open")
		require.NotContains(t, db, "<td>open → open")
	})
}

func TestHandler_ControlIsOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := fixture(t)
		w := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/", strings.NewReader(url.Values{"name": {"cache"}, "action": {"open"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		breakerhttp.Handler(reg).ServeHTTP(w, req)
		require.Equal(t, http.StatusMethodNotAllowed, w.Code)
		require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
		require.Equal(t, breaker.StateClosed, reg.Get("cache").State())
	})
}

// post sends an operator action with the given extra headers and returns the status.
func post(h http.Handler, name, action string, hdr ...string) int {
	w := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://example.test/debug/breakers", strings.NewReader(url.Values{"name": {name}, "action": {action}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	h.ServeHTTP(w, req)
	return w.Code
}

func TestHandler_Control(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := fixture(t)
		h := breakerhttp.Handler(reg, breakerhttp.AllowControl())
		require.Equal(t, http.StatusSeeOther, post(h, "cache", "open", "Sec-Fetch-Site", "same-origin"))
		require.Equal(t, breaker.StateOpen, reg.Get("cache").State())
		err := policy.Must(policy.Wrap(reg.Get("cache"))).Do(context.Background(), ok)
		require.True(t, errors.Is(err, breaker.ErrOpen))
		require.Equal(t, http.StatusSeeOther, post(h, "cache", "reset", "Origin", "http://example.test"))
		require.Equal(t, breaker.StateClosed, reg.Get("cache").State())
		require.Equal(t, http.StatusNotFound, post(h, "nope", "open"))
		require.Equal(t, http.StatusBadRequest, post(h, "cache", "explode"))

		page := get(t, h)
		require.Contains(t, page, `<button name="action" value="open">`)
		var v map[string]any
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/?format=json", nil))
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
	})
}

// TestHandler_RefusesCrossSiteControl: a page on another site that posts the form
// (a CSRF) is refused, and the breaker stays closed.
func TestHandler_RefusesCrossSiteControl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := fixture(t)
		h := breakerhttp.Handler(reg, breakerhttp.AllowControl())
		require.Equal(t, http.StatusForbidden, post(h, "cache", "open", "Sec-Fetch-Site", "cross-site"))
		require.Equal(t, http.StatusForbidden, post(h, "cache", "open", "Origin", "https://evil.test"))
		require.Equal(t, breaker.StateClosed, reg.Get("cache").State(), "the breaker stays closed")
	})
}

// TestHandler_ForbidsFraming: every response — the page, its JSON, an action's
// redirect, a refusal — tells the browser that no page may frame it, and the page's
// policy lets it load nothing but its own stylesheet, named by its hash.
func TestHandler_ForbidsFraming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := breakerhttp.Handler(fixture(t), breakerhttp.AllowControl())
		responses := map[string]*httptest.ResponseRecorder{}
		serve := func(name string, req *http.Request) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			responses[name] = w
		}
		serve("page", httptest.NewRequest("GET", "/debug/breakers", nil))
		serve("json", httptest.NewRequest("GET", "/debug/breakers?format=json", nil))
		form := func(hdr ...string) *http.Request {
			req := httptest.NewRequest("POST", "http://example.test/debug/breakers", strings.NewReader("name=cache&action=reset"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			return req
		}
		serve("action", form("Sec-Fetch-Site", "same-origin"))
		serve("cross-site action", form("Sec-Fetch-Site", "cross-site"))
		serve("wrong method", httptest.NewRequest("PUT", "/debug/breakers", nil))
		require.Equal(t, http.StatusSeeOther, responses["action"].Code)
		require.Equal(t, http.StatusForbidden, responses["cross-site action"].Code)

		for name, w := range responses {
			require.Equal(t, "DENY", w.Header().Get("X-Frame-Options"), "%s: X-Frame-Options", name)
			require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"), "%s: X-Content-Type-Options", name)
			csp := w.Header().Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
				require.Contains(t, csp, want, "%s: Content-Security-Policy", name)
			}
		}

		page := responses["page"].Body.String()
		require.NotContains(t, page, "<script", "the policy runs no script")
		require.NotContains(t, page, " style=", "the policy blocks style attributes")
		i, j := strings.Index(page, "<style>"), strings.Index(page, "</style>")
		require.True(t, i >= 0 && j > i, "the page has its stylesheet")
		sum := sha256.Sum256([]byte(page[i+len("<style>") : j]))
		hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		require.Contains(t, responses["page"].Header().Get("Content-Security-Policy"), "style-src "+hash,
			"the policy allows the page's stylesheet by its hash")
	})
}

// TestHandler_NoOpenRedirect: after an action the browser goes back to the page it
// posted from, on the same host, however the handler is mounted. Mounted without a
// ServeMux, a POST to //evil.example/x must not send it to evil.example.
func TestHandler_NoOpenRedirect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := breakerhttp.Handler(fixture(t), breakerhttp.AllowControl())
		mux := http.NewServeMux()
		mux.Handle("/debug/breakers/", h)
		for _, tt := range []struct {
			name   string
			h      http.Handler
			target string // the request-target the client sends
			want   string // where the browser lands
		}{
			{"bare, scheme-relative path", h, "//evil.example/x", "http://example.test//evil.example/x"},
			{"bare, scheme-relative, trailing slash", h, "//evil.example/", "http://example.test//evil.example/"},
			{"bare, backslashes", h, `/\evil.example/x`, `http://example.test/%5Cevil.example/x`},
			{"bare, a colon in the last segment", h, "/javascript:alert(1)", "http://example.test/javascript:alert(1)"},
			{"bare", h, "/debug/breakers", "http://example.test/debug/breakers"},
			{"under a ServeMux", mux, "/debug/breakers/", "http://example.test/debug/breakers/"},
			{"under StripPrefix", http.StripPrefix("/debug/breakers", h), "/debug/breakers", "http://example.test/debug/breakers"},
			{"under StripPrefix, trailing slash", http.StripPrefix("/debug/breakers", h), "/debug/breakers/", "http://example.test/debug/breakers/"},
		} {
			req := httptest.NewRequest("POST", tt.target, strings.NewReader("name=cache&action=reset"))
			req.Host = "example.test"
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			w := httptest.NewRecorder()
			tt.h.ServeHTTP(w, req)
			require.Equal(t, http.StatusSeeOther, w.Code, tt.name)
			loc, err := url.Parse(w.Header().Get("Location"))
			require.NoError(t, err, tt.name)
			base, err := url.Parse("http://example.test" + tt.target)
			require.NoError(t, err, tt.name)
			got := base.ResolveReference(loc)
			require.Equal(t, "example.test", got.Host, "%s: POST %s redirects to %q", tt.name, tt.target, w.Header().Get("Location"))
			require.Equal(t, tt.want, got.String(), "%s: POST %s redirects to %q", tt.name, tt.target, w.Header().Get("Location"))
		}
	})
}

// TestHandler_ForcedFromHalfOpen: forcing open a breaker that reads half-open is a
// transition now — the page's last transition and opened-at move forward to it, never
// back to the trip before — and the page's retry-after is the Retry-After a server's
// 503 sends for the refusal (policyhttp.WriteRejection).
func TestHandler_ForcedFromHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := fixture(t)
		h := breakerhttp.Handler(reg)
		time.Sleep(25 * time.Second) // 00:00:35: db's 30 s are up, it reads half-open
		db := reg.Get("db")
		db.ForceOpen()
		page := row(t, get(t, h), "db")
		require.Contains(t, page, "open (forced)")
		require.Contains(t, page, `half_open → open</span> at <time class="t">2000-01-01T00:00:35Z</time>`)
		require.Contains(t, page, `<td class="t">2000-01-01T00:00:35Z</td>`, "opened at is the forcing")
		require.NotContains(t, page, "00:00:00Z", "nothing on the row goes back to the trip")

		err := policy.Must(policy.Wrap(db)).Do(context.Background(), ok)
		w := httptest.NewRecorder()
		require.True(t, policyhttp.WriteRejection(w, err))
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		require.Equal(t, "30", w.Header().Get("Retry-After"))
		require.Contains(t, page, `<td class="t">30 s</td>`, "the page says the Retry-After the 503 sends")

		var got struct {
			Breakers []struct {
				Name       string                        `json:"name"`
				RetryAfter float64                       `json:"retry_after_seconds"`
				OpenedAt   string                        `json:"opened_at"`
				Last       struct{ From, To, At string } `json:"last_transition"`
			} `json:"breakers"`
		}
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/?format=json", nil))
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
		require.Equal(t, "db", got.Breakers[1].Name)
		require.Equal(t, 30.0, got.Breakers[1].RetryAfter)
		require.Equal(t, "2000-01-01T00:00:35Z", got.Breakers[1].OpenedAt)
		require.Equal(t, "half_open", got.Breakers[1].Last.From)
		require.Equal(t, "2000-01-01T00:00:35Z", got.Breakers[1].Last.At)
	})
}
