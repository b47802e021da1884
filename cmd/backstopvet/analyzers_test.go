package main

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/backstop-go/backstop/cmd/backstopvet/retryloop"
	"github.com/backstop-go/backstop/cmd/backstopvet/wraporder"
)

func TestWrapOrder(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), wraporder.Analyzer, "stacks")
}

func TestRetryLoop(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), retryloop.Analyzer, "loops")
}
