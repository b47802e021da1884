package shed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/shed"
)

// With 2 slots, a first attempt is admitted while a retry, which may use only 75 % of
// the limit, is answered at once with 429 and a Retry-After.
func ExampleMiddleware() {
	s, err := shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 2}, Queue: shed.QueueOptions{Max: -1}, Rand: pinned(0)})
	if err != nil {
		panic(err)
	}
	busy, _ := s.Admit(context.Background(), shed.PriorityDefault) // one slot taken
	defer busy.Release()
	h := shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	}), s)

	for _, attempt := range []string{"1", "2"} {
		req := httptest.NewRequest("GET", "/orders", nil)
		req.Header.Set(callpath.HeaderAttempt, attempt)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Printf("attempt %s: %d Retry-After=%q\n", attempt, w.Code, w.Header().Get("Retry-After"))
	}
	// Output:
	// attempt 1: 200 Retry-After=""
	// attempt 2: 429 Retry-After="1"
}
