package journal

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// inAppend reports whether the caller runs inside Journal.Append: work an
// Append does is work under its caller's lock (the shard's).
func inAppend() bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*Journal).Append") {
			return true
		}
		if !more {
			return false
		}
	}
}

// fileWork counts the allocations (each segment creation makes one) and
// msyncs of a journal, and those made inside Append; fail makes the
// allocations fail with its errno, failAhead those outside Append (of the
// segments made ahead) with ENOSPC.
type fileWork struct {
	allocs, msyncs             atomic.Int64
	appendAllocs, appendMsyncs atomic.Int64
	fail                       atomic.Pointer[syscall.Errno]
	failAhead                  atomic.Bool
	aheadFailed                atomic.Int64
}

func (w *fileWork) hooks() *testHooks {
	return &testHooks{
		fallocate: func(f *os.File, size int64) error {
			w.allocs.Add(1)
			in := inAppend()
			if in {
				w.appendAllocs.Add(1)
			}
			if !in && w.failAhead.Load() {
				w.aheadFailed.Add(1)
				return &os.PathError{Op: "fallocate", Path: f.Name(), Err: syscall.ENOSPC}
			}
			if e := w.fail.Load(); e != nil {
				return &os.PathError{Op: "fallocate", Path: f.Name(), Err: *e}
			}
			return allocate(f, size)
		},
		msync: func(b []byte) error {
			w.msyncs.Add(1)
			if inAppend() {
				w.appendMsyncs.Add(1)
			}
			return nil
		},
	}
}

// nextFiles returns the names of the segments made ahead in dir.
func nextFiles(t *testing.T, dir string) []string {
	t.Helper()
	var got []string
	for _, n := range names(t, dir) {
		if strings.HasPrefix(n, segmentPrefix+"next-") {
			got = append(got, n)
		}
	}
	return got
}

// fillSegment appends records from payload i on until the one that needs a
// roll, and returns the records appended and the next i.
func fillSegment(t *testing.T, j *Journal, i int) ([][]byte, int) {
	t.Helper()
	var got [][]byte
	for ; ; i++ {
		p := testPayload(i)
		if j.off+frameSize(len(p)) > int64(len(j.cur.m)) {
			return got, i
		}
		if err := j.Append(p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
}

// TestRollAhead: with RollAhead, an Append that rolls to the segment made
// ahead creates, allocates and msyncs nothing itself; the background pass
// after it msyncs the full segment (SyncInterval), closes it and makes the
// next one ahead; the records all come back at Open.
func TestRollAhead(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var w fileWork
			opts := testOptions(mode)
			opts.SyncInterval = time.Hour // passes only when the test asks
			opts.RollAhead = true
			opts.hooks = w.hooks()
			j, _, _ := mustOpen(t, dir, opts)
			want := [][]byte{testPayload(1)}
			if err := j.Append(want[0]); err != nil { // creates the first segment
				t.Fatal(err)
			}
			j.syncPassForTest()
			if got := nextFiles(t, dir); !slices.Equal(got, []string{nextSegmentName(1)}) {
				t.Fatalf("after a pass: %v, want the next segment made ahead, %s", got, nextSegmentName(1))
			}
			if got := w.allocs.Load(); got != 2 {
				t.Fatalf("allocations after the first segment and a pass: %d, want 2", got)
			}
			i := 2
			for roll := 1; roll <= 3; roll++ {
				var ps [][]byte
				ps, i = fillSegment(t, j, i)
				want = append(want, ps...)
				oldFirst, msyncs := j.cur.first, w.msyncs.Load()
				w.appendAllocs.Store(0)
				w.appendMsyncs.Store(0)
				p := testPayload(i)
				i++
				if err := j.Append(p); err != nil {
					t.Fatalf("roll %d: %v", roll, err)
				}
				want = append(want, p)
				if j.cur.first == oldFirst {
					t.Fatalf("roll %d: the Append did not roll", roll)
				}
				if a, m := w.appendAllocs.Load(), w.appendMsyncs.Load(); a != 0 || m != 0 {
					t.Fatalf("roll %d: the Append allocated %d times and msynced %d times, want 0 and 0", roll, a, m)
				}
				if _, err := os.Stat(filepath.Join(dir, segmentName(j.cur.first))); err != nil {
					t.Fatalf("roll %d: %v", roll, err)
				}
				if got := nextFiles(t, dir); slices.Contains(got, nextSegmentName(uint64(roll))) {
					t.Fatalf("roll %d: %v, want %s renamed", roll, got, nextSegmentName(uint64(roll)))
				}
				if mode == SyncAlways {
					if err := j.Commit(); err != nil { // the group commit msyncs the old segment's end
						t.Fatal(err)
					}
				}
				j.syncPassForTest()
				j.syncMu.Lock()
				retiring, next := len(j.retiring), j.next != nil
				j.syncMu.Unlock()
				if retiring != 0 || !next {
					t.Fatalf("roll %d: after a pass %d full segments still open and next made ahead %v; want 0 and true", roll, retiring, next)
				}
				if got := w.allocs.Load(); got != int64(2+roll) {
					t.Fatalf("roll %d: %d allocations in all, want %d (one more segment ahead per roll)", roll, got, 2+roll)
				}
				wantMsyncs := msyncs
				switch mode {
				case SyncInterval:
					wantMsyncs += 2 // the full segment, then the directory and the new one up to Commit
				case SyncAlways:
					wantMsyncs += 2 // the Commit: the end of the full segment and the new one
				}
				if got := w.msyncs.Load(); got != wantMsyncs {
					t.Fatalf("roll %d: %d msyncs in all, want %d", roll, got, wantMsyncs)
				}
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if got := nextFiles(t, dir); len(got) != 0 {
				t.Fatalf("after Close: %v, want the segment made ahead removed", got)
			}
			_, got, rec := mustOpen(t, dir, opts)
			checkRecords(t, got, want)
			if rec.Segments != 4 || rec.TornTails != 0 {
				t.Fatalf("Recovery %+v: want 4 segments and nothing cut", rec)
			}
		})
	}
}

