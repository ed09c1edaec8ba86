//go:build !amd64

package topk

import "unsafe"

// prefetchWrite is a hint this architecture goes without: it does nothing.
func prefetchWrite(unsafe.Pointer) {}
