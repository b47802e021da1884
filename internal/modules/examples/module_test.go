// Package examples_test runs the tests of the nested module in examples/ as part of the
// root module's go test ./... (see internal/moduletest).
package examples_test

import (
	"testing"

	"github.com/backstop-go/backstop/internal/moduletest"
)

func TestModule(t *testing.T) { moduletest.Run(t) }
