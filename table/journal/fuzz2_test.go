package journal

import (
	"bytes"
	"hash/crc32"
	"os"
	"testing"
)

// refDecode2 is a reference decoder of format-2 segments, written from the
// specification in doc.go ("Record frame, format 2") independently of
// decodeFrame2: it returns the valid records of a segment image whose
// header (version 2) it trusts, from the sequence number first on. A frame
// is valid at the place due to record N when its length is a uvarint of
// at most 5 bytes in its shortest form, the frame fits in the image, its
// tag is N's low 16 bits and its CRC-32C covers salt ‖ N ‖ len ‖ tag ‖
// payload. A zero first byte, or the end of the image, ends the data.
func refDecode2(data []byte, first uint64) [][]byte {
	crc := func(parts ...[]byte) uint32 {
		return crc32.Checksum(bytes.Join(parts, nil), crc32.MakeTable(crc32.Castagnoli))
	}
	u64le := func(v uint64) []byte {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		return b
	}
	salt := data[24:32]
	var records [][]byte
	for off, n := 40, first; off < len(data) && data[off] != 0; n++ {
		// The length: 7 bits a byte, the high bit set on every byte but the last.
		var l uint64
		k := 0
		for {
			if k == 5 || off+k >= len(data) {
				return records // not a uvarint of at most 5 bytes within the image
			}
			c := data[off+k]
			l |= uint64(c&0x7f) << (7 * k)
			k++
			if c < 0x80 {
				break
			}
		}
		if k > 1 && data[off+k-1] == 0 {
			return records // a longer form than needed: its last byte adds nothing
		}
		if l == 0 {
			return records // len is the payload length + 1, at least 1
		}
		p := off + k + 6
		if p > len(data) || l-1 > uint64(len(data)-p) {
			return records
		}
		end := p + int(l-1)
		tag := data[off+k : off+k+2]
		if uint16(tag[0])|uint16(tag[1])<<8 != uint16(n) {
			return records
		}
		stored := data[off+k+2 : off+k+6]
		want := crc(salt, u64le(n), data[off:off+k], tag, data[p:end])
		if uint32(stored[0])|uint32(stored[1])<<8|uint32(stored[2])<<16|uint32(stored[3])<<24 != want {
			return records
		}
		records = append(records, data[p:end])
		off = end
	}
	return records
}

// FuzzDecode2 feeds arbitrary bytes, after a format-2 segment header, to
// the format-2 frame decoder: it must never panic or read out of bounds,
// must give a reason for every frame it refuses, and must accept exactly
// the records the reference decoder accepts, from the header's first
// sequence number on.
func FuzzDecode2(f *testing.F) {
	seg, err := os.ReadFile(goldenSegmentV2)
	if err != nil {
		f.Fatal(err)
	}
	body, salt := seg[headerSize:], le.Uint64(seg[24:])
	f.Add(body, uint64(1), salt)
	f.Add(body, uint64(2), salt) // the tags and checksums of another place
	f.Add(body[:len(body)-3], uint64(1), salt)
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, uint64(1), uint64(1))
	f.Add([]byte{0x81, 0x00, 1, 0, 0, 0, 0, 0}, uint64(1), uint64(1)) // a length not in its shortest form
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0}, uint64(1), uint64(7))
	f.Add(make([]byte, 64), uint64(1<<16+1), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, first, salt uint64) {
		first = first%(1<<62) + 1
		img := make([]byte, headerSize, headerSize+len(data))
		putHeaderVersion(img, segmentMagic, 2, first, salt)
		img = append(img, data...)
		if _, _, reason := parseHeaderVersion(img, segmentMagic, 2); reason != "" {
			t.Fatalf("the header made: %s", reason)
		}
		want := refDecode2(img, first)
		var got [][]byte
		var scratch [8]byte
		off := int64(headerSize)
		for seq := first; ; seq++ {
			fr, st, reason := decodeFrame2(img, off, saltCRC(salt), seq, &scratch)
			if st != frameOK {
				if (st == frameBad) != (reason != "") {
					t.Fatalf("offset %d: status %d with reason %q", off, st, reason)
				}
				break
			}
			if fr.next <= off || fr.next > int64(len(img)) || fr.seq != seq {
				t.Fatalf("offset %d: record %d, next frame at %d", off, fr.seq, fr.next)
			}
			got = append(got, fr.payload)
			off = fr.next
		}
		if len(got) != len(want) {
			t.Fatalf("decoded %d records, the reference %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d: %x, the reference %x", i, got[i], want[i])
			}
		}
	})
}

// TestRefDecode2Golden: the reference decoder reads the golden format-2
// segment to its records, so FuzzDecode2's first seed has records to agree
// on.
func TestRefDecode2Golden(t *testing.T) {
	t.Parallel()
	seg, err := os.ReadFile(goldenSegmentV2)
	if err != nil {
		t.Fatal(err)
	}
	got := refDecode2(seg, 1)
	if len(got) != len(goldenRecords) {
		t.Fatalf("%d records, want %d", len(got), len(goldenRecords))
	}
	for i := range got {
		if !bytes.Equal(got[i], goldenRecords[i]) {
			t.Errorf("record %d: %x, want %x", i, got[i], goldenRecords[i])
		}
	}
	if got := refDecode2(seg, 2); len(got) != 0 {
		t.Errorf("read as from record 2: %d records, want none (the tags and checksums are record 1's on)", len(got))
	}
}
