// Package policyk8s_test runs the tests of the nested module in policyk8s/ as part of the
// root module's go test ./... (see internal/moduletest).
package policyk8s_test

import (
	"testing"

	"github.com/backstop-go/backstop/internal/moduletest"
)

func TestModule(t *testing.T) { moduletest.Run(t) }
