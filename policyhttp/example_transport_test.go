package policyhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

func ExampleNewTransport() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("server: attempt", r.Header.Get(callpath.HeaderAttempt))
		if n.Add(1) < 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true) // sleeps pass at once
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: policyhttp.NewTransport(tr, p, policyhttp.Options{})}

	res, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	res.Body.Close()
	fmt.Println("client:", res.Status)
	// Output:
	// server: attempt 1
	// server: attempt 2
	// server: attempt 3
	// client: 200 OK
}
