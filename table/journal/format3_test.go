package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// v3Options are testOptions writing segments of format 3.
func v3Options(mode SyncMode) Options {
	o := testOptions(mode)
	o.SegmentFormat = 3
	return o
}

const goldenSegmentV3 = "testdata/segment-v3.golden" // seg-0000000000000001.log of format 3, up to its last nonzero byte

// tailRecord is a record replayed by OpenTails: its payload and its tail
// (nil if it has none), copied.
type tailRecord struct {
	payload, tail []byte
}

// tailCollector is a replay function for OpenTails that keeps copies.
type tailCollector struct{ got []tailRecord }

func (c *tailCollector) replay(p, tail []byte) error {
	c.got = append(c.got, tailRecord{bytes.Clone(p), bytes.Clone(tail)})
	return nil
}

// openTails opens the journal in dir with OpenTails or fails the test; the
// journal is closed at the test's end.
func openTails(t testing.TB, dir string, opts Options) (*Journal, []tailRecord, Recovery) {
	t.Helper()
	var c tailCollector
	j, rec, err := OpenTails(dir, opts, c.replay)
	if err != nil {
		t.Fatalf("OpenTails(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j, c.got, rec
}

// checkTailRecords fails unless got equals want, tails included (a nil
// tail, none, differs from any tail).
func checkTailRecords(t testing.TB, got, want []tailRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].payload, want[i].payload) {
			t.Fatalf("record %d: payload %x, want %x", i, got[i].payload, want[i].payload)
		}
		if (got[i].tail == nil) != (want[i].tail == nil) || !bytes.Equal(got[i].tail, want[i].tail) {
			t.Fatalf("record %d: tail %x (nil %v), want %x (nil %v)", i, got[i].tail, got[i].tail == nil, want[i].tail, want[i].tail == nil)
		}
	}
}

// goldenV3 are the records of the golden format-3 segment: a payload, a
// tail of words words (0: none), and what the tail is rewritten to through
// Tail before the Commit (nil: left zero); the last rewrite wins.
var goldenV3 = []struct {
	payload  []byte
	words    int
	rewrites [][]byte
}{
	{[]byte("alpha"), 0, nil},
	{[]byte{}, 1, [][]byte{[]byte("first..."), []byte("tail-one")}},
	{[]byte("x"), 6, [][]byte{bytes.Repeat([]byte("six words "), 5)[:48]}},
	{[]byte{}, 0, nil},
	{[]byte("a payload of 24 bytes..."), 1, nil}, // its tail stays zero
	{bytes.Repeat([]byte{0x5c}, 70), 6, [][]byte{seqBytes(48, 0x10)}},
	{bytes.Repeat([]byte{0xa5}, 8), 0, nil},
	{[]byte("abc"), 1, [][]byte{seqBytes(8, 0x80)}},
	{[]byte("nine byte"), 0, nil},
	{[]byte("four"), 1, [][]byte{seqBytes(8, 0x90)}},
	{[]byte("eight by"), 6, nil},
	{[]byte("eleven byte"), 1, [][]byte{seqBytes(8, 0xa0)}},
	{[]byte("six by"), 1, nil},
	{[]byte("five."), 1, [][]byte{seqBytes(8, 0xb0)}},
	{[]byte("seven.."), 0, nil},
	{[]byte("twelve bytes"), 6, [][]byte{seqBytes(48, 0xc0)}}, // the last: nonzero to the end
}

// seqBytes returns n bytes from v on, counting (wrapping at 256).
func seqBytes(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v + byte(i)
	}
	return b
}

// goldenV3Want are the records a recovery of the golden segment replays.
func goldenV3Want() []tailRecord {
	var want []tailRecord
	for _, g := range goldenV3 {
		r := tailRecord{payload: g.payload}
		if g.words > 0 {
			r.tail = make([]byte, 8*g.words)
			if len(g.rewrites) > 0 {
				r.tail = g.rewrites[len(g.rewrites)-1]
			}
		}
		want = append(want, r)
	}
	return want
}

// refFrame3 is the layout of a format-3 frame at off, computed from the
// specification: where its tail starts (the padding before it is
// tailAt-padding) and where the next frame starts.
func refFrame3(off int64, n, words int) (tailAt, padding, next int64) {
	l := uint64(n+1)*2 + uint64(min(words, 1))
	k := int64(len(binary.AppendUvarint(nil, l)))
	if words == 0 {
		return 0, 0, off + k + 6 + int64(n)
	}
	end := off + k + 6 + 1 + int64(n)
	tailAt = (end + 31) / 32 * 32
	return tailAt, tailAt - end, tailAt + 8*int64(words)
}

