package breakerhttp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/breaker"
)

// DefaultRefresh is how often the HTML page reloads itself.
const DefaultRefresh = 5 * time.Second

// style is the page's stylesheet, allowed by its hash in contentSecurityPolicy.
const style = `
body{font:14px system-ui,sans-serif;margin:1em}table{border-collapse:collapse}
th,td{padding:.3em .5em;border-bottom:1px solid #ddd;text-align:left}
.closed{color:#070}.half_open{color:#a60}.open{color:#c00;font-weight:bold}
.meta{color:#555}.t{white-space:nowrap}form{display:inline}
`

// contentSecurityPolicy is the Content-Security-Policy header of every response.
// Nothing may be loaded or run but the page's own stylesheet, named by its
// SHA-256. The form posts only to the page's own origin. No page may frame it.
var contentSecurityPolicy = "default-src 'none'; style-src '" + styleHash() + "'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func styleHash() string {
	sum := sha256.Sum256([]byte(style))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// secure sets the headers every response carries.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// An Option configures [Handler].
type Option interface{ apply(*handler) }

type optionFunc func(*handler)

func (f optionFunc) apply(h *handler) { f(h) }

// AllowControl lets the handler change breakers. It takes a POST with form values
// name and action=open (ForceOpen) or action=reset (Reset). It is off by default.
// With it, whoever can reach the handler can cut a service off from its
// dependency. So mount it behind your own authentication. Cross-origin POSTs are
// refused (http.CrossOriginProtection). Thus a page on another site cannot make an
// operator's browser press the buttons.
func AllowControl() Option { return optionFunc(func(h *handler) { h.control = true }) }

// RefreshEvery sets how often the HTML page reloads itself; 0 turns reloading off.
// The default is DefaultRefresh (5 s).
func RefreshEvery(d time.Duration) Option {
	return optionFunc(func(h *handler) { h.refresh = max(d, 0) })
}

// WithClock sets the clock the page reads the time from; nil means
// clock.System(). The breakers themselves keep the time of gobreaker.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(h *handler) { h.clock = clock.Or(c) })
}

// Handler serves the state of reg's breakers. It serves JSON for GET with Accept:
// application/json or ?format=json. Otherwise, it serves a small self-contained
// HTML page that refreshes itself. With [AllowControl], it also takes same-origin
// POSTs that force a breaker open or reset it.
//
// JSON form (fields are added, never renamed or removed):
//
//	{"generated_at": "…", "breakers": [{"name": "db", "state": "open", "forced": false,
//	  "counts": {"requests": 5, …}, "tripped_counts": {…}, "opened_at": "…", "until": "…",
//	  "retry_after_seconds": 12.5, "last_transition": {"from": "closed", "to": "open", "at": "…"}}]}
//
// A state, and a transition's from and to, is "closed", "half_open" or "open". The
// page shows the same names, and uses them as CSS classes. The field
// retry_after_seconds is the page's "retry after". It is what a server sends as
// Retry-After for a call the breaker refuses now. When open, it is the time to its
// probes. When forced open, it is its MaxOpenTimeout. Forcing open a closed or
// half-open breaker is a transition. The fields last_transition and opened_at are
// then the forcing's.
func Handler(reg *breaker.Registry, opts ...Option) http.Handler {
	h := &handler{reg: reg, refresh: DefaultRefresh, clock: clock.System()}
	for _, o := range opts {
		if o != nil {
			o.apply(h)
		}
	}
	h.post = http.NewCrossOriginProtection().Handler(http.HandlerFunc(h.control1))
	return h
}

type handler struct {
	reg     *breaker.Registry
	control bool
	refresh time.Duration
	clock   clock.Clock
	post    http.Handler // control1 behind cross-origin protection
}

// jsonSnapshot is the wire form of a breaker.Snapshot.
type jsonSnapshot struct {
	Name       string          `json:"name"`
	State      string          `json:"state"`
	Forced     bool            `json:"forced"`
	Counts     breaker.Counts  `json:"counts"`
	Tripped    *breaker.Counts `json:"tripped_counts,omitempty"`
	OpenedAt   *time.Time      `json:"opened_at,omitempty"`
	Until      *time.Time      `json:"until,omitempty"`
	RetryAfter float64         `json:"retry_after_seconds"`
	Last       *jsonTransition `json:"last_transition,omitempty"`
	// SlowStart is the share of calls a breaker that has just closed lets through,
	// while it ramps its traffic up. It is absent otherwise.
	SlowStart float64 `json:"slow_start_share,omitempty"`
}

