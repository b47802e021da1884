package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyhttp"
)

// DefaultDebounce is how long [Loader.Watch] waits after the last change to the file
// before it reloads, when LoaderOptions.Debounce is 0: an editor or a deployment
// writes a file in several steps, and only the last one is worth loading.
const DefaultDebounce = 100 * time.Millisecond

// LoaderOptions configure a [Loader]. The zero value is valid: no environment
// overrides, no metrics, slog.Default() for the log, DefaultDebounce.
type LoaderOptions struct {
	Options
	// Logger logs every reload, applied or refused; nil means slog.Default().
	Logger *slog.Logger
	// Registerer, if set, receives the loader's metrics:
	// backstop_config_reloads_total{result="applied"|"refused"},
	// backstop_config_last_reload_successful (1 or 0) and
	// backstop_config_stage_resets_total{stack, stage}.
	Registerer prometheus.Registerer
	// Debounce is how long Watch waits for the file to stop changing before it
	// reloads; 0 means DefaultDebounce, negative means not at all. It is timed on
	// Options.Clock.
	Debounce time.Duration
}

// Loader holds the running configuration of a file and replaces it on [Loader.Reload]
// (a SIGHUP handler's call) or when [Loader.Watch] sees the file change.
//
// A reload is all or nothing. The new file is loaded and checked whole, with the
// running configuration as its predecessor; if it is refused, the running
// configuration stays, untouched, and the refusal is reported (the error returned, an
// event.ConfigReload with Reason ConfigRefused, the metric, the log). Otherwise the
// new configuration is swapped in atomically: every call that starts afterwards uses
// it, and every call in flight finishes on the stack it started with.
//
// State survives a reload where the settings do: a stage that keeps state across
// calls, and whose settings did not change, is the same object in the new
// configuration, with its state — a breaker open stays open with its counts, a
// budget keeps its tokens. A stage whose
// settings changed is built anew and starts fresh, reported as an event.StageReset
// naming the stack and the stage (as is a stage added to a stack or removed from it), with one exception that errs on the side of the
// dependency: a breaker that was open when its settings changed stays open until the
// old one would have let probes through (the event's To is "open").
//
// A Loader is safe for concurrent use. Its HTTP and GRPC routers follow reloads.
type Loader struct {
	path     string
	o        LoaderOptions
	log      *slog.Logger
	cur      atomic.Pointer[Config]
	mu       sync.Mutex // serialises reloads; guards lastData and lastErr
	lastData []byte
	lastErr  string // why Watch last could not read the file; "" if it could

	reloads *prometheus.CounterVec
	ok      prometheus.Gauge
	resets  *prometheus.CounterVec
}

// NewLoader loads the file at path, or returns the error of [Load]: a program should
// not start on a configuration it cannot read.
func NewLoader(path string, o LoaderOptions) (*Loader, error) {
	l := &Loader{path: path, o: o, log: o.Logger}
	if l.log == nil {
		l.log = slog.Default()
	}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, _, err := parse(path, data, o.Options, nil)
	if err != nil {
		return nil, err
	}
	if o.Registerer != nil {
		l.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "backstop_config_reloads_total",
			Help: "Configuration reloads, by result: applied or refused (the running configuration stayed)."}, []string{"result"})
		l.ok = prometheus.NewGauge(prometheus.GaugeOpts{Name: "backstop_config_last_reload_successful",
			Help: "1 if the last configuration reload was applied, 0 if it was refused."})
		l.resets = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "backstop_config_stage_resets_total",
			Help: "Stages a reload replaced because their settings changed, by stack and stage."}, []string{"stack", "stage"})
		for _, c := range []prometheus.Collector{l.reloads, l.ok, l.resets} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("config: registering the loader's metrics: %w", err)
			}
		}
		l.reloads.WithLabelValues(event.ConfigApplied)
		l.reloads.WithLabelValues(event.ConfigRefused)
		l.ok.Set(1)
	}
	l.lastData = data
	l.cur.Store(c)
	return l, nil
}

// Config returns the running configuration.
func (l *Loader) Config() *Config { return l.cur.Load() }

// Reload loads the file again and, if it is valid, makes it the running configuration;
// see [Loader]. It returns the changes applied (the stages replaced), or the error
// that refused the file, in which case nothing changed.
func (l *Loader) Reload() ([]Change, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := readFile(l.path)
	if err != nil {
		l.refused(err)
		return nil, err
	}
	c, changes, err := parse(l.path, data, l.o.Options, l.cur.Load())
	if err != nil {
		l.refused(err)
		return nil, err
	}
	l.cur.Store(c)
	l.lastData = data
	l.applied(changes)
	return changes, nil
}

func (l *Loader) observe(e event.Event) {
	if l.o.Observer == nil {
		return
	}
	e.Time = clock.Or(l.o.Clock).Now()
	l.o.Observer.Observe(e)
}