// TestGoldenV3: a journal of segment format 3, its salt fixed, writes
// exactly the file in testdata (go test -update rewrites it): plain frames
// back to back as in format 2, tailed frames with their word count, zero
// padding to a multiple of 32 (at least 6 amounts from 0 to 31) and the
// tail as last rewritten through Tail; and that file recovers (OpenTails)
// to every payload and tail.
func TestGoldenV3(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := goldenOptions()
	opts.SegmentFormat = 3
	j, _, _ := mustOpen(t, dir, opts)
	off := int64(headerSize)
	paddings := map[int64]bool{}
	for i, g := range goldenV3 {
		if g.words == 0 {
			if err := j.Append(g.payload); err != nil {
				t.Fatal(err)
			}
		} else {
			e, pos, err := j.AppendTail(g.payload, g.words)
			if err != nil {
				t.Fatal(err)
			}
			tailAt, pad, _ := refFrame3(off, len(g.payload), g.words)
			if int64(pos) != tailAt || e != j.Epoch() {
				t.Fatalf("record %d: tail at %d in epoch %d, want at %d in epoch %d", i, pos, e, tailAt, j.Epoch())
			}
			paddings[pad] = true
			for k, r := range g.rewrites {
				tail := j.Tail(e, pos, g.words)
				if len(tail) != 8*g.words || k == 0 && !allZero(tail) {
					t.Fatalf("record %d: Tail gave %x, want %d zero bytes", i, tail, 8*g.words)
				}
				copy(tail, r)
			}
		}
		_, _, next := refFrame3(off, len(g.payload), g.words)
		if j.off != next {
			t.Fatalf("record %d (%d bytes, tail of %d words) at %d: next frame at %d, want %d", i, len(g.payload), g.words, off, j.off, next)
		}
		off = next
	}
	if err := j.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(paddings) < 6 {
		t.Fatalf("paddings before the tails: %v, want at least 6 amounts", paddings)
	}
	seg, err := os.ReadFile(filepath.Join(dir, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	data := seg[:dataEnd(seg, 0)]
	if int64(len(data)) != off || version(seg) != 3 {
		t.Fatalf("segment data is %d bytes of version %d, want %d of version 3", len(data), version(seg), off)
	}
	if *update {
		if err := os.WriteFile(goldenSegmentV3, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenSegmentV3)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("%s differs:\ngot  %x\nwant %x", goldenSegmentV3, data, want)
	}
	for _, mode := range []int{2, 3} { // whatever the format of new segments
		o := testOptions(SyncNone)
		o.SegmentFormat = mode
		rdir, _ := withSegment(t, append(bytes.Clone(want), make([]byte, MinSegmentSize-len(want))...))
		j, got, rec := openTails(t, rdir, o)
		checkTailRecords(t, got, goldenV3Want())
		if j.Seq() != uint64(len(goldenV3)) || rec.TornTails != 0 || rec.SegmentRecords != len(goldenV3) || j.off != off {
			t.Fatalf("Seq() = %d, Recovery %+v, appending at %d; want %d, no torn tail, at %d", j.Seq(), rec, j.off, len(goldenV3), off)
		}
	}
	// Open (without tails) reads the same payloads.
	rdir, _ := withSegment(t, append(bytes.Clone(want), make([]byte, MinSegmentSize-len(want))...))
	_, got, _ := mustOpen(t, rdir, testOptions(SyncNone))
	var payloads [][]byte
	for _, g := range goldenV3 {
		payloads = append(payloads, g.payload)
	}
	checkRecords(t, got, payloads)
}

// refDecode3 is a reference decoder of format-3 segments, written from the
// specification in doc.go ("Record frame, format 3") independently of
// decodeFrame3: it returns the valid records of a segment image whose
// header (version 3) it trusts, from the sequence number first on. A frame
// is valid at the place due to record N when its length word L is a
// uvarint of at most 5 bytes in its shortest form and at least 2; its
// payload has L/2-1 bytes and it has a tail if L is odd, whose word count W
// (a byte after the checksum) is not 0; the frame (payload, zero padding up
// to a file offset that is a multiple of 32, and W*8 tail bytes, if a tail)
// fits in the image; its tag is N's low 16 bits; and its CRC-32C covers
// salt ‖ N ‖ L as stored ‖ tag ‖ W (if a tail) ‖ payload. A zero first
// byte, or the end of the image, ends the data.
func refDecode3(data []byte, first uint64) []tailRecord {
	table := crc32.MakeTable(crc32.Castagnoli)
	u64le := func(v uint64) []byte {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		return b
	}
	salt := data[24:32]
	var records []tailRecord
	for off, n := 40, first; off < len(data) && data[off] != 0; n++ {
		var l uint64
		k := 0
		for {
			if k == 5 || off+k >= len(data) {
				return records
			}
			c := data[off+k]
			l |= uint64(c&0x7f) << (7 * k)
			k++
			if c < 0x80 {
				break
			}
		}
		if k > 1 && data[off+k-1] == 0 {
			return records // not the shortest form
		}
		if l < 2 {
			return records
		}
		size, tailed := l/2-1, l%2 == 1
		at := off + k + 6 // the payload, or W
		if at > len(data) {
			return records
		}
		w := 0
		if tailed {
			if at >= len(data) || data[at] == 0 {
				return records
			}
			w = int(data[at])
			at++
		}
		if size > uint64(len(data)-at) {
			return records
		}
		end := at + int(size)
		next := end
		if tailed {
			next = end
			for next%32 != 0 {
				next++
			}
			next += 8 * w
			if next > len(data) {
				return records
			}
		}
		if int(data[off+k])|int(data[off+k+1])<<8 != int(n&0xffff) {
			return records
		}
		var in []byte
		in = append(in, salt...)
		in = append(in, u64le(n)...)
		in = append(in, data[off:off+k+2]...)
		if tailed {
			in = append(in, byte(w))
		}
		in = append(in, data[at:end]...)
		c := data[off+k+2 : off+k+6]
		if uint32(c[0])|uint32(c[1])<<8|uint32(c[2])<<16|uint32(c[3])<<24 != crc32.Checksum(in, table) {
			return records
		}
		r := tailRecord{payload: data[at:end]}
		if tailed {
			for _, b := range data[end : next-8*w] {
				if b != 0 {
					return records
				}
			}
			r.tail = data[next-8*w : next]
		}
		records = append(records, r)
		off = next
	}
	return records
}

// FuzzDecode3 feeds arbitrary bytes, after a format-3 segment header, to
// the format-3 frame decoder: it must never panic or read out of bounds,
// must give a reason for every frame it refuses, and must accept exactly
// the records (payloads and tails) the reference decoder accepts, from the
// header's first sequence number on.
func FuzzDecode3(f *testing.F) {
	seg, err := os.ReadFile(goldenSegmentV3)
	if err != nil {
		f.Fatal(err)
	}
	body, salt := seg[headerSize:], le.Uint64(seg[24:])
	f.Add(body, uint64(1), salt)
	f.Add(body, uint64(2), salt) // the tags and checksums of another place
	f.Add(body[:len(body)-3], uint64(1), salt)
	f.Add(body[:24], uint64(1), salt) // the second frame's tail cut
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, uint64(1), uint64(1))
	f.Add([]byte{0x83, 0x00, 1, 0, 0, 0, 0, 0, 1}, uint64(1), uint64(1)) // a length not in its shortest form
	f.Add([]byte{0x01, 1, 0, 0, 0, 0, 0, 1, 0}, uint64(1), uint64(1))    // L = 1
	f.Add([]byte{0x03, 1, 0, 0, 0, 0, 0, 0}, uint64(1), uint64(1))       // a tail of 0 words
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0}, uint64(1), uint64(7))
	f.Add(make([]byte, 64), uint64(1<<16+1), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, first, salt uint64) {
		first = first%(1<<62) + 1
		img := make([]byte, headerSize, headerSize+len(data))
		putHeaderVersion(img, segmentMagic, 3, first, salt)
		img = append(img, data...)
		if _, _, reason := parseHeaderVersion(img, segmentMagic, 3); reason != "" {
			t.Fatalf("the header made: %s", reason)
		}
		want := refDecode3(img, first)
		var got []tailRecord
		var scratch [8]byte
		off := int64(headerSize)
		for seq := first; ; seq++ {
			fr, st, reason := decodeFrame3(img, off, saltCRC(salt), seq, &scratch)
			if st != frameOK {
				if (st == frameBad) != (reason != "") {
					t.Fatalf("offset %d: status %d with reason %q", off, st, reason)
				}
				break
			}
			if fr.next <= off || fr.next > int64(len(img)) || fr.seq != seq {
				t.Fatalf("offset %d: record %d, next frame at %d", off, fr.seq, fr.next)
			}
			if fr.tail != nil && (len(fr.tail)%8 != 0 || len(fr.tail) == 0 || cap(fr.tail) != len(fr.tail)) {
				t.Fatalf("offset %d: a tail of %d bytes (capacity %d)", off, len(fr.tail), cap(fr.tail))
			}
			got = append(got, tailRecord{fr.payload, fr.tail})
			off = fr.next
		}
		checkTailRecords(t, got, want)
	})
}

