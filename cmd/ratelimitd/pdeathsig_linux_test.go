package main

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill the daemon if the test process dies
// first, so that a crashed or killed test run leaves no daemon behind.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
