package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// oneSegment writes n records (short, varied) into a single segment and
// returns the directory, the records, the segment's bytes and the offsets
// of its frames.
func oneSegment(t *testing.T, n int) (string, [][]byte, []byte, []int64) {
	t.Helper()
	src := t.TempDir()
	want := testPayloads(1, n)
	writeJournal(t, src, testOptions(SyncNone), want)
	img, err := os.ReadFile(filepath.Join(src, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, img)
	if len(offs) != n {
		t.Fatalf("the segment holds %d frames, want %d", len(offs), n)
	}
	return src, want, img, offs
}

// withSegment writes img as the only segment of a new journal directory.
func withSegment(t *testing.T, img []byte) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, segmentName(1))
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// TestDamageBeforeValidRecordsIsCorrupt: a byte flipped in any frame of the
// newest segment but its last (the length word, checksum, sequence number
// or payload) is followed by valid records: Open refuses with a
// *CorruptError naming the file and the damaged frame's offset, changing
// nothing; with Repair it cuts there, keeps the cut bytes as evidence,
// reports a repair (not a torn tail), and appends after the cut.
func TestDamageBeforeValidRecordsIsCorrupt(t *testing.T) {
	t.Parallel()
	_, want, orig, offs := oneSegment(t, 12)
	end := offs[len(offs)-1] + frameSize(len(want[len(want)-1]))
	for k := range len(offs) - 1 {
		for _, field := range []struct {
			name string
			at   int64
		}{{"length", 0}, {"checksum", 5}, {"sequence number", 9}, {"payload", frameHeaderSize}} {
			if field.at >= frameHeaderSize && len(want[k]) == 0 {
				continue // an empty payload
			}
			t.Run(fmt.Sprintf("frame %d %s", k, field.name), func(t *testing.T) {
				t.Parallel()
				img := bytes.Clone(orig)
				img[offs[k]+field.at] ^= 0x5a
				dir, path := withSegment(t, img)
				_, _, _, err := openCollect(t, dir, testOptions(SyncNone))
				ce, ok := isCorrupt(err)
				if !ok || ce.Path != path || ce.Offset != offs[k] {
					t.Fatalf("Open: got %v, want a *CorruptError at %s offset %d", err, path, offs[k])
				}
				if !strings.Contains(ce.Reason, "not a torn tail") {
					t.Errorf("reason %q does not say why it is not a torn tail", ce.Reason)
				}
				if b, _ := os.ReadFile(path); !bytes.Equal(b, img) || !slices.Equal(names(t, dir), []string{segmentName(1)}) {
					t.Fatalf("a refused Open changed the directory: %v", names(t, dir))
				}

				opts := testOptions(SyncNone)
				opts.Repair = true
				j, got, rec, err := openCollect(t, dir, opts)
				if err != nil {
					t.Fatalf("Open with Repair: %v", err)
				}
				checkRecords(t, got, want[:k])
				if !rec.Repaired || rec.TornTails != 0 || rec.BytesDropped != end-offs[k] {
					t.Fatalf("Recovery %+v: want repaired, no torn tail, %d bytes dropped", rec, end-offs[k])
				}
				evidence, err := os.ReadFile(path + brokenSuffix)
				if err != nil || !bytes.Equal(evidence, img[offs[k]:end]) {
					t.Fatalf("evidence: %d bytes (%v), want the %d bytes from the damage to the end of data", len(evidence), err, end-offs[k])
				}
				if err := j.Append([]byte("after")); err != nil {
					t.Fatal(err)
				}
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
				_, got, rec = mustOpen(t, dir, testOptions(SyncNone))
				checkRecords(t, got, append(want[:k:k], []byte("after")))
				if rec.Repaired || rec.TornTails != 0 {
					t.Fatalf("second Open: %+v, want nothing to cut", rec)
				}
			})
		}
	}
}