// TestRefDecode3Golden: the reference decoder reads the golden format-3
// segment to its records and tails, so FuzzDecode3's first seed has records
// to agree on; and decodeFrame3 agrees.
func TestRefDecode3Golden(t *testing.T) {
	t.Parallel()
	seg, err := os.ReadFile(goldenSegmentV3)
	if err != nil {
		t.Fatal(err)
	}
	checkTailRecords(t, refDecode3(seg, 1), goldenV3Want())
	if got := refDecode3(seg, 2); len(got) != 0 {
		t.Errorf("read as from record 2: %d records, want none", len(got))
	}
	var got []tailRecord
	var scratch [8]byte
	for off, seq := int64(headerSize), uint64(1); ; seq++ {
		fr, st, _ := decodeFrame3(seg, off, saltCRC(le.Uint64(seg[24:])), seq, &scratch)
		if st != frameOK {
			break
		}
		got = append(got, tailRecord{fr.payload, fr.tail})
		off = fr.next
	}
	checkTailRecords(t, got, goldenV3Want())
}

// TestPutFrame3Checksum: a frame's checksum is the one the specification
// says (salt ‖ seq ‖ len ‖ tag ‖ W ‖ payload) whether its payload is summed
// in one call with the bytes before it or not (payloads of 0 to 80 bytes,
// tails of 0, 1, 6 and 255 words, at every offset modulo 8), its tail is
// where frame3Size says, and every frame decodes.
func TestPutFrame3Checksum(t *testing.T) {
	t.Parallel()
	const salt = 0x9e3779b9
	var scratch [frame2Scratch]byte
	var dec [8]byte
	for n := range 81 {
		for _, words := range []int{0, 1, 6, 255} {
			for shift := range int64(8) {
				payload := make([]byte, n)
				for i := range payload {
					payload[i] = byte(7*i + n)
				}
				seq := uint64(1)<<40 + uint64(n)
				off := headerSize + shift
				size := frame3Size(off, n, words)
				tailAt, _, next := refFrame3(off, n, words)
				if off+size != next {
					t.Fatalf("payload of %d bytes, tail of %d words at %d: frame3Size %d, want %d", n, words, off, size, next-off)
				}
				img := make([]byte, off+size)
				putFrame3(img[off:], salt, &scratch, seq, payload, words)
				l := uint64(n+1)*2 + uint64(min(words, 1))
				k := int64(uvarintLen(l))
				var head []byte
				head = binary.LittleEndian.AppendUint64(head, seq)
				head = binary.AppendUvarint(head, l)
				head = binary.LittleEndian.AppendUint16(head, uint16(seq))
				if words > 0 {
					head = append(head, byte(words))
				}
				want := crc32.Update(crc32.Update(salt, castagnoli, head), castagnoli, payload)
				if got := binary.LittleEndian.Uint32(img[off+k+2:]); got != want {
					t.Errorf("payload of %d bytes, tail of %d words: checksum %08x, want %08x", n, words, got, want)
				}
				fr, st, reason := decodeFrame3(img, off, salt, seq, &dec)
				if st != frameOK || !bytes.Equal(fr.payload, payload) || fr.next != next {
					t.Fatalf("payload of %d bytes, tail of %d words: decoded %v %q, payload %x, next %d", n, words, st, reason, fr.payload, fr.next)
				}
				if words == 0 && fr.tail != nil || words > 0 && (len(fr.tail) != 8*words || &fr.tail[0] != &img[tailAt] || !allZero(fr.tail)) {
					t.Fatalf("payload of %d bytes, tail of %d words: tail of %d bytes", n, words, len(fr.tail))
				}
			}
		}
	}
}

// TestFrameSizeV3: a 9-byte record without a tail takes 16 bytes in format
// 3, as in format 2; with a tail of 6 words it takes its frame (17 bytes),
// the padding to the next multiple of 32 of the file offset, and 48 bytes:
// 65 to 96 bytes, by the offset, its tail at the multiple of 32.
func TestFrameSizeV3(t *testing.T) {
	t.Parallel()
	j, _, _ := mustOpen(t, t.TempDir(), v3Options(SyncNone))
	p := bytes.Repeat([]byte{7}, 9)
	appendAll(t, j, [][]byte{p, p})
	before := j.Size()
	appendAll(t, j, [][]byte{p})
	if got := j.Size() - before; got != 16 {
		t.Errorf("a 9-byte record takes %d bytes, want 16", got)
	}
	seen := map[int64]bool{}
	for m := range 32 {
		for range m % 8 { // 7 bytes each: offsets of every remainder modulo 8 in turn
			appendAll(t, j, [][]byte{{}})
		}
		off, before := j.off, j.Size()
		_, pos, err := j.AppendTail(p, 6)
		if err != nil {
			t.Fatal(err)
		}
		want := (off+17+31)/32*32 + 48 - off
		if got := j.Size() - before; got != want || int64(pos) != (off+17+31)/32*32 || got < 65 || got > 96 {
			t.Errorf("at offset %d: a 9-byte record with 6 tail words takes %d bytes, its tail at %d; want %d, at %d", off, got, pos, want, (off+17+31)/32*32)
		}
		seen[(off+17)%32] = true
	}
	if len(seen) < 8 {
		t.Errorf("frame ends modulo 32 seen: %v, want at least 8", seen)
	}
}

// TestAppendTailErrors: a tail of no words or more than 255 is
// ErrInvalidOptions; a payload that cannot fit with its tail in a segment
// is ErrTooLarge; both leave nothing written; the largest payload fits
// with every tail; after Close, ErrClosed.
func TestAppendTailErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _, _ := mustOpen(t, dir, v3Options(SyncNone))
	appendAll(t, j, [][]byte{[]byte("first")})
	for _, words := range []int{0, -1, 256, 1 << 20} {
		if _, _, err := j.AppendTail([]byte("x"), words); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("AppendTail with %d words: got %v, want ErrInvalidOptions", words, err)
		}
	}
	var want []tailRecord
	want = append(want, tailRecord{payload: []byte("first")})
	for _, words := range []int{1, 6, 255} {
		// What cannot fit in an empty segment: its frame (a 3-byte length)
		// and tail past MinSegmentSize.
		n := 0
		for alignTail(headerSize+3+7+int64(n))+8*int64(words) <= MinSegmentSize {
			n++
		}
		for _, size := range []int{n, n + 100, MinSegmentSize} {
			seq, off := j.Seq(), j.off
			if _, _, err := j.AppendTail(make([]byte, size), words); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("AppendTail of %d bytes with %d tail words: got %v, want ErrTooLarge", size, words, err)
			}
			if j.Seq() != seq || j.off != off {
				t.Fatalf("a refused AppendTail wrote: Seq %d, offset %d; want %d, %d", j.Seq(), j.off, seq, off)
			}
		}
		// What fits, with some bytes to spare (rolls to a new segment).
		p := bytes.Repeat([]byte{byte(words)}, j.maxPayload-8*words-tailAlign)
		e, pos, err := j.AppendTail(p, words)
		if err != nil {
			t.Fatalf("AppendTail of %d bytes with %d tail words: %v", len(p), words, err)
		}
		tail := j.Tail(e, pos, words)
		if tail == nil {
			t.Fatalf("Tail(%d, %d, %d) = nil", e, pos, words)
		}
		tail[len(tail)-1] = 0xee
		want = append(want, tailRecord{p, tail})
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		want[len(want)-1].tail = bytes.Clone(tail)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.AppendTail([]byte("x"), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendTail after Close: got %v, want ErrClosed", err)
	}
	_, got, rec := openTails(t, dir, v3Options(SyncNone))
	checkTailRecords(t, got, want)
	if rec.TornTails != 0 {
		t.Fatalf("Recovery %+v, want nothing cut", rec)
	}
}

