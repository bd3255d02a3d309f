//go:build !linux

package redistest

import "os/exec"

// tieToTest is a no-op where the kernel offers no parent-death signal.
func tieToTest(cmd *exec.Cmd) {}