type jsonTransition struct {
	From string    `json:"from"`
	To   string    `json:"to"`
	At   time.Time `json:"at"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func wire(s breaker.Snapshot) jsonSnapshot {
	j := jsonSnapshot{
		Name: s.Name, State: s.State.String(), Forced: s.Forced, Counts: s.Counts,
		OpenedAt: timePtr(s.OpenedAt), Until: timePtr(s.Until), RetryAfter: s.RetryAfter.Seconds(), SlowStart: s.SlowStart,
	}
	if s.Tripped != (breaker.Counts{}) {
		t := s.Tripped
		j.Tripped = &t
	}
	if !s.Last.At.IsZero() {
		j.Last = &jsonTransition{From: s.Last.From.String(), To: s.Last.To.String(), At: s.Last.At.UTC()}
	}
	return j
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w.Header())
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if h.control {
			h.post.ServeHTTP(w, r)
			return
		}
		fallthrough
	default:
		allow := "GET, HEAD"
		if h.control {
			allow += ", POST"
		}
		w.Header().Set("Allow", allow)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	now := h.clock.Now()
	snaps := []jsonSnapshot{}
	for _, b := range h.reg.List() {
		snaps = append(snaps, wire(b.Snapshot(now)))
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			GeneratedAt time.Time      `json:"generated_at"`
			Breakers    []jsonSnapshot `json:"breakers"`
		}{now.UTC(), snaps})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, struct {
		Refresh   int
		Control   bool
		Generated time.Time
		Breakers  []jsonSnapshot
	}{int(h.refresh / time.Second), h.control, now.UTC(), snaps})
}

// control1 carries out one operator action.
func (h *handler) control1(w http.ResponseWriter, r *http.Request) {
	name, action := r.FormValue("name"), r.FormValue("action")
	b := h.reg.Get(name)
	if b == nil {
		http.Error(w, "no breaker named "+template.HTMLEscapeString(name), http.StatusNotFound)
		return
	}
	switch action {
	case "open":
		b.ForceOpen()
	case "reset":
		b.Reset()
	default:
		http.Error(w, `action must be "open" or "reset"`, http.StatusBadRequest)
		return
	}
	// Post/redirect/get: a browser reload does not repeat the action.
	w.Header().Set("Location", back(r))
	w.WriteHeader(http.StatusSeeOther)
}

// back returns a reference to the page a form was posted from, relative to the
// request's own URL. It is "./" and the last segment of the path the client asked
// for. It keeps whatever prefix the handler is mounted under: http.StripPrefix
// shortens r.URL.Path, not r.RequestURI. It can never name another host, as the
// path itself would. A handler mounted without a ServeMux gets a path such as
// //evil.example/x as it was sent. As a Location, that is a URL on evil.example.
func back(r *http.Request) string {
	p := r.URL.EscapedPath()
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		p = u.EscapedPath()
	}
	return "./" + p[strings.LastIndexByte(p, '/')+1:]
}

var page = template.Must(template.New("breakers").Funcs(template.FuncMap{
	"ts": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.Format(time.RFC3339)
	},
	"secs": func(f float64) string {
		if f <= 0 {
			return "—"
		}
		return strconv.FormatFloat(math.Ceil(f), 'f', 0, 64) + " s"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{{- if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>Breakers</title>
<style>` + style + `</style></head><body>
<h1>Breakers</h1>
<p class="meta">Generated at <time id="generated">{{.Generated.Format "2006-01-02T15:04:05Z07:00"}}</time>.
{{- if .Refresh}} This page refreshes every {{.Refresh}} s.{{else}} This page does not refresh by itself.{{end}}</p>
{{- if not .Breakers}}<p>No breakers registered.</p>{{else}}
<table><tr><th>name</th><th>state</th><th>requests</th><th>successes</th><th>failures</th><th>excluded</th><th>tripped with</th><th>opened at</th><th>until</th><th>retry after</th><th>last transition</th>{{if .Control}}<th></th>{{end}}</tr>
{{- range .Breakers}}
<tr id="breaker-{{.Name}}"><td>{{.Name}}</td><td class="{{.State}} t">{{.State}}{{if .Forced}} (forced){{end}}</td><td>{{.Counts.Requests}}</td><td>{{.Counts.TotalSuccesses}}</td><td>{{.Counts.TotalFailures}}</td><td>{{.Counts.TotalExclusions}}</td><td>{{with .Tripped}}{{.TotalFailures}} of {{.Requests}} failed, {{.ConsecutiveFailures}} in a row{{else}}—{{end}}</td><td class="t">{{ts .OpenedAt}}</td><td class="t">{{ts .Until}}</td><td class="t">{{secs .RetryAfter}}</td><td>{{with .Last}}<span class="t">{{.From}} → {{.To}}</span> at <time class="t">{{.At.Format "2006-01-02T15:04:05Z07:00"}}</time>{{else}}—{{end}}</td>
{{- if $.Control}}<td class="t"><form method="post"><input type="hidden" name="name" value="{{.Name}}"><button name="action" value="open">force open</button> <button name="action" value="reset">reset</button></form></td>{{end}}</tr>
{{- end}}
</table>{{end}}
</body></html>
`))