// fillV3 appends plain records of the payloads from i on to j until the
// next would roll, commits, and returns them and the next i.
func fillV3(t *testing.T, j *Journal, i int) ([][]byte, int) {
	t.Helper()
	var got [][]byte
	for ; ; i++ {
		p := testPayload(i)
		if j.off+j.cur.frameSize(j.off, len(p), 0) > int64(len(j.cur.m)) {
			break
		}
		if err := j.Append(p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if err := j.Commit(); err != nil {
		t.Fatal(err)
	}
	return got, i
}

// TestTailRewrite: a tail rewritten through Tail and committed is what the
// replay gets, from the files as a process killed at once leaves them (the
// page cache) and after Close; Tail gives nil for a tail it cannot give any
// more (after a roll, StartSnapshot's too, or Close) or never gave (another
// epoch, a position or word count out of bounds); the epoch grows by one
// at every roll. Snapshot records have no tail.
func TestTailRewrite(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := v3Options(mode)
			j, _, _ := mustOpen(t, dir, opts)
			var want []tailRecord
			e, pos, err := j.AppendTail([]byte("rec-1"), 2)
			if err != nil {
				t.Fatal(err)
			}
			if e != j.Epoch() || pos%tailAlign != 0 || pos < headerSize || int64(pos)+16 != j.off {
				t.Fatalf("AppendTail: epoch %d, pos %d, written up to %d; want epoch %d, an aligned pos 16 bytes before the end", e, pos, j.off, j.Epoch())
			}
			tail := j.Tail(e, pos, 2)
			if len(tail) != 16 || cap(tail) != 16 || !allZero(tail) {
				t.Fatalf("Tail: %x (capacity %d), want 16 zero bytes", tail, cap(tail))
			}
			want = append(want, tailRecord{[]byte("rec-1"), nil})
			for i := range 5 {
				p := fmt.Appendf(nil, "plain %d", i)
				if err := j.Append(p); err != nil {
					t.Fatal(err)
				}
				want = append(want, tailRecord{p, nil})
			}
			e2, pos2, err := j.AppendTail([]byte("rec-7"), 1)
			if err != nil {
				t.Fatal(err)
			}
			le.PutUint64(j.Tail(e2, pos2, 1), 0x0102030405060708)
			want = append(want, tailRecord{[]byte("rec-7"), le.AppendUint64(nil, 0x0102030405060708)})
			for v := uint64(1); v <= 3; v++ {
				tail := j.Tail(e, pos, 2)
				le.PutUint64(tail, v)
				le.PutUint64(tail[8:], v<<32|0xff)
				if err := j.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			want[0].tail = le.AppendUint64(le.AppendUint64(nil, 3), 3<<32|0xff)
			// Killed: the files as the page cache holds them.
			_, got, rec := openTails(t, copyDir(t, dir), opts)
			checkTailRecords(t, got, want)
			if rec.TornTails != 0 {
				t.Fatalf("Recovery %+v, want nothing cut", rec)
			}

			// Tail refuses what it never gave.
			end := uint32(alignTail(j.off))
			for _, c := range []struct {
				name  string
				epoch uint64
				pos   uint32
				words int
			}{
				{"the epoch before", e - 1, pos, 2},
				{"the next epoch", e + 1, pos, 2},
				{"pos 0", e, 0, 1},
				{"pos in the header", e, 32, 1},
				{"pos not a multiple of 8", e, pos + 4, 1},
				{"pos not a multiple of 8, within a tail", e, pos + 1, 1},
				{"pos a multiple of 8, not of 32", e, pos + 8, 1},
				{"no words", e, pos, 0},
				{"negative words", e, pos, -1},
				{"beyond the end", e, pos2, 2},
				{"pos at the end", e, end, 1},
				{"pos past the end", e, end + 8, 1},
				{"pos far past the end", e, 1 << 31, 1},
				{"pos past the segment", e, MinSegmentSize, 1},
			} {
				if b := j.Tail(c.epoch, c.pos, c.words); b != nil {
					t.Errorf("Tail(%d, %d, %d) (%s) = %d bytes, want nil", c.epoch, c.pos, c.words, c.name, len(b))
				}
			}

			// A roll ends the epoch: the tails before it are no longer given.
			var i int
			var ps [][]byte
			ps, i = fillV3(t, j, 100)
			for _, p := range ps {
				want = append(want, tailRecord{p, nil})
			}
			if j.Tail(e, pos, 2) == nil {
				t.Fatal("Tail of the full segment's record, before the roll: nil")
			}
			first := j.cur.first
			p := testPayload(i) // it does not fit
			i++
			e3, pos3, err := j.AppendTail(p, 3)
			if err != nil {
				t.Fatal(err)
			}
			if j.cur.first == first || e3 != e+1 || j.Epoch() != e+1 || pos3 == 0 {
				t.Fatalf("after a roll: segment %d (was %d), epoch %d and %d, pos %d; want a new segment, epoch %d, a tail", j.cur.first, first, e3, j.Epoch(), pos3, e+1)
			}
			if j.Tail(e, pos, 2) != nil || j.Tail(e2, pos2, 1) != nil {
				t.Fatal("Tail of a record of the full segment, after the roll: not nil")
			}
			copy(j.Tail(e3, pos3, 3), "rolled tail of 3 words 24")
			want = append(want, tailRecord{p, []byte("rolled tail of 3 words 2")})
			for roll := 2; roll <= 4; roll++ {
				ps, i = fillV3(t, j, i)
				for _, p := range ps {
					want = append(want, tailRecord{p, nil})
				}
				p := testPayload(i)
				i++
				if err := j.Append(p); err != nil {
					t.Fatal(err)
				}
				want = append(want, tailRecord{p, nil})
				if j.Epoch() != e+uint64(roll) {
					t.Fatalf("roll %d: epoch %d, want %d", roll, j.Epoch(), e+uint64(roll))
				}
			}
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}

			// StartSnapshot rolls too.
			e4, pos4, err := j.AppendTail([]byte("before the snapshot"), 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			w, err := j.StartSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			if j.Epoch() != e4+1 || j.Tail(e4, pos4, 1) != nil {
				t.Fatalf("after StartSnapshot: epoch %d (want %d), the tail before it given", j.Epoch(), e4+1)
			}
			state := [][]byte{[]byte("state-1"), []byte("state-2")}
			for _, p := range state {
				if err := w.Append(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			e5, pos5, err := j.AppendTail([]byte("after the snapshot"), 1)
			if err != nil {
				t.Fatal(err)
			}
			if e5 != e4+1 {
				t.Fatalf("the first record after StartSnapshot: epoch %d, want %d", e5, e4+1)
			}
			copy(j.Tail(e5, pos5, 1), "last one")
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			want = []tailRecord{{state[0], nil}, {state[1], nil}, {[]byte("after the snapshot"), []byte("last one")}}
			_, got, _ = openTails(t, copyDir(t, dir), opts)
			checkTailRecords(t, got, want)

			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if j.Tail(e5, pos5, 1) != nil {
				t.Fatal("Tail after Close: not nil")
			}
			j2, got, rec := openTails(t, dir, opts)
			checkTailRecords(t, got, want)
			if rec.TornTails != 0 || rec.Snapshot == "" {
				t.Fatalf("Recovery %+v: want the snapshot and nothing cut", rec)
			}
			// The reopened journal starts a new count, and appends with
			// tails to its recovered last segment.
			e6, pos6, err := j2.AppendTail([]byte("reopened"), 1)
			if err != nil || e6 != j2.Epoch() || pos6 == 0 || j2.Tail(e6, pos6, 1) == nil {
				t.Fatalf("AppendTail after Open: %d, %d, %v", e6, pos6, err)
			}
		})
	}
}

// TestTailBadWords: Tail refuses a word count above 255, which no tail
// has, like one below 1: it gives nil, and never panics (8*words
// overflowing).
func TestTailBadWords(t *testing.T) {
	t.Parallel()
	j, _, _ := mustOpen(t, t.TempDir(), v3Options(SyncNone))
	e, pos, err := j.AppendTail([]byte("x"), 1)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, testPayloads(1, 20)) // more than 256 words written after pos
	for _, words := range []int{maxTailWords + 1, 1 << 61, 1<<60 + 1, -1 << 62} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Tail(%d, %d, %d) panicked: %v", e, pos, words, r)
				}
			}()
			if b := j.Tail(e, pos, words); b != nil {
				t.Errorf("Tail(%d, %d, %d) = %d bytes, want nil", e, pos, words, len(b))
			}
		}()
	}
}

