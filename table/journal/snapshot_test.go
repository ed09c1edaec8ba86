package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSnapshotConcurrent writes a snapshot from another goroutine while the
// owner appends, commits and asks for Size and Seq.
func TestSnapshotConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncInterval)
	all := testPayloads(1, 900)
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, all[:300])
	before := segmentFiles(t, dir)

	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.StartSnapshot(); !errors.Is(err, ErrSnapshotInProgress) {
		t.Errorf("second StartSnapshot: got %v, want ErrSnapshotInProgress", err)
	}
	state := all[:300]
	done := make(chan error)
	go func() {
		for _, p := range state {
			if err := w.Append(p); err != nil {
				done <- err
				return
			}
		}
		done <- w.Commit()
	}()
	for i := 300; i < len(all); i += 20 {
		appendAll(t, j, all[i:i+20])
		_ = j.Size()
	}
	if err := <-done; err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for _, n := range before {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("segment %s, covered by the snapshot, still exists (%v)", n, err)
		}
	}
	snap := snapshotName(300)
	if got := matching(t, dir, ".snap"); len(got) != 1 || got[0] != snap {
		t.Errorf("snapshot files %v, want [%s]", got, snap)
	}
	if got := matching(t, dir, tmpSuffix); len(got) != 0 {
		t.Errorf("temporary files left: %v", got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j, got, rec := mustOpen(t, dir, opts)
	checkRecords(t, got, all)
	if rec.Snapshot != snap || rec.SnapshotRecords != 300 || rec.SegmentRecords != 600 {
		t.Errorf("Recovery = %+v, want %s with 300 records, then 600 segment records", rec, snap)
	}
	if got, want := j.Seq(), uint64(len(all)); got != want {
		t.Errorf("Seq() = %d, want %d", got, want)
	}

	// A second snapshot replaces the first.
	state = [][]byte{[]byte("everything"), []byte("compacted")}
	w = snapshotOf(t, j, state)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := matching(t, dir, ".snap"); len(got) != 1 || got[0] != snapshotName(900) {
		t.Errorf("snapshot files %v, want [%s]", got, snapshotName(900))
	}
	if got := segmentFiles(t, dir); len(got) != 1 || got[0] != segmentName(901) {
		t.Errorf("segments %v, want only the fresh %s", got, segmentName(901))
	}
	if got := j.Size(); got != 0 {
		t.Errorf("Size() = %d after a snapshot of everything, want 0", got)
	}
	if err := j.Append([]byte("later")); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, _ = mustOpen(t, dir, opts)
	checkRecords(t, got, append(state, []byte("later")))
}

func TestSnapshotAbort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncNone)
	want := testPayloads(1, 50)
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, want)
	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if got := matching(t, dir, tmpSuffix); len(got) != 1 {
		t.Fatalf("temporary files %v, want one while the snapshot is written", got)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if err := w.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Abort: got %v, want ErrClosed", err)
	}
	if err := w.Commit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after Abort: got %v, want ErrClosed", err)
	}
	if got := matching(t, dir, tmpSuffix); len(got) != 0 {
		t.Errorf("temporary files after Abort: %v", got)
	}
	if got := matching(t, dir, ".snap"); len(got) != 0 {
		t.Errorf("snapshot files after Abort: %v", got)
	}
	w, err = j.StartSnapshot() // no longer in progress
	if err != nil {
		t.Fatalf("StartSnapshot after Abort: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, rec := mustOpen(t, dir, opts)
	checkRecords(t, got, want)
	if rec.Snapshot != "" {
		t.Errorf("Recovery.Snapshot = %q, want none", rec.Snapshot)
	}
}

func TestSnapshotCommitAfterClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncNone)
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, testPayloads(1, 5))
	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after the journal's Close: got %v, want ErrClosed", err)
	}
	if got := matching(t, dir, "snap"); len(got) != 0 {
		t.Errorf("snapshot files %v, want none", got)
	}
}

// TestSnapshotOfEmptyJournal: a snapshot at sequence number 0, and one of a
// journal that has no segment after it.
func TestSnapshotOfEmptyJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncAlways)
	j, _, _ := mustOpen(t, dir, opts)
	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, testPayloads(1, 3))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, got, rec := mustOpen(t, dir, opts)
	checkRecords(t, got, testPayloads(1, 3))
	if rec.Snapshot != snapshotName(0) {
		t.Errorf("Recovery.Snapshot = %q, want %q", rec.Snapshot, snapshotName(0))
	}
	// Snapshot everything; then there is no segment with records at all.
	w, err = j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte("all")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range segmentFiles(t, dir) {
		if err := os.Remove(filepath.Join(dir, n)); err != nil { // the empty fresh segment
			t.Fatal(err)
		}
	}
	j, got, _ = mustOpen(t, dir, opts)
	checkRecords(t, got, [][]byte{[]byte("all")})
	if j.Seq() != 3 {
		t.Errorf("Seq() = %d, want 3", j.Seq())
	}
	if err := j.Append([]byte("next")); err != nil {
		t.Fatal(err)
	}
	if j.cur.name != segmentName(4) {
		t.Errorf("appending into %s, want %s", j.cur.name, segmentName(4))
	}
}

