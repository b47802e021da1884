package policygrpc_test

import (
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/backstop-go/backstop/deadline"
)

func deadlineFor(t *testing.T, d time.Duration) *deadline.Deadline {
	t.Helper()
	return policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: d}))
}

// waitFor polls cond; it synchronises with a server's goroutine starting, it times
// nothing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}
