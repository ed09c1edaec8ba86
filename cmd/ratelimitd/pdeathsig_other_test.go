//go:build unix && !linux

package main

import "os/exec"

// killWithParent does nothing here: only Linux has a parent-death signal.
// The cleanup of every test still stops its daemon.
func killWithParent(cmd *exec.Cmd) {}
