package journal

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// holeAt reports whether the file at path holds no data from off on, as
// lseek(SEEK_DATA) sees it: preallocated blocks never written, with no
// page of them cached.
func holeAt(t *testing.T, path string, off int64) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = syscall.Seek(int(f.Fd()), off, seekData)
	return errors.Is(err, syscall.ENXIO)
}

// TestRecoveryLeavesTheUnusedSegmentUnread: recovering a journal whose
// segment holds a few records in its first pages reads none of the rest of
// it (reading through the mapping would cache its pages, which lseek then
// reports as data), and still finds every record and no torn tail; bytes
// written into that rest are still a torn tail, cut and kept aside.
func TestRecoveryLeavesTheUnusedSegmentUnread(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Larger than the readahead around the first write (8 MiB here).
	opts := Options{Sync: SyncNone, SegmentSize: 32 << 20}
	payloads := testPayloads(1, 20)
	writeJournal(t, dir, opts, payloads)
	segs := segmentFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want 1", segs)
	}
	path := filepath.Join(dir, segs[0])
	const rest = 24 << 20 // far past the records
	if !holeAt(t, path, rest) {
		t.Skip("the filesystem does not report the unwritten blocks of a segment as a hole")
	}
	j, got, rec := mustOpen(t, dir, opts)
	checkRecords(t, got, payloads)
	if rec.TornTails != 0 || rec.BytesDropped != 0 {
		t.Fatalf("recovery: %+v; want no torn tail", rec)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if !holeAt(t, path, rest) {
		t.Fatalf("after recovery %s holds data from offset %d: recovery read the unused rest of the segment", path, rest)
	}

	// A torn write far into the rest is found all the same.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte{0xde, 0xad, 0xbe, 0xef}
	const torn = 20 << 20 // in the hole
	if _, err := f.WriteAt(garbage, torn); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, rec = mustOpen(t, dir, opts)
	checkRecords(t, got, payloads)
	if rec.TornTails != 1 {
		t.Fatalf("recovery after a write at offset %d: %+v; want 1 torn tail", torn, rec)
	}
	evidence := matching(t, dir, brokenSuffix)
	if len(evidence) != 1 {
		t.Fatalf("evidence files %v, want 1", evidence)
	}
	b, err := os.ReadFile(filepath.Join(dir, evidence[0]))
	if err != nil || int64(len(b)) != rec.BytesDropped || len(b) < 4 || !allZero(b[:len(b)-4]) || string(b[len(b)-4:]) != string(garbage) {
		t.Fatalf("evidence: %d bytes ending %x (%v); want the %d bytes dropped: zeros, then %x", len(b), b[max(0, len(b)-4):], err, rec.BytesDropped, garbage)
	}
}
