package policygrpc_test

import (
	"testing"
	"time"

	"github.com/backstop-go/backstop/deadline"
)

func deadlineFor(t *testing.T, d time.Duration) *deadline.Deadline {
	t.Helper()
	return deadline.MustPerAttempt(d)
}
