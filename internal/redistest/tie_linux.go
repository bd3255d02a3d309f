package redistest

import (
	"os/exec"
	"syscall"
)

// tieToTest makes the kernel kill the server when the test process dies
// (a test binary killed by its -timeout runs no cleanup), so no server
// outlives the tests that started it.
func tieToTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