// TestRollAheadFailuresHeal: when the next segment cannot be made ahead
// (EMFILE, then ENOSPC), the roll tries it itself and fails as it would
// without RollAhead, nothing written, N times each; once the cause is gone
// the same Append succeeds and a reopened journal holds every record
// accepted, each once.
func TestRollAheadFailuresHeal(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			const n = 5
			dir := t.TempDir()
			var w fileWork
			opts := testOptions(mode)
			opts.SyncInterval = time.Hour
			opts.RollAhead = true
			opts.hooks = w.hooks()
			w.failAhead.Store(true) // no segment is ever made ahead until the end
			e := syscall.EMFILE
			w.fail.Store(&e)
			// The first segment cannot be made either: the Append that
			// needs it fails, then succeeds once the cause is gone.
			j, _, _ := mustOpen(t, dir, opts)
			if err := j.Append(testPayload(1)); !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("first Append with the allocation failing: got %v, want EMFILE", err)
			}
			w.fail.Store(nil)
			if err := j.Append(testPayload(1)); err != nil {
				t.Fatal(err)
			}
			j.syncPassForTest()
			if got := w.aheadFailed.Load(); got < 1 {
				t.Fatalf("after a pass: %d failed creations ahead, want at least 1", got)
			}
			want := [][]byte{testPayload(1)}
			ps, i := fillSegment(t, j, 2)
			want = append(want, ps...)
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			rolling := testPayload(i)
			w.appendAllocs.Store(0)
			for k, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENOSPC} {
				w.fail.Store(&errno)
				for r := range n {
					if err := j.Append(rolling); !errors.Is(err, errno) {
						t.Fatalf("Append %d with the allocation failing: got %v, want %v", k*n+r, err, errno)
					}
				}
			}
			if got := w.appendAllocs.Load(); got != 2*n || j.Seq() != uint64(len(want)) {
				t.Fatalf("after %d failed rolls: %d allocations by Append, Seq %d; want %d and %d", 2*n, got, j.Seq(), 2*n, len(want))
			}
			if _, err := os.Stat(filepath.Join(dir, segmentName(j.Seq()+1))); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("after the failed rolls: %v, want no segment %s", err, segmentName(j.Seq()+1))
			}
			w.fail.Store(nil)
			w.failAhead.Store(false)
			if err := j.Append(rolling); err != nil {
				t.Fatalf("Append once the allocation works: %v", err)
			}
			want = append(want, rolling)
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			j.syncPassForTest()
			j.syncMu.Lock()
			next := j.next != nil
			j.syncMu.Unlock()
			if !next {
				t.Fatal("after a pass once the allocation works: no next segment made ahead")
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, rec := mustOpen(t, dir, opts)
			checkRecords(t, got, want)
			if rec.Segments != 2 || rec.TornTails != 0 || rec.Repaired {
				t.Fatalf("Recovery %+v: want 2 segments and nothing cut", rec)
			}
		})
	}
}

