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

// TestWrapOrderFacts checks the placements wraporder learns from the stages' own code:
// a literal, a package variable (retry's place, budget.Place read by fleet), a method
// promoted from an embedded type (budget), and a type placed two ways by a field
// (deadline), told apart by its constructors.
func TestWrapOrderFacts(t *testing.T) {
	const m = "github.com/backstop-go/backstop/"
	analysistest.Run(t, analysistest.TestData(), wraporder.Analyzer, m+"deadline", m+"budget", m+"retry", m+"fleet")
}

func TestRetryLoop(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), retryloop.Analyzer, "loops")
}