// msyncLog records the msyncs of a journal: the range of each, in
// offsets of its segment, and the segment (by the address of its last
// byte).
type msyncLog struct {
	mu   sync.Mutex
	segs []msynced
}

type msynced struct {
	last       *byte // the segment's last byte
	start, end int64
}

func (l *msyncLog) hooks() *testHooks {
	return &testHooks{msync: func(b []byte) error {
		if cap(b) == 0 {
			return nil
		}
		full := b[:cap(b)] // up to the end of the mapping
		start := MinSegmentSize - int64(cap(b))
		l.mu.Lock()
		l.segs = append(l.segs, msynced{&full[len(full)-1], start, start + int64(len(b))})
		l.mu.Unlock()
		return nil
	}}
}

// take returns the msyncs of the segment mapped at m since the last take,
// and forgets every msync.
func (l *msyncLog) take(m []byte) [][2]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got [][2]int64
	for _, s := range l.segs {
		if s.last == &m[len(m)-1] {
			got = append(got, [2]int64{s.start, s.end})
		}
	}
	l.segs = nil
	return got
}

// count returns the number of msyncs since the last take.
func (l *msyncLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.segs)
}

// covers reports whether one of the ranges covers [from, to).
func covers(ranges [][2]int64, from, to int64) bool {
	for _, r := range ranges {
		if r[0] <= from && r[1] >= to {
			return true
		}
	}
	return false
}