// TestRollAheadNamesEachSegmentApart: the background may make the next
// segment while a roll still holds the one it took, not yet renamed: the
// new one has a name of its own and leaves the taken one whole (once, both
// had one name, and the new one's creation truncated the taken one under
// the roll, which then died of SIGBUS writing to it).
func TestRollAheadNamesEachSegmentApart(t *testing.T) {
	t.Parallel()
	opts := testOptions(SyncNone)
	opts.RollAhead = true
	j, _, _ := mustOpen(t, t.TempDir(), opts)
	if err := j.Append([]byte("first")); err != nil {
		t.Fatal(err)
	}
	j.syncPassForTest()
	j.syncMu.Lock()
	taken := j.next
	j.next = nil // as a roll takes it
	j.syncMu.Unlock()
	if taken == nil {
		t.Fatal("no segment made ahead")
	}
	j.syncPassForTest() // the background makes the next one meanwhile
	j.syncMu.Lock()
	next := j.next
	j.syncMu.Unlock()
	if next == nil || next.path == taken.path {
		t.Fatalf("the next segment made ahead is missing or shares the taken one's path, %s", taken.path)
	}
	if got := string(taken.m[:8]); got != segmentMagic {
		t.Fatalf("the taken segment's magic reads %q, want %q: its file was overwritten", got, segmentMagic)
	}
	if st, err := os.Stat(taken.path); err != nil || st.Size() != MinSegmentSize {
		t.Fatalf("the taken segment's file: %v, %v; want %d bytes", st, err, MinSegmentSize)
	}
	_ = taken.close()
	_ = os.Remove(taken.path)
}

// TestBackgroundPassesDuringAppends: with the background goroutine's
// passes (msync with SyncInterval, the release of the pages written, the
// fill of those ahead, segments made ahead and retired) every millisecond
// while records are appended through many rolls, every record is
// recovered, in order.
func TestBackgroundPassesDuringAppends(t *testing.T) {
	t.Parallel()
	eachBackgroundMode(t, testBackgroundPassesDuringAppends)
}

// eachBackgroundMode runs f in a parallel subtest for each sync mode whose
// background goroutine releases and fills pages: SyncInterval and
// SyncNone.
func eachBackgroundMode(t *testing.T, f func(t *testing.T, mode SyncMode)) {
	for _, mode := range []SyncMode{SyncInterval, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			f(t, mode)
		})
	}
}

func testBackgroundPassesDuringAppends(t *testing.T, mode SyncMode) {
	dir := t.TempDir()
	opts := Options{Sync: mode, SyncInterval: time.Millisecond, SegmentSize: MinSegmentSize, RollAhead: true}
	j, _, _ := mustOpen(t, dir, opts)
	want := testPayloads(0, 3000)
	for i, p := range want {
		appendAll(t, j, [][]byte{p})
		if i%50 == 0 {
			time.Sleep(300 * time.Microsecond) // let passes fall between appends
		}
	}
	if n := len(segmentFiles(t, dir)); n < 10 {
		t.Fatalf("%d segments: too few rolls for the test to mean anything", n)
	}
	checkAfterClose(t, dir, j, opts, want)
}
