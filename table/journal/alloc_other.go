//go:build unix && !linux

package journal

import "os"

// allocate reserves size bytes of disk for f by writing zeros (there is no
// fallocate(2) here), so a full disk fails here with ENOSPC instead of
// raising SIGBUS at a later write through the mapping.
func allocate(f *os.File, size int64) error { return writeZeros(f, size) }

// reserve would fill the holes of a sparse file; without fallocate(2) it
// does nothing.
func reserve(*os.File, int64) error { return nil }

// release does nothing here; see the Linux one.
func release([]byte) {}

// populate cannot map pages ahead here; see the Linux one.
func populate([]byte) error { return errCannotFill }