// TestTornLastFrameIsATornTail: a last frame that was never completed
// (its length word zero, or only a prefix of it written, or its end lost)
// with nothing valid after it is still a torn tail.
func TestTornLastFrameIsATornTail(t *testing.T) {
	t.Parallel()
	_, want, orig, offs := oneSegment(t, 12)
	last := offs[len(offs)-1]
	n := last + frameHeaderSize + int64(len(want[len(want)-1])) // the last frame's unpadded end
	end := last + frameSize(len(want[len(want)-1]))
	cases := []struct {
		name string
		do   func(b []byte)
	}{
		{"length word zeroed", func(b []byte) { clear(b[last : last+4]) }},
		{"only the first 8 bytes written", func(b []byte) { clear(b[last+8 : end]) }},
		{"end of the payload lost", func(b []byte) { clear(b[n-4 : n]) }},
		{"garbage after the last record", func(b []byte) { copy(b[end:], "garbage") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			img := bytes.Clone(orig)
			c.do(img)
			dir, _ := withSegment(t, img)
			_, got, rec := mustOpen(t, dir, testOptions(SyncNone))
			wantN := len(want) - 1
			if c.name == "garbage after the last record" {
				wantN = len(want)
			}
			checkRecords(t, got, want[:wantN])
			if rec.TornTails != 1 || rec.Repaired {
				t.Fatalf("Recovery %+v: want 1 torn tail", rec)
			}
		})
	}
}

// TestFlipEveryByteOfTheNewestSegment flips each byte of a small segment in
// turn (header, every frame, and a little past the end of data): damage
// with a valid record after it is refused as ErrCorrupt at that record's
// frame (offset 0 for the header), the rest is a torn tail keeping every
// record before it — and never is a record after the damage dropped
// silently.
func TestFlipEveryByteOfTheNewestSegment(t *testing.T) {
	t.Parallel()
	_, want, orig, offs := oneSegment(t, 6)
	flipEveryByte(t, want, orig, offs, offs[len(offs)-1]+frameSize(len(want[len(want)-1])))
}

// flipEveryByte flips each byte of the segment image orig in turn, up to a
// little past end (the end of its data), and checks what
// TestFlipEveryByteOfTheNewestSegment says: want are its records, offs
// their frames' offsets.
func flipEveryByte(t *testing.T, want [][]byte, orig []byte, offs []int64, end int64) {
	t.Helper()
	for i := range end + 16 {
		img := bytes.Clone(orig)
		img[i] ^= 0xff
		dir, path := withSegment(t, img)
		j, got, rec, err := openCollect(t, dir, testOptions(SyncNone))
		if n := flipOutcome(t, i, path, offs, end, len(want), rec, err); n >= 0 {
			checkRecords(t, got, want[:n])
		}
		if err == nil {
			_ = j.Close()
		}
	}
}

// flipOutcome checks what opening a segment whose byte i was flipped gave
// (rec, err; the segment at path, its frames at offs, its data ending at
// end, records of them) in the cases every format shares, and returns how
// many of the records, from the first, the replay must have given, or -1
// when it failed as it must: for a byte of the salt none (no frame can be
// checked: a torn tail); of the header, ErrCorrupt at offset 0; of a frame
// before the last, ErrCorrupt at its offset; of the last frame, those
// before it (a torn tail); past end, all of them (a torn tail, the
// garbage).
func flipOutcome(t *testing.T, i int64, path string, offs []int64, end int64, records int, rec Recovery, err error) int {
	t.Helper()
	k, _ := slices.BinarySearch(offs, i+1)
	k-- // the frame holding byte i
	switch last := offs[len(offs)-1]; {
	case i >= 24 && i < 32:
		if err != nil || rec.TornTails != 1 {
			t.Fatalf("byte %d (salt): got %+v, %v; want no record and a torn tail", i, rec, err)
		}
		return 0
	case i < headerSize:
		if ce, ok := isCorrupt(err); !ok || ce.Path != path || ce.Offset != 0 {
			t.Fatalf("byte %d (header): got %v, want ErrCorrupt at offset 0", i, err)
		}
	case i < last:
		if ce, ok := isCorrupt(err); !ok || ce.Path != path || ce.Offset != offs[k] {
			t.Fatalf("byte %d (frame %d): got %v, want ErrCorrupt at offset %d", i, k, err, offs[k])
		}
	default:
		if err != nil || rec.TornTails != 1 {
			t.Fatalf("byte %d (last frame or after): got %+v, %v; want a torn tail", i, rec, err)
		}
		if i >= end {
			return records
		}
		return records - 1
	}
	return -1
}
