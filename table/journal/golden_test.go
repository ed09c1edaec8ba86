package journal

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenOptions fix the salt, so files are reproducible byte for byte.
func goldenOptions() Options {
	o := testOptions(SyncNone)
	o.hooks = &testHooks{salt: func() uint64 { return 0x0123456789abcdef }}
	return o
}

var (
	goldenRecords = [][]byte{
		[]byte("alpha"),
		{},
		[]byte("a payload of 24 bytes..."),
		bytes.Repeat([]byte{0xa5}, 8),
	}
	goldenState = [][]byte{[]byte("state-1"), []byte("state-2")}
)

const (
	goldenSegment  = "testdata/segment.golden"  // seg-0000000000000001.log up to its last nonzero byte
	goldenSnapshot = "testdata/snapshot.golden" // snap-0000000000000004.snap
)

// TestGoldenWrite checks that the journal writes exactly the files in
// testdata (go test -update rewrites them).
func TestGoldenWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _, _ := mustOpen(t, dir, goldenOptions())
	appendAll(t, j, goldenRecords)
	seg, err := os.ReadFile(filepath.Join(dir, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshotOf(t, j, goldenState).Commit(); err != nil {
		t.Fatal(err)
	}
	snap, err := os.ReadFile(filepath.Join(dir, snapshotName(4)))
	if err != nil {
		t.Fatal(err)
	}
	if len(seg) != MinSegmentSize {
		t.Errorf("segment file is %d bytes, want %d", len(seg), MinSegmentSize)
	}
	data := seg[:dataEnd(seg, 0)]
	if !allZero(seg[len(data):]) {
		t.Error("segment not zero after its data")
	}
	for _, g := range []struct {
		path string
		got  []byte
	}{{goldenSegment, data}, {goldenSnapshot, snap}} {
		if *update {
			if err := os.WriteFile(g.path, g.got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(g.path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(g.got, want) {
			t.Errorf("%s differs:\ngot  %x\nwant %x", g.path, g.got, want)
		}
	}
}

// TestGoldenRead checks that the files in testdata, written by this or an
// earlier version, recover to the records they hold.
func TestGoldenRead(t *testing.T) {
	t.Parallel()
	if *update {
		t.Skip("the golden files are being rewritten")
	}
	seg, err := os.ReadFile(goldenSegment)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := os.ReadFile(goldenSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files map[string][]byte
		want  [][]byte
	}{
		{"segment", map[string][]byte{segmentName(1): append(seg, make([]byte, MinSegmentSize-len(seg))...)}, goldenRecords},
		{"snapshot", map[string][]byte{snapshotName(4): snap}, goldenState},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		for n, b := range tt.files {
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		j, got, rec := mustOpen(t, dir, testOptions(SyncNone))
		checkRecords(t, got, tt.want)
		if j.Seq() != 4 || rec.TornTails != 0 {
			t.Errorf("%s: Seq() = %d, %d torn tails; want 4 and 0", tt.name, j.Seq(), rec.TornTails)
		}
	}
}
