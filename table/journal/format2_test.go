package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// v2Options are testOptions writing segments of format 2.
func v2Options(mode SyncMode) Options {
	o := testOptions(mode)
	o.SegmentFormat = 2
	return o
}

const goldenSegmentV2 = "testdata/segment-v2.golden" // seg-0000000000000001.log of format 2, up to its last nonzero byte

// TestGoldenV2: a journal of segment format 2 writes exactly the file in
// testdata (go test -update rewrites it): frames of 7 bytes besides their
// payload, back to back; and that file recovers to its records.
func TestGoldenV2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := goldenOptions()
	opts.SegmentFormat = 2
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, goldenRecords)
	seg, err := os.ReadFile(filepath.Join(dir, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	data := seg[:dataEnd(seg, 0)]
	wantLen := headerSize
	for _, p := range goldenRecords {
		wantLen += 7 + len(p)
	}
	if len(data) != wantLen || version(seg) != 2 {
		t.Fatalf("segment data is %d bytes of version %d, want %d of version 2", len(data), version(seg), wantLen)
	}
	if *update {
		if err := os.WriteFile(goldenSegmentV2, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenSegmentV2)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("%s differs:\ngot  %x\nwant %x", goldenSegmentV2, data, want)
	}
	rdir, _ := withSegment(t, append(bytes.Clone(want), make([]byte, MinSegmentSize-len(want))...))
	j, got, rec := mustOpen(t, rdir, testOptions(SyncNone))
	checkRecords(t, got, goldenRecords)
	if j.Seq() != 4 || rec.TornTails != 0 {
		t.Fatalf("Seq() = %d, %d torn tails; want 4 and 0", j.Seq(), rec.TornTails)
	}
}

// TestFrameSizeV2: a 9-byte record (a repeat hit's count entry) takes 16
// bytes of journal in format 2 (32 in format 1), an 8-byte one 15 (24), a
// 200-byte one 208 (216).
func TestFrameSizeV2(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ payload, v1, v2 int64 }{{9, 32, 16}, {8, 24, 15}, {200, 216, 208}} {
		for _, c := range []struct {
			opts Options
			want int64
		}{{testOptions(SyncNone), tt.v1}, {v2Options(SyncNone), tt.v2}} {
			j, _, _ := mustOpen(t, t.TempDir(), c.opts)
			p := bytes.Repeat([]byte{7}, int(tt.payload))
			appendAll(t, j, [][]byte{p, p})
			before := j.Size()
			appendAll(t, j, [][]byte{p})
			if got := j.Size() - before; got != c.want {
				t.Errorf("format %d: a %d-byte record takes %d bytes, want %d", c.opts.SegmentFormat, tt.payload, got, c.want)
			}
		}
	}
}

