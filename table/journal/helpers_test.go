package journal

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: from the clock)")

// testSeed returns the seed of a randomized test and logs it.
func testSeed(t testing.TB) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	return seed
}

// testOptions are small segments, so tests roll often.
func testOptions(mode SyncMode) Options {
	return Options{Sync: mode, SegmentSize: MinSegmentSize}
}

// testPayload is the deterministic payload of record i: varying sizes (0 to
// a few KiB), nonzero bytes.
func testPayload(i int) []byte {
	n := (i * 37) % 300
	if i%11 == 0 {
		n += 2000
	}
	if i%13 == 0 {
		n = 0
	}
	p := make([]byte, n)
	for k := range p {
		p[k] = byte(i*31+k*7) | 1
	}
	return p
}

func testPayloads(from, n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = testPayload(from + i)
	}
	return ps
}

// collector is a replay function that keeps copies of the payloads.
type collector struct{ got [][]byte }

func (c *collector) replay(p []byte) error {
	c.got = append(c.got, bytes.Clone(p))
	return nil
}

// openCollect opens the journal in dir and returns what it replayed.
func openCollect(t testing.TB, dir string, opts Options) (*Journal, [][]byte, Recovery, error) {
	t.Helper()
	var c collector
	j, rec, err := Open(dir, opts, c.replay)
	if err == nil {
		t.Cleanup(func() { _ = j.Close() })
	}
	return j, c.got, rec, err
}

// mustOpen opens the journal in dir or fails the test.
func mustOpen(t testing.TB, dir string, opts Options) (*Journal, [][]byte, Recovery) {
	t.Helper()
	j, got, rec, err := openCollect(t, dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return j, got, rec
}

// appendAll appends payloads and commits.
func appendAll(t testing.TB, j *Journal, payloads [][]byte) {
	t.Helper()
	for i, p := range payloads {
		if err := j.Append(p); err != nil {
			t.Fatalf("Append(record %d of %d, %d bytes): %v", i, len(payloads), len(p), err)
		}
	}
	if err := j.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// snapshotOf starts a snapshot of j and appends payloads to it; the
// caller commits or aborts it.
func snapshotOf(t testing.TB, j *Journal, payloads [][]byte) *SnapshotWriter {
	t.Helper()
	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		if err := w.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// writeJournal creates a journal in dir holding payloads and closes it.
func writeJournal(t testing.TB, dir string, opts Options, payloads [][]byte) {
	t.Helper()
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, payloads)
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// checkRecords fails unless got equals want.
func checkRecords(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: got %d bytes %.16x..., want %d bytes %.16x...", i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}

// checkAfterClose closes j and checks that a recovery of dir with opts
// reads want.
func checkAfterClose(t testing.TB, dir string, j *Journal, opts Options, want [][]byte) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, _ := mustOpen(t, dir, opts)
	checkRecords(t, got, want)
}

// checkPrefix fails unless got is a prefix of want of at least min records.
func checkPrefix(t testing.TB, got, want [][]byte, min int) {
	t.Helper()
	if len(got) > len(want) || len(got) < min {
		t.Fatalf("replayed %d records, want a prefix of %d records with at least %d", len(got), len(want), min)
	}
	checkRecords(t, got, want[:len(got)])
}

// names lists the file names in dir.
func names(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range ents {
		ns = append(ns, e.Name())
	}
	return ns
}

// matching returns the names in dir that contain sub.
func matching(t testing.TB, dir, sub string) []string {
	t.Helper()
	var ns []string
	for _, n := range names(t, dir) {
		if strings.Contains(n, sub) {
			ns = append(ns, n)
		}
	}
	return ns
}

// segmentFiles lists the segment files of dir, oldest first.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	var ns []string
	for _, n := range names(t, dir) {
		if _, ok := parseName(n, segmentPrefix, segmentSuffix); ok {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, n := range names(t, src) {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// frameOffsets returns the offsets of the valid frames of a segment file.
func frameOffsets(t testing.TB, b []byte) []int64 {
	t.Helper()
	_, salt, reason := parseHeader(b, segmentMagic)
	if reason != "" {
		t.Fatalf("segment header: %s", reason)
	}
	var offs []int64
	for off := int64(headerSize); ; {
		fr, st, _ := decodeFrame(b, off, saltCRC(salt))
		if st != frameOK {
			return offs
		}
		offs = append(offs, off)
		off = fr.next
	}
}

// logBuffer is a slog destination safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// isCorrupt reports whether err is a clean ErrCorrupt with a file and offset.
func isCorrupt(err error) (*CorruptError, bool) {
	var ce *CorruptError
	if errors.As(err, &ce) && errors.Is(err, ErrCorrupt) {
		return ce, true
	}
	return nil, false
}
