//go:build !amd64

package topk

import "unsafe"

// canPrefetchW: this architecture goes without the hint.
const canPrefetchW = false

// prefetchW does nothing here (see canPrefetchW).
func prefetchW(unsafe.Pointer) {}
