// Package thirdparty is a stage written outside Backstop's module, on its public
// extension API alone: a Placement, a RejectError, events with its own Stage, and
// published gauges. Its tests show it gets the ordering checks, events and metrics a
// built-in stage gets.
package thirdparty
