package journal

import (
	"errors"
	"os"
	"syscall"
)

// allocate reserves size bytes of disk for f with fallocate(2), so a full
// disk fails here with ENOSPC instead of raising SIGBUS at a later write
// through the mapping. Filesystems without fallocate get zeros written.
func allocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return writeZeros(f, size)
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// reserve makes sure the first size bytes of an existing file have disk
// blocks (a sparse copy of a segment would otherwise SIGBUS on a full disk
// at a write through the mapping). Without fallocate it does nothing.
func reserve(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}
