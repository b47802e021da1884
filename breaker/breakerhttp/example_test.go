package breakerhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/breaker/breakerhttp"
	"github.com/backstop-go/backstop/policy"
)

// A service lists its breakers in a Registry and serves them at /debug/breakers: an
// HTML page for people, JSON for tools. With AllowControl the page's buttons force a
// breaker open or reset it; mount it behind your own authentication.
func ExampleHandler() {
	var reg breaker.Registry
	db := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
	if err := reg.Add(db); err != nil {
		fmt.Println(err)
		return
	}
	_ = policy.Must(policy.Wrap(db)).Do(context.Background(), func(context.Context) error { return errors.New("db down") })

	mux := http.NewServeMux()
	mux.Handle("/debug/breakers", breakerhttp.Handler(&reg, breakerhttp.AllowControl()))

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/debug/breakers?format=json", nil))
	var page struct {
		Breakers []struct {
			Name  string `json:"name"`
			State string `json:"state"`
			Last  struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"last_transition"`
		} `json:"breakers"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range page.Breakers {
		fmt.Printf("%s: %s (%s → %s)\n", b.Name, b.State, b.Last.From, b.Last.To)
	}
	// Output:
	// db: open (closed → open)
}
