// Command backstopvet checks Go code for the mistakes Backstop exists to prevent,
// at compile time: policy stacks in a wrong order (wraporder) and hand-rolled retry
// loops without jitter or bound (retryloop). Run it alone or through go vet:
//
//	go run github.com/backstop-go/backstop/cmd/backstopvet ./...
//	go build -o backstopvet ./cmd/backstopvet && go vet -vettool=$PWD/backstopvet ./...
//
// The checks are analysis.Analyzer values in packages wraporder and retryloop, for
// gopls or golangci-lint setups.
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/backstop-go/backstop/cmd/backstopvet/retryloop"
	"github.com/backstop-go/backstop/cmd/backstopvet/wraporder"
)

func main() { multichecker.Main(wraporder.Analyzer, retryloop.Analyzer) }
