// Package policyenvoy_test runs the tests of the nested module in policyenvoy/ as part of the
// root module's go test ./... (see internal/moduletest).
package policyenvoy_test

import (
	"testing"

	"github.com/backstop-go/backstop/internal/moduletest"
)

func TestModule(t *testing.T) { moduletest.Run(t) }
