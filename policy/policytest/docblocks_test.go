package policytest_test

import (
	"testing"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// mypolicy stands for the package of a third-party policy.
var mypolicy = struct{ New func() policy.Policy }{
	New: func() policy.Policy { return policy.Must(retry.New(retry.Options{})) },
}

// TestConformance is the package documentation's example, run on a retry.
func TestConformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy { return mypolicy.New() })
}