// TestTailRewriteSynced: a tail rewritten on a page before the end of the
// records is msynced like a record: by the background pass after the
// Commit that ends its batch (SyncInterval; not before the Commit), by
// that Commit (SyncAlways), by Sync (every mode), by Close; from its page.
// A pass or Commit after no rewrite and no record msyncs nothing.
func TestTailRewriteSynced(t *testing.T) {
	t.Parallel()
	page := int64(os.Getpagesize())
	// setUp opens a journal with a tailed record on the first page and
	// records after it up to the fourth page, all msynced.
	setUp := func(t *testing.T, mode SyncMode) (*Journal, *msyncLog, uint64, uint32, string) {
		var log msyncLog
		dir := t.TempDir()
		opts := v3Options(mode)
		opts.SyncInterval = time.Hour // passes only when the test asks
		opts.hooks = log.hooks()
		j, _, _ := mustOpen(t, dir, opts)
		e, pos, err := j.AppendTail([]byte("counter"), 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; j.off < 3*page+100; i++ {
			if err := j.Append(bytes.Repeat([]byte{byte(i) | 1}, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(j.cur.m); !covers(got, 0, j.off) {
			t.Fatalf("the first Sync msynced %v, want [0, %d) covered", got, j.off)
		}
		if int64(pos)/page == (j.off-1)/page {
			t.Fatalf("the tail at %d is on the last page (written up to %d)", pos, j.off)
		}
		return j, &log, e, pos, dir
	}
	rewrite := func(t *testing.T, j *Journal, e uint64, pos uint32, v uint64) {
		t.Helper()
		tail := j.Tail(e, pos, 1)
		if tail == nil {
			t.Fatalf("Tail(%d, %d, 1) = nil", e, pos)
		}
		le.PutUint64(tail, v)
	}
	pageOf := func(pos uint32) int64 { return int64(pos) &^ (page - 1) }
	reopenTail := func(t *testing.T, dir string, v uint64) {
		t.Helper()
		_, got, _ := openTails(t, copyDir(t, dir), v3Options(SyncNone))
		if len(got) == 0 || !bytes.Equal(got[0].tail, le.AppendUint64(nil, v)) {
			t.Fatalf("the first record's tail recovered: %x, want %x", got[0].tail, v)
		}
	}

	t.Run("interval", func(t *testing.T) {
		t.Parallel()
		j, log, e, pos, dir := setUp(t, SyncInterval)
		j.syncPassForTest()
		if err := j.Commit(); err != nil { // nothing new
			t.Fatal(err)
		}
		j.syncPassForTest()
		// Every msync of a segment with a tail starts at its first tail's
		// page, rewritten or not: an msync writes the pages dirty since
		// the last one, not the range.
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), j.off) {
			t.Fatalf("passes after no change msynced %v, want [%d, %d) covered", got, pageOf(pos), j.off)
		}
		rewrite(t, j, e, pos, 1)
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		j.syncPassForTest()
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), int64(pos)+8) {
			t.Fatalf("the pass after the rewrite's Commit msynced %v, want [%d, %d) covered", got, pageOf(pos), pos+8)
		}
		j.syncPassForTest()
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), j.off) {
			t.Fatalf("a second pass msynced %v, want [%d, %d) covered", got, pageOf(pos), j.off)
		}
		// A rewrite in a batch of records too.
		rewrite(t, j, e, pos, 2)
		appendAll(t, j, [][]byte{[]byte("more")})
		j.syncPassForTest()
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), j.off) {
			t.Fatalf("the pass after a batch with a rewrite msynced %v, want [%d, %d) covered", got, pageOf(pos), j.off)
		}
		// Two rewrites, two Commits, one pass: the lower one counts.
		rewrite(t, j, e, pos, 3)
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		e2, pos2, err := j.AppendTail([]byte("later"), 1)
		if err != nil {
			t.Fatal(err)
		}
		rewrite(t, j, e2, pos2, 4)
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		j.syncPassForTest()
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), j.off) {
			t.Fatalf("the pass after two Commits msynced %v, want [%d, %d) covered", got, pageOf(pos), j.off)
		}
		reopenTail(t, dir, 3)
		// Sync, and Close, take a rewrite not committed.
		rewrite(t, j, e, pos, 5)
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), int64(pos)+8) {
			t.Fatalf("Sync after a rewrite msynced %v, want [%d, %d) covered", got, pageOf(pos), pos+8)
		}
		rewrite(t, j, e, pos, 6)
		m := j.cur.m
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(m); !covers(got, pageOf(pos), int64(pos)+8) {
			t.Fatalf("Close after a rewrite msynced %v, want [%d, %d) covered", got, pageOf(pos), pos+8)
		}
		reopenTail(t, dir, 6)
	})

	t.Run("always", func(t *testing.T) {
		t.Parallel()
		j, log, e, pos, dir := setUp(t, SyncAlways)
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), j.off) {
			t.Fatalf("a Commit after no change msynced %v, want [%d, %d) covered (the segment has a tail)", got, pageOf(pos), j.off)
		}
		rewrite(t, j, e, pos, 7)
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), int64(pos)+8) {
			t.Fatalf("the Commit after a rewrite msynced %v, want [%d, %d) covered", got, pageOf(pos), pos+8)
		}
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), j.off) {
			t.Fatalf("a second Commit msynced %v, want [%d, %d) covered", got, pageOf(pos), j.off)
		}
		reopenTail(t, dir, 7)
	})

	t.Run("none", func(t *testing.T) {
		t.Parallel()
		j, log, e, pos, dir := setUp(t, SyncNone)
		rewrite(t, j, e, pos, 8)
		if err := j.Commit(); err != nil {
			t.Fatal(err)
		}
		if n := log.count(); n != 0 {
			t.Fatalf("a Commit with SyncNone: %d msyncs, want none", n)
		}
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), int64(pos)+8) {
			t.Fatalf("Sync after a rewrite msynced %v, want [%d, %d) covered", got, pageOf(pos), pos+8)
		}
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := log.take(j.cur.m); !covers(got, pageOf(pos), j.off) {
			t.Fatalf("a second Sync msynced %v, want [%d, %d) covered", got, pageOf(pos), j.off)
		}
		reopenTail(t, dir, 8)
	})

	// A roll msyncs the full segment from its tails rewritten since its
	// last msync: in the roll (without RollAhead), in the pass after it
	// (RollAhead, SyncInterval) or in the Commit after it (RollAhead,
	// SyncAlways); whether the rewrite's batch was committed before the
	// roll or not.
	for _, ahead := range []bool{false, true} {
		for _, mode := range []SyncMode{SyncInterval, SyncAlways} {
			for _, committed := range []bool{false, true} {
				t.Run(fmt.Sprintf("roll ahead %v %v committed %v", ahead, mode, committed), func(t *testing.T) {
					t.Parallel()
					var log msyncLog
					dir := t.TempDir()
					opts := v3Options(mode)
					opts.SyncInterval = time.Hour
					opts.RollAhead = ahead
					opts.hooks = log.hooks()
					j, _, _ := mustOpen(t, dir, opts)
					e, pos, err := j.AppendTail([]byte("counter"), 1)
					if err != nil {
						t.Fatal(err)
					}
					passIf(j, ahead || mode == SyncInterval) // RollAhead: the next segment made
					_, i := fillV3(t, j, 1)
					if err := j.Sync(); err != nil {
						t.Fatal(err)
					}
					old := j.cur.m
					if got := log.take(old); !covers(got, 0, j.off) {
						t.Fatalf("Sync msynced %v, want [0, %d)", got, j.off)
					}
					rewrite(t, j, e, pos, 9)
					if committed {
						if err := j.Commit(); err != nil {
							t.Fatal(err)
						}
					}
					if err := j.Append(testPayload(i)); err != nil { // rolls
						t.Fatal(err)
					}
					if &j.cur.m[0] == &old[0] || j.Epoch() != e+1 {
						t.Fatal("the Append did not roll")
					}
					if err := j.Commit(); err != nil {
						t.Fatal(err)
					}
					passIf(j, ahead || mode == SyncInterval)
					if got := log.take(old); !covers(got, pageOf(pos), int64(pos)+8) {
						t.Fatalf("the full segment's msyncs: %v, want [%d, %d) covered", got, pageOf(pos), pos+8)
					}
					reopenTail(t, dir, 9)
				})
			}
		}
	}
}

// passIf runs a background pass of j if do (j has a background
// goroutine).
func passIf(j *Journal, do bool) {
	if do {
		j.syncPassForTest()
	}
}

