package fleettest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the server if the process that started it dies
// without stopping it (a test binary killed by a timeout), so no server outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
