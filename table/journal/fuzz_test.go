package journal

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// refDecode is a reference decoder written from the format specification in
// doc.go, independently of decodeFrame: it returns the valid records of a
// segment (magic segmentMagic) or snapshot (snapshotMagic) image, the
// header's sequence number, whether the header is valid, and for a
// snapshot whether its trailer is.
func refDecode(data []byte, magic string) (records [][]byte, seq uint64, headerOK, trailerOK bool) {
	u32 := func(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 }
	u64 := func(b []byte) uint64 { return uint64(u32(b)) | uint64(u32(b[4:]))<<32 }
	crc := func(parts ...[]byte) uint32 {
		return crc32.Checksum(bytes.Join(parts, nil), crc32.MakeTable(crc32.Castagnoli))
	}
	if len(data) < 40 || string(data[:8]) != magic || u32(data[8:]) != 1 || u32(data[12:]) != 40 ||
		u32(data[32:]) != 0 || crc(data[:36]) != u32(data[36:]) {
		return nil, 0, false, false
	}
	seq, salt := u64(data[16:]), data[24:32]
	if seq > 1<<62 {
		return nil, 0, false, false
	}
	want := seq
	if magic == snapshotMagic {
		want = 1
	}
	for off := 40; off+16 <= len(data); {
		n := int(u32(data[off:]))
		padded := (n + 7) / 8 * 8
		if n < 16 || off+padded > len(data) || crc(salt, data[off:off+4], data[off+8:off+n]) != u32(data[off+4:]) ||
			!bytes.Equal(data[off+n:off+padded], make([]byte, padded-n)) {
			break
		}
		s, payload := u64(data[off+8:]), data[off+16:off+n]
		if magic == snapshotMagic && s == math.MaxUint64 {
			trailerOK = len(payload) == 16 && u64(payload) == uint64(len(records)) &&
				u32(payload[8:]) == crc(data[:off]) && u32(payload[12:]) == 0 && off+padded == len(data)
			break
		}
		if s != want {
			break
		}
		records = append(records, payload)
		want++
		off += padded
	}
	return records, seq, true, trailerOK
}

// refValidAfterDamage is the rule of doc.go that tells a torn tail from
// mid-journal damage in the only segment image data, named nameSeq,
// written from the specification independently of recover.go: it reports
// whether a valid frame, with a sequence number that fits its place,
// follows the point where the valid records end (or the header, if the
// segment is unusable as a whole).
func refValidAfterDamage(data []byte, nameSeq uint64) bool {
	if len(data) < 40 {
		return false
	}
	u32 := func(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 }
	u64 := func(b []byte) uint64 { return uint64(u32(b)) | uint64(u32(b[4:]))<<32 }
	crc := func(parts ...[]byte) uint32 {
		return crc32.Checksum(bytes.Join(parts, nil), crc32.MakeTable(crc32.Castagnoli))
	}
	records, seq, headerOK, _ := refDecode(data, segmentMagic)
	from, next := 40, nameSeq
	if headerOK && seq == nameSeq && seq != 0 && len(data) >= 56 {
		for _, r := range records {
			from += (16 + len(r) + 7) / 8 * 8
		}
		next += uint64(len(records))
	}
	salt := data[24:32]
	for p := from; p+16 <= len(data); p += 8 {
		n := int(u32(data[p:]))
		padded := (n + 7) / 8 * 8
		if n < 16 || p+padded > len(data) || crc(salt, data[p:p+4], data[p+8:p+n]) != u32(data[p+4:]) ||
			!bytes.Equal(data[p+n:p+padded], make([]byte, padded-n)) {
			continue
		}
		if q := u64(data[p+8:]); q >= next && q-next <= uint64(p-from)/16 {
			return true
		}
	}
	return false
}

