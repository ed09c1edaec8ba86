package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := testOptions(mode)
			want := testPayloads(1, 1000)
			j, _, rec := mustOpen(t, dir, opts)
			if rec != (Recovery{Duration: rec.Duration}) {
				t.Errorf("Open of an empty directory: got %+v, want a zero Recovery", rec)
			}
			for i := 0; i < len(want); i += 50 { // batches of 50
				appendAll(t, j, want[i:min(i+50, len(want))])
			}
			if got := j.Seq(); got != uint64(len(want)) {
				t.Errorf("Seq() = %d, want %d", got, len(want))
			}
			if err := j.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := j.Close(); err != nil {
				t.Errorf("second Close: got %v, want nil", err)
			}
			segs := segmentFiles(t, dir)
			if len(segs) < 4 {
				t.Fatalf("got %d segments %v, want several rolls", len(segs), segs)
			}

			j, got, rec := mustOpen(t, dir, opts)
			checkRecords(t, got, want)
			if rec.SegmentRecords != len(want) || rec.Segments != len(segs) || rec.TornTails != 0 || rec.BytesDropped != 0 || rec.Repaired || rec.Snapshot != "" {
				t.Errorf("Recovery = %+v, want %d segment records in %d segments and nothing dropped", rec, len(want), len(segs))
			}
			if got := j.Seq(); got != uint64(len(want)) {
				t.Errorf("Seq() after Open = %d, want %d", got, len(want))
			}
			more := testPayloads(len(want)+1, 120)
			appendAll(t, j, more)
			if got, want := j.Seq(), uint64(len(want)+len(more)); got != want {
				t.Errorf("Seq() = %d, want %d", got, want)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, _ = mustOpen(t, dir, opts)
			checkRecords(t, got, append(want, more...))
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	page := int64(os.Getpagesize())
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero value", Options{}, true},
		{"min segment", Options{SegmentSize: MinSegmentSize}, true},
		{"max segment", Options{SegmentSize: MaxSegmentSize}, true},
		{"segment too small", Options{SegmentSize: MinSegmentSize - page}, false},
		{"segment too large", Options{SegmentSize: MaxSegmentSize + page}, false},
		{"segment not page aligned", Options{SegmentSize: MinSegmentSize + 8}, false},
		{"negative segment", Options{SegmentSize: -1}, false},
		{"sync mode out of range", Options{Sync: SyncAlways + 1}, false},
		{"negative sync mode", Options{Sync: -1}, false},
		{"negative interval", Options{SyncInterval: -time.Second}, false},
	}
	for _, tt := range tests {
		_, err := tt.opts.config()
		if got := err == nil; got != tt.ok {
			t.Errorf("%s: config() error = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: got %v, want an error matching ErrInvalidOptions", tt.name, err)
		}
	}
	c, _ := Options{}.config()
	if c.sync != SyncInterval || c.interval != DefaultSyncInterval || c.segmentSize != DefaultSegmentSize {
		t.Errorf("defaults: got sync %v interval %v segment %d, want interval, %v, %d",
			c.sync, c.interval, c.segmentSize, DefaultSyncInterval, DefaultSegmentSize)
	}
	if _, _, err := Open(t.TempDir(), Options{SegmentSize: 1000}, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Open with a bad SegmentSize: got %v, want ErrInvalidOptions", err)
	}
}

func TestParseSyncMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want SyncMode
		ok   bool
	}{
		{"none", SyncNone, true},
		{"interval", SyncInterval, true},
		{"always", SyncAlways, true},
		{"", 0, false},
		{"Always", 0, false},
		{"sometimes", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSyncMode(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseSyncMode(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "none, interval, always")) {
			t.Errorf("ParseSyncMode(%q) error %q: want ErrInvalidOptions listing the valid values", tt.in, err)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("SyncMode(%d).String() = %q, want %q", int(got), got.String(), tt.in)
		}
	}
	if got, want := SyncMode(9).String(), "SyncMode(9)"; got != want {
		t.Errorf("SyncMode(9).String() = %q, want %q", got, want)
	}
}

func TestAppendLimitsAndClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncNone)
	j, _, _ := mustOpen(t, dir, opts)
	max := int(MinSegmentSize - headerSize - frameHeaderSize)
	if err := j.Append(make([]byte, max+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Append(%d bytes): got %v, want ErrTooLarge", max+1, err)
	}
	if got := j.Seq(); got != 0 {
		t.Errorf("Seq() after a refused Append = %d, want 0", got)
	}
	big := make([]byte, max)
	for i := range big {
		big[i] = byte(i) | 1
	}
	small := []byte("after a full segment")
	for _, p := range [][]byte{small, big, big, small} {
		if err := j.Append(p); err != nil {
			t.Fatalf("Append(%d bytes): %v", len(p), err)
		}
	}
	if got, want := len(segmentFiles(t, dir)), 4; got != want {
		t.Errorf("got %d segments, want %d (a maximal record fills a segment)", got, want)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Append": j.Append(nil), "Commit": j.Commit(), "Sync": j.Sync(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
		}
	}
	if _, err := j.StartSnapshot(); !errors.Is(err, ErrClosed) {
		t.Errorf("StartSnapshot after Close: got %v, want ErrClosed", err)
	}
	_, got, _ := mustOpen(t, dir, opts)
	checkRecords(t, got, [][]byte{small, big, big, small})
}

func TestSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncNone)
	j, _, _ := mustOpen(t, dir, opts)
	if got := j.Size(); got != 0 {
		t.Errorf("Size() of a new journal = %d, want 0", got)
	}
	ps := testPayloads(1, 200)
	var want int64
	for _, p := range ps {
		want += frameSize(len(p))
	}
	appendAll(t, j, ps)
	if got := j.Size(); got != want {
		t.Errorf("Size() = %d, want %d (the frames of %d records)", got, want, len(ps))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _, _ = mustOpen(t, dir, opts)
	if got := j.Size(); got != want {
		t.Errorf("Size() after Open = %d, want %d", got, want)
	}
	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Size(); got != want {
		t.Errorf("Size() during a snapshot = %d, want %d (not covered until Commit)", got, want)
	}
	later := testPayloads(1000, 3)
	appendAll(t, j, later)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	want = 0
	for _, p := range later {
		want += frameSize(len(p))
	}
	if got := j.Size(); got != want {
		t.Errorf("Size() after the snapshot = %d, want %d (only the later records)", got, want)
	}
}