// TestSnapshotInterruptedCompaction: a crash after the rename of a snapshot
// but before the covered files were removed. Open finishes the job.
func TestSnapshotInterruptedCompaction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncNone)
	all := testPayloads(1, 400)
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, all[:100])
	saved := map[string][]byte{}
	for _, n := range names(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		saved[n] = b
	}
	if err := snapshotOf(t, j, all[:100]).Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, all[100:])
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for n, b := range saved { // the covered segments come back
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, got, rec := mustOpen(t, dir, opts)
	checkRecords(t, got, all)
	if rec.SnapshotRecords != 100 || rec.SegmentRecords != 300 {
		t.Errorf("Recovery = %+v, want 100 snapshot and 300 segment records", rec)
	}
	for n := range saved {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("covered segment %s not removed by Open (%v)", n, err)
		}
	}
}

// incompleteSnapshot writes the records of a snapshot covering the journal
// as it is, without a trailer, under the snapshot's final name.
func incompleteSnapshot(t *testing.T, j *Journal, payloads [][]byte) string {
	t.Helper()
	w := snapshotOf(t, j, payloads)
	if err := w.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(w.tmp)
	if err != nil {
		t.Fatal(err)
	}
	name := snapshotName(w.seq)
	if err := os.WriteFile(filepath.Join(j.dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestSnapshotWithoutTrailer: an incomplete snapshot is ignored in favour of
// the previous state when the segments it would replace are there, and is
// ErrCorrupt when they are gone.
func TestSnapshotWithoutTrailer(t *testing.T) {
	t.Parallel()
	t.Run("older state available", func(t *testing.T) {
		t.Parallel()
		dir, all := buildJournal(t, testOptions(SyncNone), 100, 200) // snapshot at 100
		opts := testOptions(SyncNone)
		j, _, _ := mustOpen(t, dir, opts)
		bad := incompleteSnapshot(t, j, all[:250])
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		var logs logBuffer
		opts.Logger = logs.logger()
		_, got, rec := mustOpen(t, dir, opts)
		checkRecords(t, got, all)
		if rec.Snapshot != snapshotName(100) {
			t.Errorf("Recovery.Snapshot = %q, want the older %q", rec.Snapshot, snapshotName(100))
		}
		if !strings.Contains(logs.String(), "no trailer") {
			t.Errorf("the invalid snapshot was not logged:\n%s", logs.String())
		}
		if _, err := os.Stat(filepath.Join(dir, bad+brokenSuffix)); err != nil {
			t.Errorf("the invalid snapshot was not moved aside: %v", err)
		}
	})
	t.Run("segments gone", func(t *testing.T) {
		t.Parallel()
		dir, all := buildJournal(t, testOptions(SyncNone), 100, 200)
		path := filepath.Join(dir, snapshotName(100))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		trailerFrame := frameSize(trailerPayloadSize)
		if err := os.WriteFile(path, b[:int64(len(b))-trailerFrame], 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, _, err = openCollect(t, dir, testOptions(SyncNone))
		ce, ok := isCorrupt(err)
		if !ok || ce.Path != path {
			t.Fatalf("Open: got %v, want ErrCorrupt naming %s", err, path)
		}
		repair := testOptions(SyncNone)
		repair.Repair = true
		_, got, rec := mustOpen(t, dir, repair)
		checkPrefix(t, got, all, 0)
		if !rec.Repaired {
			t.Errorf("Recovery = %+v, want Repaired", rec)
		}
	})
	t.Run("only a snapshot", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		opts := testOptions(SyncNone)
		j, _, _ := mustOpen(t, dir, opts)
		appendAll(t, j, testPayloads(1, 10))
		w, err := j.StartSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append([]byte("state")); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		for _, n := range segmentFiles(t, dir) {
			_ = os.Remove(filepath.Join(dir, n))
		}
		path := filepath.Join(dir, snapshotName(10))
		flip(t, path, headerSize+frameHeaderSize) // the record's payload
		_, _, _, err = openCollect(t, dir, opts)
		if ce, ok := isCorrupt(err); !ok || ce.Path != path || ce.Offset != headerSize {
			t.Fatalf("Open: got %v, want ErrCorrupt at %s offset %d", err, path, headerSize)
		}
	})
}

func TestSnapshotFormatChecks(t *testing.T) {
	t.Parallel()
	dir, _ := buildJournal(t, testOptions(SyncNone), 3, 0)
	good, err := os.ReadFile(filepath.Join(dir, snapshotName(3)))
	if err != nil {
		t.Fatal(err)
	}
	trailer := int64(len(good)) - frameSize(trailerPayloadSize)
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		reason string
	}{
		{"valid", func(b []byte) []byte { return b }, ""},
		{"empty", func([]byte) []byte { return nil }, "empty file"},
		{"bytes after the trailer", func(b []byte) []byte { return append(b, make([]byte, 8)...) }, "after the trailer"},
		{"no trailer", func(b []byte) []byte { return b[:trailer] }, "no trailer"},
		{"segment magic", func(b []byte) []byte { copy(b, segmentMagic); return b }, "bad magic"},
		{"trailer flipped", func(b []byte) []byte { b[trailer+frameHeaderSize] ^= 1; return b }, "checksum"},
		{"header seq differs from the name", func(b []byte) []byte {
			_, salt, _ := parseHeader(b, snapshotMagic)
			putHeader(b, snapshotMagic, 4, salt)
			return b
		}, "file name"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), snapshotName(3))
		if err := os.WriteFile(path, tt.mutate(bytes.Clone(good)), 0o644); err != nil {
			t.Fatal(err)
		}
		s, _, reason, err := openSnapshot(path, 3)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if s != nil {
			_ = s.close()
		}
		if (tt.reason == "") != (reason == "") || !strings.Contains(reason, tt.reason) {
			t.Errorf("%s: got reason %q, want one containing %q", tt.name, reason, tt.reason)
		}
	}
}

// TestSnapshotCommitDoesNotHoldUpARoll: while a snapshot's Commit is in
// its rename into place or in the removal of the files it replaces (slow
// on a busy disk), the owner's Appends roll to new segments without
// waiting for it; afterwards every record is there.
func TestSnapshotCommitDoesNotHoldUpARoll(t *testing.T) {
	t.Parallel()
	for _, stage := range []string{"rename", "remove"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hold := func() {
				once.Do(func() { close(entered) })
				<-release
			}
			opts := testOptions(SyncNone)
			opts.hooks = &testHooks{}
			switch stage {
			case "rename":
				opts.hooks.rename = func(oldpath, newpath string) error { hold(); return os.Rename(oldpath, newpath) }
			case "remove":
				opts.hooks.remove = func(path string) error { hold(); return os.Remove(path) }
			}
			all := testPayloads(1, 600)
			j, _, _ := mustOpen(t, dir, opts)
			appendAll(t, j, all[:200])
			w := snapshotOf(t, j, all[:200])
			committed := make(chan error, 1)
			go func() { committed <- w.Commit() }()
			<-entered
			before := len(segmentFiles(t, dir))
			appended := make(chan struct{})
			go func() {
				defer close(appended)
				appendAll(t, j, all[200:])
			}()
			select {
			case <-appended:
			case <-time.After(20 * time.Second):
				close(release)
				t.Fatalf("400 Appends (rolls included) did not return while the snapshot's %s was held", stage)
			}
			if after := len(segmentFiles(t, dir)); after <= before {
				t.Errorf("segment files: %d while the Commit was held, %d after the Appends: want a roll meanwhile", before, after)
			}
			close(release)
			if err := <-committed; err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, _ := mustOpen(t, dir, opts)
			checkRecords(t, got, all) // the snapshot's 200, then the segments' 400
		})
	}
}

// TestCloseWaitsForACommitInFlight: Close returns only once a snapshot's
// Commit that began before it has renamed its file and removed the files
// it replaces, so that nothing changes in the directory after Close.
func TestCloseWaitsForACommitInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	opts := testOptions(SyncNone)
	opts.hooks = &testHooks{remove: func(path string) error {
		once.Do(func() { close(entered) })
		<-release
		return os.Remove(path)
	}}
	all := testPayloads(1, 200)
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, all)
	covered := segmentFiles(t, dir)
	w := snapshotOf(t, j, all)
	committed := make(chan error, 1)
	go func() { committed <- w.Commit() }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- j.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the Commit was removing files", err)
	case <-time.After(200 * time.Millisecond): // a Close that does not wait returns at once
	}
	close(release)
	if err := <-committed; err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, n := range covered {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("segment %s, covered by the snapshot, exists after Close (%v)", n, err)
		}
	}
}
