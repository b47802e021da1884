//go:build !linux

package fleettest

import "os/exec"

// dieWithParent does nothing here: only Linux ties a child's life to its parent's.
func dieWithParent(*exec.Cmd) {}