func (l *Loader) refused(err error) {
	msg := "backstop: configuration refused; the running configuration stays"
	if !errors.Is(err, ErrInvalid) {
		msg = "backstop: configuration file unreadable; the running configuration stays"
	}
	l.log.Error(msg, "file", l.path, "err", err)
	if l.reloads != nil {
		l.reloads.WithLabelValues(event.ConfigRefused).Inc()
		l.ok.Set(0)
	}
	// The event comes last: an observer sees the log and metrics done.
	l.observe(event.Event{Kind: event.ConfigReload, Source: "config", Reason: event.ConfigRefused, Err: err})
}

func (l *Loader) applied(changes []Change) {
	for _, ch := range changes {
		l.log.Info("backstop: stage reset by a reload", "file", l.path, "stack", ch.Stack, "stage", ch.Stage, "reason", ch.Reason, "kept", ch.Kept)
		l.observe(event.Event{Kind: event.StageReset, Pipeline: ch.Stack, Source: ch.Stage, Reason: ch.Reason, To: ch.Kept})
		if l.resets != nil {
			l.resets.WithLabelValues(ch.Stack, ch.Stage).Inc()
		}
	}
	l.log.Info("backstop: configuration reloaded", "file", l.path, "stages_replaced", len(changes))
	if l.reloads != nil {
		l.reloads.WithLabelValues(event.ConfigApplied).Inc()
		l.ok.Set(1)
	}
	l.observe(event.Event{Kind: event.ConfigReload, Source: "config", Reason: event.ConfigApplied})
}

// Watch reloads the file whenever it changes, until ctx is done; it returns ctx's
// error then, or the error that kept it from watching. It watches the file's
// directory, so that a file replaced by a rename (as editors and Kubernetes
// ConfigMaps do) is seen too, waits LoaderOptions.Debounce after the last change,
// and reloads only when the content differs from what was last loaded. A refused
// file is reported as by Reload, and watching goes on: the next change may fix it.
// So is a file deleted or unreadable, once: the running configuration stays.
func (l *Loader) Watch(ctx context.Context) error { return l.watch(ctx, nil) }

// watch is Watch, closing ready (if not nil) once the file is watched.
func (l *Loader) watch(ctx context.Context, ready chan<- struct{}) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watching %s: %w", l.path, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(l.path)); err != nil {
		return fmt.Errorf("config: watching %s: %w", l.path, err)
	}
	if ready != nil {
		close(ready)
	}
	debounce := l.o.Debounce
	if debounce == 0 {
		debounce = DefaultDebounce
	}
	clk := clock.Or(l.o.Clock)
	var timer clock.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return ctx.Err()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("config: the file watcher stopped")
			}
			l.log.Warn("backstop: watching the configuration file", "file", l.path, "err", err)
		case _, ok := <-w.Events:
			if !ok {
				return errors.New("config: the file watcher stopped")
			}
			if debounce < 0 {
				l.reloadIfChanged()
				continue
			}
			if timer != nil {
				timer.Stop()
			}
			timer = clk.NewTimer(debounce)
			fire = timer.C()
		case <-fire:
			timer, fire = nil, nil
			l.reloadIfChanged()
		}
	}
}

// reloadIfChanged reloads the file if its content differs from what was last loaded
// (or last refused: a file refused once is not reported again until it changes).
// A file deleted or unreadable is refused once, until it can be read again. The
// debounce has let a remove and the create that follows it pass by then.
func (l *Loader) reloadIfChanged() {
	data, err := os.ReadFile(l.path)
	l.mu.Lock()
	same := err == nil && string(data) == string(l.lastData)
	if err == nil {
		l.lastData, l.lastErr = data, ""
	}
	if err != nil {
		same = err.Error() == l.lastErr
		// Whatever comes back is loaded anew, even the same bytes.
		l.lastData, l.lastErr = nil, err.Error()
	}
	l.mu.Unlock()
	if !same {
		_, _ = l.Reload()
	}
}

// HTTP returns a policyhttp.Router that routes each request by the running
// configuration's HTTP table.
func (l *Loader) HTTP() policyhttp.Router { return httpRouter{l} }

// GRPC returns a policygrpc.Router that routes each RPC by the running
// configuration's gRPC table.
func (l *Loader) GRPC() policygrpc.Router { return grpcRouter{l} }

// Transport returns an http.RoundTripper that sends each request with next through
// the pipeline its route in the running configuration names
// (policyhttp.NewRouterTransport).
func (l *Loader) Transport(next http.RoundTripper, o policyhttp.Options) http.RoundTripper {
	return policyhttp.NewRouterTransport(next, l.HTTP(), o)
}

// DialOptions returns the dial options of a gRPC channel whose RPCs the running
// configuration routes (policygrpc.RouterDialOptions).
func (l *Loader) DialOptions() []grpc.DialOption { return policygrpc.RouterDialOptions(l.GRPC()) }

type httpRouter struct{ l *Loader }

func (r httpRouter) Match(req *http.Request) *policyhttp.Route {
	return r.l.cur.Load().http.Match(req)
}

type grpcRouter struct{ l *Loader }

func (r grpcRouter) Match(fullMethod string) *policygrpc.Route {
	return r.l.cur.Load().grpc.Match(fullMethod)
}