// TestRollFailure checks that a failed roll (here: ENOSPC from the
// allocation) writes nothing and that the next Append retries it.
func TestRollFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fail := true
	opts := testOptions(SyncAlways)
	opts.hooks = &testHooks{fallocate: func(f *os.File, size int64) error {
		if fail {
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return allocate(f, size)
	}}
	j, _, _ := mustOpen(t, dir, opts)
	if err := j.Append([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append with a full disk: got %v, want ENOSPC", err)
	}
	if got := j.Seq(); got != 0 {
		t.Errorf("Seq() after a failed Append = %d, want 0", got)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("files after a failed roll: %v, want none", got)
	}
	fail = false
	if err := j.Append([]byte("y")); err != nil {
		t.Fatalf("Append after space came back: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, _ := mustOpen(t, dir, opts)
	checkRecords(t, got, [][]byte{[]byte("y")})
}

// TestSyncAlways checks the group commit: one msync per batch, covering the
// batch, errors returned by the Commit that hit them and retried by the next.
func TestSyncAlways(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var calls []int
	var fail error
	opts := testOptions(SyncAlways)
	opts.hooks = &testHooks{msync: func(b []byte) error {
		calls = append(calls, len(b))
		if fail != nil {
			return fail
		}
		return nil
	}}
	j, _, _ := mustOpen(t, dir, opts)
	payload := make([]byte, 48) // 64-byte frames
	for batch := 1; batch <= 5; batch++ {
		for range 64 {
			if err := j.Append(payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if len(calls) != batch {
			t.Fatalf("after %d batches: %d msyncs, want %d (one per batch)", batch, len(calls), batch)
		}
	}
	if err := j.Commit(); err != nil || len(calls) != 5 {
		t.Errorf("Commit of an empty batch: got %v and %d msyncs, want nil and still 5", err, len(calls))
	}

	fail = syscall.EIO
	for range 64 {
		if err := j.Append(payload); err != nil {
			t.Fatal(err)
		}
	}
	err := j.Commit()
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), segmentName(1)) {
		t.Fatalf("Commit with a failing msync: got %v, want EIO naming %s", err, segmentName(1))
	}
	failed := calls[len(calls)-1]
	fail = nil
	if err := j.Commit(); err != nil {
		t.Fatalf("Commit after the disk healed: %v", err)
	}
	if got := calls[len(calls)-1]; got < failed {
		t.Errorf("retry msynced %d bytes, want at least the %d of the failed one", got, failed)
	}
	if err := j.Sync(); err != nil || len(calls) != 7 {
		t.Errorf("Sync with nothing new: got %v and %d msyncs, want nil and 7", err, len(calls))
	}
}

// TestSyncIntervalErrors checks how background msync errors are reported:
// by every Commit until an msync succeeds after them, and at least once.
func TestSyncIntervalErrors(t *testing.T) {
	t.Parallel()
	type step struct {
		op      string // "append", "pass-fail", "pass-ok", "commit", "close"
		wantErr bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"healthy", []step{{"append", false}, {"pass-ok", false}, {"commit", false}, {"close", false}}},
		{"sticky until a sync succeeds", []step{
			{"append", false}, {"pass-fail", false}, {"commit", true}, {"commit", true},
			{"pass-fail", false}, {"commit", true}, {"pass-ok", false}, {"commit", false}, {"close", false}}},
		{"reported once even if healed first", []step{
			{"append", false}, {"pass-fail", false}, {"pass-ok", false}, {"commit", true}, {"commit", false}, {"close", false}}},
		{"unreported error returned by Close", []step{
			{"append", false}, {"pass-fail", false}, {"close", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var fail bool
			passes := make(chan error, 10)
			opts := testOptions(SyncInterval)
			opts.SyncInterval = time.Hour // passes only when the test asks
			opts.hooks = &testHooks{
				msync: func([]byte) error {
					if fail {
						return syscall.EIO
					}
					return nil
				},
				syncPass: func(err error) { passes <- err },
			}
			j, _, _ := mustOpen(t, t.TempDir(), opts)
			n := 0
			for i, s := range tt.steps {
				var err error
				switch s.op {
				case "append":
					n++
					if err := j.Append(testPayload(n)); err != nil {
						t.Fatal(err)
					}
					err = j.Commit()
				case "pass-fail", "pass-ok":
					fail = s.op == "pass-fail"
					n++
					if err := j.Append(testPayload(n)); err != nil { // something new to sync
						t.Fatal(err)
					}
					j.pub.Store(j.off)
					j.syncPassForTest()
					if perr := <-passes; (perr != nil) != fail {
						t.Fatalf("step %d: the pass returned %v, want failure=%v", i, perr, fail)
					}
					fail = false
				case "commit":
					err = j.Commit()
				case "close":
					err = j.Close()
				}
				if (err != nil) != s.wantErr {
					t.Fatalf("step %d (%s): got error %v, want error=%v", i, s.op, err, s.wantErr)
				}
				if err != nil && !errors.Is(err, syscall.EIO) {
					t.Fatalf("step %d (%s): got %v, want EIO", i, s.op, err)
				}
			}
		})
	}
}

// TestSyncIntervalTicker checks that the real ticker msyncs committed
// records, without sleeping: the test waits for the syncer's report.
func TestSyncIntervalTicker(t *testing.T) {
	t.Parallel()
	passes := make(chan error, 100)
	opts := testOptions(SyncInterval)
	opts.SyncInterval = time.Millisecond
	opts.hooks = &testHooks{syncPass: func(err error) {
		select {
		case passes <- err:
		default:
		}
	}}
	j, _, _ := mustOpen(t, t.TempDir(), opts)
	appendAll(t, j, testPayloads(1, 10))
	select {
	case err := <-passes:
		if err != nil {
			t.Fatalf("background msync: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no background msync within 30s of a Commit")
	}
	j.syncMu.Lock()
	synced := j.synced
	j.syncMu.Unlock()
	if synced != j.off {
		t.Errorf("synced up to %d, want %d (all committed records)", synced, j.off)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLockDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	l, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir: %v", err)
	}
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockDir: got %v, want ErrLocked", err)
	}
	for _, want := range []string{dir, fmt.Sprintf("pid %d", os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second LockDir error %q does not contain %q", err, want)
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("second Unlock: got %v, want nil", err)
	}
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatal(err)
	}
	// A journal in the locked directory ignores LOCK silently.
	var logs logBuffer
	l3, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Unlock()
	opts := testOptions(SyncNone)
	opts.Logger = logs.logger()
	mustOpen(t, dir, opts)
	if strings.Contains(logs.String(), "foreign") {
		t.Errorf("Open logged the LOCK file as foreign:\n%s", logs.String())
	}
}

// TestTailWithoutSpace: when the last segment cannot be made sure to have
// its disk blocks at Open (ENOSPC), appends go to a new segment.
func TestTailWithoutSpace(t *testing.T) {
	t.Parallel()
	noSpace := testOptions(SyncAlways)
	noSpace.hooks = &testHooks{reserve: func(f *os.File, _ int64) error {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: syscall.ENOSPC}
	}}
	tests := []struct {
		name     string
		snapshot bool // end with a snapshot: the last segment is empty
	}{
		{"last segment with records", false},
		{"empty last segment", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := testPayloads(1, 10)
			j, _, _ := mustOpen(t, dir, testOptions(SyncAlways))
			appendAll(t, j, want)
			if tt.snapshot {
				if err := snapshotOf(t, j, want).Commit(); err != nil {
					t.Fatal(err)
				}
			}
			size := j.Size()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			opts := noSpace
			opts.Logger = logs.logger()
			j, got, _ := mustOpen(t, dir, opts)
			checkRecords(t, got, want)
			if j.cur != nil || !strings.Contains(logs.String(), "no space") {
				t.Errorf("the last segment was kept for appends (log:\n%s)", logs.String())
			}
			if got := j.Size(); got != size {
				t.Errorf("Size() = %d, want %d", got, size)
			}
			if err := j.Append([]byte("next")); err != nil {
				t.Fatal(err)
			}
			if got, want := j.cur.name, segmentName(11); got != want {
				t.Errorf("appending to %s, want %s", got, want)
			}
			wantSegs := 1
			if tt.snapshot { // the new segment replaced the empty one
				wantSegs = 0
			}
			if len(j.segs) != wantSegs {
				t.Errorf("closed segments %v, want %d", j.segs, wantSegs)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, _ = mustOpen(t, dir, testOptions(SyncAlways))
			checkRecords(t, got, append(want, []byte("next")))
		})
	}
}

func TestWriteZeros(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "zeros"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("junk")); err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + 8
	if err := writeZeros(f, size); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != size || !allZero(b) {
		t.Errorf("got %d bytes, all zero: %v; want %d zero bytes", len(b), allZero(b), size)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, content := range []string{"first\n", "second, longer\n"} {
		if err := WriteFileAtomic(dir, "META", []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "META")); err != nil || string(b) != content {
			t.Fatalf("got %q, %v; want %q", b, err, content)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing"), "META", nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("into a missing directory: got %v, want an error naming it", err)
	}
}
