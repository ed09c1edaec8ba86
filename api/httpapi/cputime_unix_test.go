//go:build unix

package httpapi_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, that the process has
// used so far in all its threads, and whether it could tell.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
