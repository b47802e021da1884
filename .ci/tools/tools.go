//go:build tools

// Package tools pins the tools .ci/run and scripts/release build: the API
// compatibility report (gorelease) and the linter (staticcheck). A module of its
// own, outside go.work and never tagged, so the library's go.mod stays lean.
package tools

import (
	_ "golang.org/x/exp/cmd/gorelease"
	_ "honnef.co/go/tools/cmd/staticcheck"
)