// TestFormatsMixV3: a journal of format 2 reopened to write format 3
// appends records without tails (pos 0, Tail nil) to its last segment,
// then rolls to segments of format 3 where records have tails; and a
// journal of format 3 reopened to write format 2 appends tails to its last
// segment, none after the roll. Everything recovers, reopened either way.
func TestFormatsMixV3(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ from, to int }{{2, 3}, {3, 2}, {1, 3}} {
		t.Run(fmt.Sprintf("%d to %d", c.from, c.to), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var want []tailRecord
			first := testPayloads(1, 20)
			for _, p := range first {
				want = append(want, tailRecord{p, nil})
			}
			o := testOptions(SyncNone)
			o.SegmentFormat = c.from
			j, _, _ := mustOpen(t, dir, o)
			for i, p := range first {
				if i%2 == 0 || c.from < 3 {
					if err := j.Append(p); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if _, _, err := j.AppendTail(p, 1); err != nil {
					t.Fatal(err)
				}
				want[i].tail = make([]byte, 8)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			o.SegmentFormat = c.to
			j, got, _ := openTails(t, dir, o)
			checkTailRecords(t, got, want)
			rolls := 0
			for i := 100; rolls < 3; i++ {
				p := testPayload(i)
				seg, ver := j.cur.first, j.cur.ver
				e, pos, err := j.AppendTail(p, 2)
				if err != nil {
					t.Fatal(err)
				}
				r := tailRecord{p, nil}
				rolled := j.cur.first != seg
				if rolled {
					rolls++
					ver = j.cur.ver
				}
				// The record that rolls from an older format:
				// TestAppendTailRollFromV2.
				if !(rolled && pos == 0) && (pos != 0) != (ver == 3) {
					t.Fatalf("record %d in a segment of format %d: tail at %d", len(want), ver, pos)
				}
				if pos != 0 {
					tail := j.Tail(e, pos, 2)
					le.PutUint64(tail[8:], uint64(i))
					r.tail = bytes.Clone(tail)
				} else if j.Tail(e, pos, 2) != nil || j.Tail(e, pos, 1) != nil {
					t.Fatalf("record %d without a tail: Tail not nil", len(want))
				}
				want = append(want, r)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			segs := segmentFiles(t, dir)
			for i, name := range segs {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if v, w := version(b), uint32(c.from); i > 0 && v != uint32(c.to) || i == 0 && v != w {
					t.Fatalf("segment %d (%s) has version %d", i, name, v)
				}
			}
			for _, f := range []int{2, 3} {
				o.SegmentFormat = f
				_, got, rec := openTails(t, dir, o)
				checkTailRecords(t, got, want)
				if rec.TornTails != 0 || rec.Segments != len(segs) {
					t.Fatalf("Recovery %+v: want %d segments and nothing cut", rec, len(segs))
				}
			}
		})
	}
}

// TestAppendTailRollFromV2: the AppendTail that rolls from a last segment
// of format 2 to a new one of format 3 puts its record in the new segment:
// with a tail, like every record appended there.
func TestAppendTailRollFromV2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeJournal(t, dir, v2Options(SyncNone), testPayloads(1, 20))
	j, _, _ := mustOpen(t, dir, v3Options(SyncNone))
	for i := 100; ; i++ {
		seg := j.cur.first
		_, pos, err := j.AppendTail(testPayload(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		if j.cur.first != seg {
			if j.cur.ver != 3 || pos == 0 {
				t.Fatalf("the AppendTail that rolled to a segment of format %d: tail at %d, want a tail", j.cur.ver, pos)
			}
			return
		}
	}
}

// oneSegmentV3 writes n records, odd ones with a tail of (i%3)+1 words
// rewritten to nonzero bytes, into one segment of format 3, and returns
// the records, the segment's bytes, the offsets of its frames and the
// frames.
func oneSegmentV3(t *testing.T, n int) ([]tailRecord, []byte, []int64, []frame) {
	t.Helper()
	src := t.TempDir()
	j, _, _ := mustOpen(t, src, v3Options(SyncNone))
	var want []tailRecord
	for i, p := range testPayloads(1, n) {
		if len(p) > 200 {
			p = p[:i+1] // small, so the segment holds them all
		}
		if i%2 == 0 {
			if err := j.Append(p); err != nil {
				t.Fatal(err)
			}
			want = append(want, tailRecord{p, nil})
			continue
		}
		e, pos, err := j.AppendTail(p, i%3+1)
		if err != nil {
			t.Fatal(err)
		}
		tail := j.Tail(e, pos, i%3+1)
		for k := range tail {
			tail[k] = byte(0x40 + i + k)
		}
		want = append(want, tailRecord{p, bytes.Clone(tail)})
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(src, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	salt := saltCRC(le.Uint64(img[24:]))
	var offs []int64
	var frs []frame
	var scratch [8]byte
	for off, seq := int64(headerSize), uint64(1); ; seq++ {
		fr, st, _ := decodeFrame3(img, off, salt, seq, &scratch)
		if st != frameOK {
			break
		}
		offs = append(offs, off)
		frs = append(frs, fr)
		off = fr.next
	}
	if len(offs) != n {
		t.Fatalf("the segment holds %d frames, want %d", len(offs), n)
	}
	return want, img, offs, frs
}

// TestFlipEveryByteV3 is TestFlipEveryByteV2 for format 3: each byte of a
// small segment flipped in turn. A byte of a tail is not damage: the
// journal recovers every record, the replay gets the flipped byte. Any
// other byte of a frame (its word count and the padding before its tail
// included) is damage: ErrCorrupt at the damaged frame when a valid record
// follows (offset 0 for the header), else a torn tail keeping every record
// before it.
func TestFlipEveryByteV3(t *testing.T) {
	t.Parallel()
	want, orig, offs, frs := oneSegmentV3(t, 8)
	end := frs[len(frs)-1].next
	tailOf := func(i int64) int { // the record whose tail holds byte i, or -1
		for k, fr := range frs {
			if fr.tail != nil && i >= fr.next-int64(len(fr.tail)) && i < fr.next {
				return k
			}
		}
		return -1
	}
	for i := range end + 16 {
		img := bytes.Clone(orig)
		img[i] ^= 0xff
		dir, path := withSegment(t, img)
		var c tailCollector
		j, rec, err := OpenTails(dir, testOptions(SyncNone), c.replay)
		if err == nil {
			_ = j.Close()
		}
		if k := tailOf(i); k >= 0 {
			w := slices.Clone(want)
			w[k].tail = bytes.Clone(w[k].tail)
			w[k].tail[i-(frs[k].next-int64(len(frs[k].tail)))] ^= 0xff
			if err != nil || rec.TornTails != 0 {
				t.Fatalf("byte %d (tail of record %d): %+v, %v; want nothing cut", i, k, rec, err)
			}
			checkTailRecords(t, c.got, w)
		} else if n := flipOutcome(t, i, path, offs, end, len(want), rec, err); n >= 0 {
			checkTailRecords(t, c.got, want[:n])
		}
	}
}

// TestTailDamage names the cases of TestFlipEveryByteV3 that are new in
// format 3: a flipped tail byte is replayed as it is; a flipped word count,
// a nonzero byte in the padding before a tail, or a flipped tail bit of the
// length is damage: ErrCorrupt (no torn tail) in a frame before the last,
// a torn tail in the last.
func TestTailDamage(t *testing.T) {
	t.Parallel()
	want, orig, offs, frs := oneSegmentV3(t, 16)
	layout := func(k int) (word, tailAt, pad int64) {
		words := len(frs[k].tail) / 8
		tailAt, pad, _ = refFrame3(offs[k], len(want[k].payload), words)
		l := uint64(len(want[k].payload)+1)*2 + 1
		return offs[k] + int64(len(binary.AppendUvarint(nil, l))) + 6, tailAt, pad
	}
	// The journal is cut after the last record with padding before its
	// tail, n records; first is the first such record.
	n, first := 0, -1
	for k := range frs {
		if frs[k].tail == nil {
			continue
		}
		if _, _, pad := layout(k); pad > 0 {
			n = k + 1
			if first < 0 {
				first = k
			}
		}
	}
	if first < 0 || first >= n-1 || n < 9 {
		t.Fatalf("records with padding before their tail: the first %d, the last %d; want two, the last after the eighth", first, n-1)
	}
	for _, c := range []struct {
		name string
		k    int
		do   func(b []byte, k int)
	}{
		{"tail byte", 1, func(b []byte, k int) { b[frs[k].next-1] ^= 0x01 }},
		{"tail byte of the last record", n - 1, func(b []byte, k int) { _, at, _ := layout(k); b[at] ^= 0x80 }},
		{"word count", 3, func(b []byte, k int) { w, _, _ := layout(k); b[w] ^= 0x03 }},
		{"word count of the last record", n - 1, func(b []byte, k int) { w, _, _ := layout(k); b[w] ^= 0x02 }},
		{"word count zero", 5, func(b []byte, k int) { w, _, _ := layout(k); b[w] = 0 }},
		{"padding", first, func(b []byte, k int) { _, at, _ := layout(k); b[at-1] = 1 }},
		{"padding of the last record", n - 1, func(b []byte, k int) { _, at, _ := layout(k); b[at-1] = 0x80 }},
		{"tail bit cleared", 7, func(b []byte, k int) { b[offs[k]] &^= 1 }},
		{"tail bit set", 6, func(b []byte, k int) { b[offs[k]] |= 1 }},
		{"tail bit cleared in the last record", n - 1, func(b []byte, k int) { b[offs[k]] &^= 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			img := bytes.Clone(orig)
			clear(img[frs[n-1].next:])
			c.do(img, c.k)
			dir, path := withSegment(t, img)
			var col tailCollector
			j, rec, err := OpenTails(dir, testOptions(SyncNone), col.replay)
			if err == nil {
				defer j.Close()
			}
			w := want[:n]
			switch {
			case strings.HasPrefix(c.name, "tail byte"):
				if err != nil || rec.TornTails != 0 {
					t.Fatalf("%+v, %v; want nothing cut", rec, err)
				}
				w = slices.Clone(w)
				w[c.k].tail = bytes.Clone(img[frs[c.k].next-int64(len(frs[c.k].tail)) : frs[c.k].next])
				if bytes.Equal(w[c.k].tail, want[c.k].tail) {
					t.Fatal("the tail is unchanged")
				}
				checkTailRecords(t, col.got, w)
			case c.k == n-1:
				if err != nil || rec.TornTails != 1 || rec.Repaired {
					t.Fatalf("%+v, %v; want a torn tail", rec, err)
				}
				checkTailRecords(t, col.got, w[:n-1])
			default:
				if ce, ok := isCorrupt(err); !ok || ce.Path != path || ce.Offset != offs[c.k] {
					t.Fatalf("got %v, want ErrCorrupt at %s offset %d", err, path, offs[c.k])
				}
			}
		})
	}
}

// TestDamageBeforeALargeFrameV3: a byte flipped in the record before a
// large last record (a payload of more than half the bytes left in the
// segment) is followed by a valid record: ErrCorrupt, as in format 2, not
// a torn tail that drops the large record.
func TestDamageBeforeALargeFrameV3(t *testing.T) {
	t.Parallel()
	for _, f := range []int{2, 3} {
		t.Run(fmt.Sprintf("format %d", f), func(t *testing.T) {
			t.Parallel()
			src := t.TempDir()
			o := testOptions(SyncNone)
			o.SegmentFormat = f
			want := [][]byte{[]byte("one"), []byte("two"), bytes.Repeat([]byte{0x77}, 40000)}
			writeJournal(t, src, o, want)
			img, err := os.ReadFile(filepath.Join(src, segmentName(1)))
			if err != nil {
				t.Fatal(err)
			}
			second := int64(headerSize) + int64(1+6+3) // after "one" (the same size in both formats)
			img[second+int64(1+6)] ^= 0xff             // the payload of "two"
			dir, path := withSegment(t, img)
			_, got, rec, err := openCollect(t, dir, testOptions(SyncNone))
			if ce, ok := isCorrupt(err); !ok || ce.Path != path || ce.Offset != second {
				t.Fatalf("got %v (%d records, %+v), want ErrCorrupt at %s offset %d", err, len(got), rec, path, second)
			}
		})
	}
}

// TestAppendTailDoesNotAllocate: an AppendTail that does not roll, and a
// Tail, allocate nothing.
func TestAppendTailDoesNotAllocate(t *testing.T) { // not parallel: AllocsPerRun refuses
	j, _, _ := mustOpen(t, t.TempDir(), v3Options(SyncNone))
	p := []byte("\x20\x05\x01\x02\x00")
	appendAll(t, j, [][]byte{p})
	if n := testing.AllocsPerRun(500, func() {
		e, pos, _ := j.AppendTail(p, 1)
		j.Tail(e, pos, 1)[0]++
	}); n != 0 {
		t.Fatalf("AppendTail and Tail: %v allocations, want 0", n)
	}
}

// TestFrameAtTheEndOfTheFileV3: a nonzero byte where a frame would start,
// with fewer bytes left in the file than a frame's fixed part (len, tag,
// crc: 7), is damage (a torn tail here), never a panic: Open keeps every
// record before it.
func TestFrameAtTheEndOfTheFileV3(t *testing.T) {
	t.Parallel()
	for _, left := range []int64{1, 2, 6} {
		t.Run(fmt.Sprintf("%d bytes left", left), func(t *testing.T) {
			t.Parallel()
			src := t.TempDir()
			j, _, _ := mustOpen(t, src, v3Options(SyncNone))
			var want [][]byte
			for i := 0; j.cur == nil || int64(len(j.cur.m))-j.off > 300; i++ {
				p := bytes.Repeat([]byte{byte(i) | 1}, 100)
				if err := j.Append(p); err != nil {
					t.Fatal(err)
				}
				want = append(want, p)
			}
			// The last record ends left bytes before the end of the file.
			r := int64(len(j.cur.m)) - j.off - left
			n := r - 2 - 6 // a 2-byte length
			if uvarintLen(uint64(n+1)*2) != 2 {
				t.Fatalf("a payload of %d bytes", n)
			}
			p := bytes.Repeat([]byte{0x42}, int(n))
			if err := j.Append(p); err != nil {
				t.Fatal(err)
			}
			want = append(want, p)
			if j.off != int64(len(j.cur.m))-left {
				t.Fatalf("written up to %d, want %d", j.off, int64(len(j.cur.m))-left)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			img, err := os.ReadFile(filepath.Join(src, segmentName(1)))
			if err != nil {
				t.Fatal(err)
			}
			img[len(img)-int(left)] = 0x30 // a length word of 48: a frame of 23 bytes without a tail
			dir, _ := withSegment(t, img)
			var got [][]byte
			var rec Recovery
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Open panicked: %v", r)
					}
				}()
				_, got, rec, err = openCollect(t, dir, testOptions(SyncNone))
			}()
			if err != nil || rec.TornTails != 1 {
				t.Fatalf("Open: %+v, %v; want a torn tail", rec, err)
			}
			checkRecords(t, got, want)
		})
	}
}