// TestUnknownSegmentVersion: a whole segment header of a format this build
// does not read (4) fails Open with ErrFormat naming the file, changing
// nothing, even as the last segment (never read as a torn tail).
func TestUnknownSegmentVersion(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeJournal(t, src, v2Options(SyncNone), testPayloads(1, 5))
	img, err := os.ReadFile(filepath.Join(src, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	putHeaderVersion(img, segmentMagic, latestFormat+1, 1, le.Uint64(img[24:]))
	dir, path := withSegment(t, img)
	for _, repair := range []bool{false, true} {
		opts := testOptions(SyncNone)
		opts.Repair = repair
		_, _, _, err := openCollect(t, dir, opts)
		if !errors.Is(err, ErrFormat) || !bytes.Contains([]byte(err.Error()), []byte(path)) || !bytes.Contains([]byte(err.Error()), []byte("version 4")) {
			t.Fatalf("Open (repair %v): got %v, want ErrFormat naming %s and version 4", repair, err, path)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, img) || !slices.Equal(names(t, dir), []string{segmentName(1)}) {
			t.Fatalf("a refused Open changed the directory: %v", names(t, dir))
		}
	}
	if _, err := v2Options(SyncNone).config(); err != nil {
		t.Fatal(err)
	}
	bad := testOptions(SyncNone)
	bad.SegmentFormat = latestFormat + 1
	if _, _, err := Open(t.TempDir(), bad, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Open with SegmentFormat 4: got %v, want ErrInvalidOptions", err)
	}
}

// TestFormatsMix: a journal of format 1 reopened to write format 2 goes on
// in format 1 in its last segment, rolls to segments of format 2, and
// recovers every record of both, reopened either way.
func TestFormatsMix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := testPayloads(1, 50)
	writeJournal(t, dir, testOptions(SyncNone), want)
	j, got, _ := mustOpen(t, dir, v2Options(SyncNone))
	checkRecords(t, got, want)
	more := testPayloads(51, 400) // several segments
	appendAll(t, j, more)
	want = append(want, more...)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	for i, name := range segs {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if v, w := version(b), uint32(min(i+1, 2)); v != w {
			t.Fatalf("segment %d (%s) has version %d, want %d", i, name, v, w)
		}
	}
	for _, opts := range []Options{testOptions(SyncNone), v2Options(SyncNone)} {
		_, got, rec := mustOpen(t, dir, opts)
		checkRecords(t, got, want)
		if rec.TornTails != 0 || rec.Segments != len(segs) {
			t.Fatalf("Recovery %+v: want %d segments and nothing cut", rec, len(segs))
		}
	}
}

// oneSegmentV2 is oneSegment in format 2.
func oneSegmentV2(t *testing.T, n int) ([][]byte, []byte, []int64) {
	t.Helper()
	src := t.TempDir()
	want := testPayloads(1, n)
	writeJournal(t, src, v2Options(SyncNone), want)
	img, err := os.ReadFile(filepath.Join(src, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	salt := saltCRC(le.Uint64(img[24:]))
	var offs []int64
	var scratch [8]byte
	for off, seq := int64(headerSize), uint64(1); ; seq++ {
		fr, st, _ := decodeFrame2(img, off, salt, seq, &scratch)
		if st != frameOK {
			break
		}
		offs = append(offs, off)
		off = fr.next
	}
	if len(offs) != n {
		t.Fatalf("the segment holds %d frames, want %d", len(offs), n)
	}
	return want, img, offs
}

// TestFlipEveryByteV2 is TestFlipEveryByteOfTheNewestSegment for format 2:
// each byte of a small segment flipped in turn (header, every frame, and a
// little past the end of data) is ErrCorrupt at the damaged frame when a
// valid record follows (offset 0 for the header), else a torn tail keeping
// every record before it; never a record after the damage dropped.
func TestFlipEveryByteV2(t *testing.T) {
	t.Parallel()
	want, orig, offs := oneSegmentV2(t, 6)
	flipEveryByte(t, want, orig, offs, offs[len(offs)-1]+frame2Size(len(want[len(want)-1])))
}

// TestTornLastFrameV2: the last frame of format 2 cut at every byte (its
// bytes from there to its end zeroed, as a write never completed) is a torn
// tail keeping the records before it, cut exactly at its start, and appends
// go on there.
func TestTornLastFrameV2(t *testing.T) {
	t.Parallel()
	want, orig, offs := oneSegmentV2(t, 12)
	last := offs[len(offs)-1]
	end := last + frame2Size(len(want[len(want)-1]))
	for cut := last; cut < end; cut++ {
		img := bytes.Clone(orig)
		clear(img[cut:end])
		if cut > last {
			img[last] = 0 // the length's first byte goes last: still unwritten
		}
		dir, _ := withSegment(t, img)
		j, got, rec := mustOpen(t, dir, testOptions(SyncNone))
		checkRecords(t, got, want[:len(want)-1])
		wantTorn := 1
		if allZero(img[last:end]) {
			wantTorn = 0 // nothing of it written: a clean end
		}
		if rec.TornTails != wantTorn || rec.Repaired || j.off != last {
			t.Fatalf("cut at %d: Recovery %+v, appending at %d; want %d torn tails, appending at %d", cut, rec, j.off, wantTorn, last)
		}
		if err := j.Append([]byte("after")); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		_, got, _ = mustOpen(t, dir, testOptions(SyncNone))
		checkRecords(t, got, append(want[:len(want)-1:len(want)-1], []byte("after")))
	}
}

// TestAppendV2DoesNotAllocate: an Append of format 2 that does not roll
// allocates nothing.
func TestAppendV2DoesNotAllocate(t *testing.T) { // not parallel: AllocsPerRun refuses
	j, _, _ := mustOpen(t, t.TempDir(), v2Options(SyncNone))
	p := []byte("\x20\x05\x01\x02\x00")
	appendAll(t, j, [][]byte{p})
	if n := testing.AllocsPerRun(1000, func() { _ = j.Append(p) }); n != 0 {
		t.Fatalf("Append: %v allocations, want 0", n)
	}
}

// TestPutFrame2Checksum: a frame's checksum is the same whether its payload
// is small enough to be summed in one call with the bytes before it or not
// (payloads of 0 to 80 bytes, across the scratch's 49), and every frame
// decodes.
func TestPutFrame2Checksum(t *testing.T) {
	t.Parallel()
	const salt = 0x9e3779b9
	var scratch [frame2Scratch]byte
	var dec [8]byte
	for n := range 81 {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(7*i + n)
		}
		seq := uint64(1)<<40 + uint64(n)
		size := frame2Size(n)
		img := make([]byte, headerSize+size)
		b := img[headerSize:]
		putFrame2(b, salt, &scratch, seq, payload)
		k := uvarintLen(uint64(n) + 1)
		var head []byte
		head = binary.LittleEndian.AppendUint64(head, seq)
		head = binary.AppendUvarint(head, uint64(n)+1)
		head = binary.LittleEndian.AppendUint16(head, uint16(seq))
		want := crc32.Update(crc32.Update(salt, castagnoli, head), castagnoli, payload)
		if got := binary.LittleEndian.Uint32(b[k+2:]); got != want {
			t.Errorf("payload of %d bytes: checksum %08x, want %08x", n, got, want)
		}
		fr, st, reason := decodeFrame2(img, headerSize, salt, seq, &dec)
		if st != frameOK || !bytes.Equal(fr.payload, payload) {
			t.Errorf("payload of %d bytes: decoded %v %q, payload %x", n, st, reason, fr.payload)
		}
	}
}
