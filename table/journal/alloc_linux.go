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

// release takes b, page-aligned pages of a segment's mapping written for
// good, out of this process's page tables (madvise MADV_DONTNEED) before
// an msync, or with SyncNone at each background pass (releaseWritten),
// before the kernel's own writeback. For a MAP_SHARED file mapping that
// changes nothing anyone can read: the pages stay in the page cache, dirty
// until written back, and a later read through the mapping faults them in
// again from there. What it saves is writeback's own cost: it
// write-protects each page it cleans in every page table that maps it,
// and flushes that page from the TLBs of every other CPU running a thread
// of the process, one interrupt per page (the syncer waiting for each);
// one madvise flushes the whole range once. Measured with
// BenchmarkCheckJournal, sync=interval, 5M checks on 2 CPUs: 16k TLB
// shootdowns without, 0.4k with. An error costs only those interrupts, so
// release does not report it.
func release(b []byte) {
	if len(b) > 0 {
		_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
	}
}

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which the syscall
// package does not name.
const madvPopulateWrite = 23

// populate maps b, pages of a segment that records will take next, into
// this process's page tables as if written (madvise MADV_POPULATE_WRITE),
// so that the Append writing there takes no page fault: the fault of a
// page's first write allocates and zeroes it and marks it dirty, a few
// microseconds in Append otherwise, while its caller holds whatever it
// holds (a shard's lock, in package actors). The pages read as zeros
// still. errCannotFill: a kernel older than 5.14.
func populate(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	err := syscall.Madvise(b, madvPopulateWrite)
	if errors.Is(err, syscall.EINVAL) {
		return errCannotFill
	}
	return err
}
