package breaker_test

import (
	"context"
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

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/policy"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestRegistry(t *testing.T) {
	var reg breaker.Registry
	a := must(breaker.New("a", breaker.Options{}))
	b := must(breaker.New("b", breaker.Options{}))
	require.NoError(t, reg.Add(b, a))
	require.ErrorIs(t, reg.Add(must(breaker.New("a", breaker.Options{}))), breaker.ErrDuplicate)
	c := must(breaker.New("c", breaker.Options{}))
	require.ErrorIs(t, reg.Add(c, c), breaker.ErrDuplicate)
	require.Error(t, reg.Add(nil))
	require.Nil(t, reg.Get("c"), "a refused Add adds nothing")
	require.Same(t, a, reg.Get("a"))
	list := reg.List()
	require.Len(t, list, 2)
	require.Equal(t, "a", list[0].Name(), "sorted by name")
}

// fixture builds a registry with a closed breaker and one that opened at the bubble's
// start, then 10 s pass.
func fixture(t *testing.T) *breaker.Registry {
	t.Helper()
	var reg breaker.Registry
	db := must(breaker.New("db", breaker.Options{ConsecutiveFailures: 2}))
	cache := must(breaker.New("cache", breaker.Options{}))
	require.NoError(t, reg.Add(db, cache))
	p := policy.MustWrap(db)
	_ = p.Do(context.Background(), fail)
	_ = p.Do(context.Background(), fail)
	_ = policy.MustWrap(cache).Do(context.Background(), ok)
	time.Sleep(10 * time.Second)
	return &reg
}

func TestHandler_JSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := breaker.Handler(fixture(t))
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
			require.JSONEq(t, `{"breakers": [
				{"name": "cache", "state": "closed", "forced": false, "retry_after_seconds": 0,
				 "counts": {"requests": 1, "total_successes": 1, "total_failures": 0, "total_exclusions": 0, "consecutive_successes": 1, "consecutive_failures": 0}},
				{"name": "db", "state": "open", "forced": false, "retry_after_seconds": 20,
				 "counts": {"requests": 0, "total_successes": 0, "total_failures": 0, "total_exclusions": 0, "consecutive_successes": 0, "consecutive_failures": 0},
				 "opened_at": "2000-01-01T00:00:00Z", "until": "2000-01-01T00:00:30Z",
				 "last_transition": {"from": "closed", "to": "open", "at": "2000-01-01T00:00:00Z"}}
			]}`, w.Body.String())
		}
	})
}

func TestHandler_HTMLGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := httptest.NewRecorder()
		breaker.Handler(fixture(t)).ServeHTTP(w, httptest.NewRequest("GET", "/debug/breakers", nil))
		require.Equal(t, 200, w.Code)
		require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
		got := w.Body.String()
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

func TestHandler_ControlIsOffByDefault(t *testing.T) {
	synctest.Test(t, testControlIsOffByDefault)
}

func testControlIsOffByDefault(t *testing.T) {
	reg := fixture(t)
	w := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/", strings.NewReader(url.Values{"name": {"cache"}, "action": {"open"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	breaker.Handler(reg).ServeHTTP(w, req)
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	require.Equal(t, breaker.StateClosed, reg.Get("cache").State())
}

func TestHandler_Control(t *testing.T) { synctest.Test(t, testControl) }

func testControl(t *testing.T) {
	reg := fixture(t)
	h := breaker.Handler(reg, breaker.AllowControl())
	post := func(name, action string) int {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/debug/breakers", strings.NewReader(url.Values{"name": {name}, "action": {action}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		h.ServeHTTP(w, req)
		return w.Code
	}
	require.Equal(t, http.StatusSeeOther, post("cache", "open"))
	require.Equal(t, breaker.StateOpen, reg.Get("cache").State())
	err := policy.MustWrap(reg.Get("cache")).Do(context.Background(), ok)
	require.True(t, errors.Is(err, breaker.ErrOpen))
	require.Equal(t, http.StatusSeeOther, post("cache", "reset"))
	require.Equal(t, breaker.StateClosed, reg.Get("cache").State())
	require.Equal(t, http.StatusNotFound, post("nope", "open"))
	require.Equal(t, http.StatusBadRequest, post("cache", "explode"))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Contains(t, w.Body.String(), `<button name="action" value="open">`)
	var v map[string]any
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/?format=json", nil))
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
}
