package config_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policyhttp"
)

// A reload that changes a breaker's threshold while the breaker is open: the new
// breaker stays open, so the dependency that is down gets no flood; a reload that
// leaves the breaker alone keeps the very same breaker.
func ExampleLoader_Reload() {
	var requests atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()

	dir, _ := os.MkdirTemp("", "backstop")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "backstop.yaml")
	file := `
stacks:
  payments:
    breaker: {consecutive_failures: 2, open_timeout: 1m}
    retry: {attempts: 1}
http:
  default: payments
`
	write := func(old, new string) {
		file = strings.Replace(file, old, new, 1)
		_ = os.WriteFile(path, []byte(file), 0o600)
	}
	write("", "")
	l, err := config.NewLoader(path, config.LoaderOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: l.Transport(nil, policyhttp.Options{})}
	call := func() string {
		res, err := client.Get(down.URL)
		if errors.Is(err, breaker.ErrOpen) {
			return "refused by the open breaker"
		}
		if err != nil {
			return err.Error()
		}
		res.Body.Close()
		return res.Status
	}
	fmt.Println(call(), "|", call(), "|", call())
	brk := func() *breaker.Breaker { return l.Config().Stage("payments", "breaker").(*breaker.Breaker) }
	before := brk()
	fmt.Println("before the reloads:", before.State(), "after", requests.Load(), "requests")

	write("attempts: 1", "attempts: 2") // the breaker's settings are unchanged
	changes, err := l.Reload()
	fmt.Println("reload 1:", changes, err, "| same breaker:", brk() == before, "|", brk().State())

	write("consecutive_failures: 2", "consecutive_failures: 5") // the breaker's threshold
	changes, err = l.Reload()
	fmt.Println("reload 2:", changes, err, "| same breaker:", brk() == before, "|", brk().State())
	fmt.Println(call(), "| requests:", requests.Load())

	write("consecutive_failures: 5", "consecutive_failures: five")
	_, err = l.Reload()
	fmt.Println("refused:", strings.ReplaceAll(err.Error(), path, "backstop.yaml"))
	fmt.Println("still running:", brk().State(), "| consecutive_failures 5:", strings.Contains(brk().ExplainStage().Summary, "after 5 failures"))
	// Output:
	// 503 Service Unavailable | 503 Service Unavailable | refused by the open breaker
	// before the reloads: open after 2 requests
	// reload 1: [{payments retry changed }] <nil> | same breaker: true | open
	// reload 2: [{payments breaker changed open}] <nil> | same breaker: false | open
	// refused by the open breaker | requests: 2
	// refused: config: invalid configuration: backstop.yaml:4:37: stacks.payments.breaker.consecutive_failures: is "five"; want a whole number, such as consecutive_failures: 5
	// still running: open | consecutive_failures 5: true
}