// FuzzDecode feeds arbitrary bytes to the frame decoder: it must never panic
// or read out of bounds, and every frame it accepts must match the
// reference decoder (checksum, padding, bounds).
func FuzzDecode(f *testing.F) {
	seg, err := os.ReadFile(goldenSegment)
	if err != nil {
		f.Fatal(err)
	}
	snap, err := os.ReadFile(goldenSnapshot)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg, uint64(0x0123456789abcdef))
	f.Add(snap, uint64(0x0123456789abcdef))
	f.Add(seg[:100], uint64(0x0123456789abcdef))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, uint64(1))
	f.Add([]byte{17, 0, 0, 0}, uint64(0))
	f.Add(make([]byte, 64), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, salt uint64) {
		// Prefix a header carrying the salt, so the reference decoder
		// checks the frames with it.
		img := make([]byte, headerSize, headerSize+len(data))
		putHeader(img, segmentMagic, 1, salt)
		img = append(img, data...)
		want, _, _, _ := refDecode(img, segmentMagic)
		var got [][]byte
		for off := int64(headerSize); ; {
			fr, st, reason := decodeFrame(img, off, saltCRC(salt))
			if st != frameOK {
				if (st == frameBad) != (reason != "") {
					t.Fatalf("offset %d: status %d with reason %q", off, st, reason)
				}
				break
			}
			if fr.next <= off || fr.next > int64(len(img)) || fr.next%frameAlign != 0 {
				t.Fatalf("offset %d: next frame at %d", off, fr.next)
			}
			if fr.seq != uint64(len(got)+1) {
				break // the reference decoder stops at a sequence break too
			}
			got = append(got, fr.payload)
			off = fr.next
		}
		if len(got) != len(want) {
			t.Fatalf("decoded %d frames, the reference %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d: %x, the reference %x", i, got[i], want[i])
			}
		}
	})
}

// FuzzReplay writes arbitrary bytes as the only segment or snapshot file of
// a journal: Open must not panic, must replay exactly what the reference
// decoder finds valid (or fail with ErrCorrupt where the rules say so), and
// a second Open must find the same records with nothing left to cut.
func FuzzReplay(f *testing.F) {
	seg, err := os.ReadFile(goldenSegment)
	if err != nil {
		f.Fatal(err)
	}
	snap, err := os.ReadFile(goldenSnapshot)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg, false)
	f.Add(append(bytes.Clone(seg), make([]byte, 4000)...), false)
	f.Add(seg[:len(seg)-3], false)
	f.Add(seg[:headerSize], false)
	f.Add(append(bytes.Clone(seg[:50]), 1, 2, 3), false)
	f.Add(snap, true)
	f.Add(snap[:len(snap)-8], true)
	f.Add([]byte{}, false)
	f.Add([]byte("RLDJRNL\x00 but not really a journal"), false)
	f.Add(make([]byte, 4096), true)
	for _, at := range []int{0, 24, headerSize + 2, headerSize + frameHeaderSize + 1} {
		b := bytes.Clone(seg) // damage in the header, its salt, and the first frame
		b[at] ^= 0x10
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, asSnapshot bool) {
		dir := t.TempDir()
		// Name the file after the sequence number in its header, if any.
		var nameSeq uint64
		if len(data) >= 24 {
			nameSeq = le.Uint64(data[16:])
		} else if !asSnapshot {
			nameSeq = 1
		}
		magic, name := segmentMagic, segmentName(nameSeq)
		if asSnapshot {
			magic, name = snapshotMagic, snapshotName(nameSeq)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		want, seq, headerOK, trailerOK := refDecode(data, magic)
		wantCorrupt := false
		switch {
		case asSnapshot && !trailerOK:
			want, wantCorrupt = nil, nameSeq > 0 // the lost snapshot covered records
		case !asSnapshot && (!headerOK || seq != nameSeq || seq == 0 || len(data) < headerSize+frameHeaderSize):
			// An unusable last segment: a torn tail, unless valid records follow.
			want, wantCorrupt = nil, refValidAfterDamage(data, nameSeq)
		case !asSnapshot && seq > 1:
			want, wantCorrupt = nil, true // records 1..seq-1 are missing
		case !asSnapshot && refValidAfterDamage(data, nameSeq):
			want, wantCorrupt = nil, true // damage followed by valid records
		}
		opts := testOptions(SyncNone)
		for round := range 2 {
			j, got, rec, err := openCollect(t, dir, opts)
			if wantCorrupt {
				if _, ok := isCorrupt(err); !ok {
					t.Fatalf("round %d: Open: got %v, want ErrCorrupt", round, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("round %d: Open: %v", round, err)
			}
			checkRecords(t, got, want)
			if rec.SnapshotRecords+rec.SegmentRecords != len(got) {
				t.Fatalf("round %d: Recovery counts %d+%d records, replayed %d", round, rec.SnapshotRecords, rec.SegmentRecords, len(got))
			}
			if round == 1 && (rec.TornTails != 0 || rec.BytesDropped != 0) {
				t.Fatalf("second Open cut again: %+v", rec)
			}
			if err := j.Close(); err != nil && !errors.Is(err, ErrClosed) {
				t.Fatal(err)
			}
		}
	})
}
