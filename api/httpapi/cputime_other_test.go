//go:build !unix

package httpapi_test

import "time"

// processCPU returns false: the CPU time of the process is not known here.
func processCPU() (time.Duration, bool) { return 0, false }
