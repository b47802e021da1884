package breaker

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// HandlerOption configures [Handler].
type HandlerOption interface{ apply(*handler) }

type handlerOption func(*handler)

func (f handlerOption) apply(h *handler) { f(h) }

// AllowControl lets the handler change breakers: a POST with form values name and
// action=open (ForceOpen) or action=reset (Reset). Off by default: whoever can reach
// the handler can then cut a service off from its dependency, so mount it behind your
// own authentication.
func AllowControl() HandlerOption { return handlerOption(func(h *handler) { h.control = true }) }

// RefreshEvery sets how often the HTML page reloads itself; 0 turns reloading off. The
// default is 5 s.
func RefreshEvery(d time.Duration) HandlerOption {
	return handlerOption(func(h *handler) { h.refresh = d })
}

// Handler serves the state of reg's breakers: JSON for GET with Accept:
// application/json or ?format=json, otherwise a small self-contained HTML page that
// refreshes itself. With [AllowControl] it also takes POSTs that force a breaker open
// or reset it.
//
// JSON form:
//
//	{"breakers": [{"name": "db", "state": "open", "forced": false,
//	  "counts": {"requests": 5, …}, "opened_at": "…", "until": "…",
//	  "retry_after_seconds": 12.5, "last_transition": {"from": "closed", "to": "open", "at": "…"}}]}
func Handler(reg *Registry, opts ...HandlerOption) http.Handler {
	h := &handler{reg: reg, refresh: 5 * time.Second}
	for _, o := range opts {
		o.apply(h)
	}
	return h
}

type handler struct {
	reg     *Registry
	control bool
	refresh time.Duration
}

// jsonSnapshot is the wire form of a Snapshot.
type jsonSnapshot struct {
	Name       string          `json:"name"`
	State      string          `json:"state"`
	Forced     bool            `json:"forced"`
	Counts     Counts          `json:"counts"`
	OpenedAt   *time.Time      `json:"opened_at,omitempty"`
	Until      *time.Time      `json:"until,omitempty"`
	RetryAfter float64         `json:"retry_after_seconds"`
	Last       *jsonTransition `json:"last_transition,omitempty"`
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

func (s Snapshot) wire() jsonSnapshot {
	j := jsonSnapshot{
		Name: s.Name, State: s.State.String(), Forced: s.Forced, Counts: s.Counts,
		OpenedAt: timePtr(s.OpenedAt), Until: timePtr(s.Until), RetryAfter: s.RetryAfter.Seconds(),
	}
	if !s.Last.At.IsZero() {
		j.Last = &jsonTransition{From: s.Last.From.String(), To: s.Last.To.String(), At: s.Last.At.UTC()}
	}
	return j
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if h.control {
			h.post(w, r)
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
	now := time.Now()
	var snaps []jsonSnapshot
	for _, b := range h.reg.List() {
		snaps = append(snaps, b.Snapshot(now).wire())
	}
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		if snaps == nil {
			snaps = []jsonSnapshot{}
		}
		_ = json.NewEncoder(w).Encode(struct {
			Breakers []jsonSnapshot `json:"breakers"`
		}{snaps})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, struct {
		Refresh  int
		Control  bool
		Breakers []jsonSnapshot
	}{int(h.refresh / time.Second), h.control, snaps})
}

func (h *handler) post(w http.ResponseWriter, r *http.Request) {
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
	http.Redirect(w, r, r.URL.Path, http.StatusSeeOther)
}

var page = template.Must(template.New("breakers").Funcs(template.FuncMap{
	"ts": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.Format(time.RFC3339)
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{{- if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>Breakers</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}
th,td{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}
.closed{color:#070}.half-open{color:#a60}.open{color:#c00;font-weight:bold}
</style></head><body>
<h1>Breakers</h1>
{{- if not .Breakers}}<p>No breakers registered.</p>{{else}}
<table><tr><th>name</th><th>state</th><th>requests</th><th>successes</th><th>failures</th><th>excluded</th><th>opened at</th><th>until</th><th>last transition</th>{{if .Control}}<th></th>{{end}}</tr>
{{- range .Breakers}}
<tr><td>{{.Name}}</td><td class="{{.State}}">{{.State}}{{if .Forced}} (forced){{end}}</td><td>{{.Counts.Requests}}</td><td>{{.Counts.TotalSuccesses}}</td><td>{{.Counts.TotalFailures}}</td><td>{{.Counts.TotalExclusions}}</td><td>{{ts .OpenedAt}}</td><td>{{ts .Until}}</td><td>{{with .Last}}{{.From}} → {{.To}} at {{.At.Format "2006-01-02T15:04:05Z07:00"}}{{else}}—{{end}}</td>
{{- if $.Control}}<td><form method="post" style="display:inline"><input type="hidden" name="name" value="{{.Name}}"><button name="action" value="open">force open</button> <button name="action" value="reset">reset</button></form></td>{{end}}</tr>
{{- end}}
</table>{{end}}
</body></html>
`))
