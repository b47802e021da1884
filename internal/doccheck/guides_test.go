package doccheck_test

import (
	"fmt"
	"net/http"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/shed"
)

// docs/shedding.md's server, compiled with the tests so that it cannot drift from the
// API; it is not run, since it serves for ever.
var _ = func(addr string) error {
	api := policy.Must(shed.New(shed.Options{Name: "api"})) // only a name: every default
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	err := http.ListenAndServe(addr, shed.Middleware(mux, api)) // 429 + Retry-After beyond the limit
	return err
}
