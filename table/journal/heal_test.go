package journal

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestFailuresHeal: N Appends fail at a roll (the new segment's allocation
// gives EMFILE, then ENOSPC) and N Commits fail their msync (EIO), each
// retried; once the cause is gone the same calls succeed, and a reopened
// journal holds every record whose Append returned nil, each once.
func TestFailuresHeal(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			const n = 5
			dir := t.TempDir()
			var allocErr, msyncErr error
			allocFails, msyncFails := 0, 0
			opts := testOptions(mode)
			opts.hooks = &testHooks{
				fallocate: func(f *os.File, size int64) error {
					if allocErr != nil {
						allocFails++
						return &os.PathError{Op: "fallocate", Path: f.Name(), Err: allocErr}
					}
					return allocate(f, size)
				},
				msync: func(b []byte) error {
					if msyncErr != nil {
						msyncFails++
						return msyncErr
					}
					return nil
				},
			}
			j, _, _ := mustOpen(t, dir, opts)
			var want [][]byte
			// Fill the first segment up to the record that needs a roll.
			var rolling []byte
			for i := 1; rolling == nil; i++ {
				p := testPayload(i)
				if j.cur != nil && j.off+frameSize(len(p)) > int64(len(j.cur.m)) {
					rolling = p
					break
				}
				if err := j.Append(p); err != nil {
					t.Fatal(err)
				}
				want = append(want, p)
			}
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			for i, errno := range []error{syscall.EMFILE, syscall.ENOSPC} {
				allocErr = errno
				for k := range n {
					if err := j.Append(rolling); !errors.Is(err, errno) {
						t.Fatalf("Append %d with the allocation failing: got %v, want %v", i*n+k, err, errno)
					}
				}
			}
			if allocFails != 2*n || j.Seq() != uint64(len(want)) {
				t.Fatalf("after %d failed rolls: %d allocations failed, Seq %d; want %d and %d", 2*n, allocFails, j.Seq(), 2*n, len(want))
			}
			allocErr = nil
			if err := j.Append(rolling); err != nil {
				t.Fatalf("Append once the allocation works: %v", err)
			}
			want = append(want, rolling)
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}

			if mode == SyncAlways {
				msyncErr = syscall.EIO
				for k := range n {
					p := testPayload(10_000 + k)
					if err := j.Append(p); err != nil {
						t.Fatal(err)
					}
					want = append(want, p)
					if err := j.Commit(); !errors.Is(err, syscall.EIO) {
						t.Fatalf("Commit %d with msync failing: got %v, want EIO", k, err)
					}
				}
				if msyncFails != n {
					t.Fatalf("failed msyncs: %d, want %d", msyncFails, n)
				}
				msyncErr = nil
				if err := j.Commit(); err != nil {
					t.Fatalf("Commit once msync works: %v", err)
				}
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, rec := mustOpen(t, dir, opts)
			checkRecords(t, got, want)
			if rec.TornTails != 0 || rec.Repaired {
				t.Fatalf("Recovery %+v: want nothing cut", rec)
			}
		})
	}
}
