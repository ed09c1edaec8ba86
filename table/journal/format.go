package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
	"strings"
)

// The on-disk format; doc.go specifies it byte by byte.
const (
	segmentMagic  = "RLDJRNL\x00"
	snapshotMagic = "RLDSNAP\x00"
	formatVersion = 1 // snapshots, and segments of format 1
	segmentV2     = 2 // segments of format 2: compact frames
	segmentV3     = 3 // segments of format 3: compact frames, some with a tail
	latestFormat  = segmentV3

	headerSize      = 40 // segment and snapshot header
	headerCRCOffset = 36
	frameHeaderSize = 16 // len, crc, seq
	frameAlign      = 8

	// Format 2 frames: len (uvarint, 1 to 5 bytes), tag (2), crc (4), payload.
	frame2Fixed = 6 // tag and crc
	minFrame2   = 1 + frame2Fixed

	// maxSeq bounds the sequence numbers in headers, far beyond any
	// journal's reach, so that seq+1 never overflows.
	maxSeq = 1 << 62

	// trailerSeq marks the trailer frame of a snapshot.
	trailerSeq         = math.MaxUint64
	trailerPayloadSize = 16 // record count, file CRC, reserved

	segmentPrefix  = "seg-"
	segmentSuffix  = ".log"
	snapshotPrefix = "snap-"
	snapshotSuffix = ".snap"
	tmpSuffix      = ".tmp"
	brokenSuffix   = ".broken"
	lockFileName   = "LOCK"
)

var le = binary.LittleEndian

// castagnoli is the CRC-32C table (immutable; hash/crc32 uses SSE4.2 or ARMv8
// CRC instructions for it).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(firstSeq uint64) string {
	return fmt.Sprintf("%s%016x%s", segmentPrefix, firstSeq, segmentSuffix)
}

func snapshotName(coveredSeq uint64) string {
	return fmt.Sprintf("%s%016x%s", snapshotPrefix, coveredSeq, snapshotSuffix)
}

// parseName returns the sequence number in a name made by segmentName or
// snapshotName (16 lower-case hex digits between prefix and suffix).
func parseName(name, prefix, suffix string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	hex, ok = strings.CutSuffix(hex, suffix)
	if !ok || len(hex) != 16 || strings.ToLower(hex) != hex {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

// isBroken reports whether name is evidence left by recovery: "*.broken" or
// "*.broken.N".
func isBroken(name string) bool {
	if strings.HasSuffix(name, brokenSuffix) {
		return true
	}
	i := strings.LastIndex(name, brokenSuffix+".")
	if i < 0 {
		return false
	}
	_, err := strconv.ParseUint(name[i+len(brokenSuffix)+1:], 10, 32)
	return err == nil
}

// putHeader writes a segment or snapshot header of format 1 into
// b[:headerSize].
func putHeader(b []byte, magic string, seq, salt uint64) {
	putHeaderVersion(b, magic, formatVersion, seq, salt)
}

// putHeaderVersion writes a header of the given format version.
func putHeaderVersion(b []byte, magic string, version uint32, seq, salt uint64) {
	copy(b[0:8], magic)
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], headerSize)
	le.PutUint64(b[16:], seq)
	le.PutUint64(b[24:], salt)
	le.PutUint32(b[32:], 0) // flags
	le.PutUint32(b[headerCRCOffset:], crc32.Checksum(b[:headerCRCOffset], castagnoli))
}

// parseHeader checks the header at the start of b, of format 1. It returns
// the sequence number and salt, or a non-empty reason why b does not start
// with a valid header of the given magic.
func parseHeader(b []byte, magic string) (seq, salt uint64, reason string) {
	return parseHeaderVersion(b, magic, formatVersion)
}

// parseHeaderVersion is parseHeader for a header of format 1 or, if
// latest is 2, of format 1 or 2 (see version).
func parseHeaderVersion(b []byte, magic string, latest uint32) (seq, salt uint64, reason string) {
	if len(b) < headerSize {
		return 0, 0, fmt.Sprintf("file is %d bytes, shorter than a header (%d)", len(b), headerSize)
	}
	if got := string(b[:8]); got != magic {
		if allZero(b[:headerSize]) {
			return 0, 0, "header is all zeros"
		}
		return 0, 0, fmt.Sprintf("bad magic %q, want %q", got, magic)
	}
	if v := le.Uint32(b[8:]); v < formatVersion || v > latest {
		return 0, 0, fmt.Sprintf("unsupported format version %d (this build reads %d to %d)", v, formatVersion, latest)
	}
	if n := le.Uint32(b[12:]); n != headerSize {
		return 0, 0, fmt.Sprintf("header size %d, want %d", n, headerSize)
	}
	if got, want := le.Uint32(b[headerCRCOffset:]), crc32.Checksum(b[:headerCRCOffset], castagnoli); got != want {
		return 0, 0, fmt.Sprintf("header checksum %#08x, want %#08x", got, want)
	}
	if f := le.Uint32(b[32:]); f != 0 {
		return 0, 0, fmt.Sprintf("unknown header flags %#x", f)
	}
	if seq = le.Uint64(b[16:]); seq > maxSeq {
		return 0, 0, fmt.Sprintf("sequence number %d out of range", seq)
	}
	return seq, le.Uint64(b[24:]), ""
}

// unknownVersion reports the format version of a header that is whole (its
// magic, size and checksum right) but of a version above latest, which this
// build cannot read: written by a later release, not damaged.
func unknownVersion(b []byte, magic string, latest uint32) (uint32, bool) {
	if len(b) < headerSize || string(b[:8]) != magic || le.Uint32(b[12:]) != headerSize ||
		le.Uint32(b[headerCRCOffset:]) != crc32.Checksum(b[:headerCRCOffset], castagnoli) {
		return 0, false
	}
	v := le.Uint32(b[8:])
	return v, v > latest
}

// version returns the format version of a valid header.
func version(b []byte) uint32 { return le.Uint32(b[8:]) }

// saltCRC is the CRC-32C state after the 8 salt bytes: every frame checksum
// of a file starts from it.
func saltCRC(salt uint64) uint32 {
	var b [8]byte
	le.PutUint64(b[:], salt)
	return crc32.Update(0, castagnoli, b[:])
}

// frameCRC is the checksum of a frame: CRC-32C over salt ‖ len ‖ seq ‖
// payload. scratch must not be a local of the caller's hot path (it would
// escape); it is overwritten.
func frameCRC(salt uint32, scratch *[12]byte, n uint32, seq uint64, payload []byte) uint32 {
	le.PutUint32(scratch[0:], n)
	le.PutUint64(scratch[4:], seq)
	return crc32.Update(crc32.Update(salt, castagnoli, scratch[:]), castagnoli, payload)
}

// frameSize is the aligned size of the frame of a payload of n bytes.
func frameSize(n int) int64 { return align8(int64(frameHeaderSize) + int64(n)) }

func align8(n int64) int64 { return (n + frameAlign - 1) &^ (frameAlign - 1) }

// frameStatus is the outcome of decodeFrame.
type frameStatus uint8

const (
	frameOK  frameStatus = iota // a valid frame
	frameEnd                    // end of data: a zero length word, or no room for one
	frameBad                    // damage; the reason says what
)

// frame is a decoded record frame.
type frame struct {
	seq     uint64
	payload []byte // aliases the input
	tail    []byte // format 3: the tail, if any (aliases the input)
	next    int64  // offset of the next frame
}

// decodeFrame decodes the frame at b[off:]. It never reads outside b and
// never allocates from the length word: a length that does not fit in b is
// damage. A frameOK result always has a matching checksum and zero padding.
func decodeFrame(b []byte, off int64, salt uint32) (frame, frameStatus, string) {
	size := int64(len(b))
	if off < 0 || off > size || off%frameAlign != 0 {
		return frame{}, frameBad, fmt.Sprintf("frame offset %d is misaligned or out of bounds", off)
	}
	if size-off < 4 {
		return frame{}, frameEnd, ""
	}
	n := int64(le.Uint32(b[off:]))
	switch {
	case n == 0:
		return frame{}, frameEnd, ""
	case n < frameHeaderSize:
		return frame{}, frameBad, fmt.Sprintf("record length %d is shorter than a frame header", n)
	case align8(n) > size-off:
		return frame{}, frameBad, fmt.Sprintf("record length %d runs past the end of the file (%d bytes left)", n, size-off)
	}
	end, next := off+n, off+align8(n)
	got := le.Uint32(b[off+4:])
	// CRC input is len ‖ seq ‖ payload, i.e. b[off:off+4] ‖ b[off+8:end].
	want := crc32.Update(crc32.Update(salt, castagnoli, b[off:off+4]), castagnoli, b[off+8:end])
	if got != want {
		return frame{}, frameBad, fmt.Sprintf("record checksum %#08x, want %#08x", got, want)
	}
	if !allZero(b[end:next]) {
		return frame{}, frameBad, "nonzero frame padding"
	}
	return frame{seq: le.Uint64(b[off+8:]), payload: b[off+frameHeaderSize : end], next: next}, frameOK, ""
}

// frame2Size is the size of the format-2 frame of a payload of n bytes.
func frame2Size(n int) int64 { return int64(uvarintLen(uint64(n)+1) + frame2Fixed + n) }

// uvarintLen is the length of the shortest uvarint encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// frame2Scratch is the size of putFrame2's scratch: the checksum's input
// before the payload (the number, the length, the tag: at most 15 bytes),
// and a payload of up to 49 bytes after it, so that the checksum of a
// small record, most of them, is one call over one buffer.
const frame2Scratch = 64

// putFrame2 writes the format-2 frame of record seq into b, which is zero
// beyond it. The first byte (of the length) goes last: until it is stored
// the frame reads as the end of data. scratch is the caller's, not a local
// (it would escape).
func putFrame2(b []byte, salt uint32, scratch *[frame2Scratch]byte, seq uint64, payload []byte) {
	le.PutUint64(scratch[0:], seq)
	k := binary.PutUvarint(scratch[8:], uint64(len(payload))+1)
	le.PutUint16(scratch[8+k:], uint16(seq))
	copy(b[1:], scratch[9:10+k]) // the rest of the length, and the tag
	copy(b[k+frame2Fixed:], payload)
	var crc uint32
	if n := 10 + k + len(payload); n <= len(scratch) {
		// One call: CRC-32C over a few bytes costs mostly the call
		// (BenchmarkPutFrame2, payload=7: 18.1 → 17.0 ns).
		copy(scratch[10+k:], payload)
		crc = crc32.Update(salt, castagnoli, scratch[:n])
	} else {
		crc = crc32.Update(crc32.Update(salt, castagnoli, scratch[:10+k]), castagnoli, payload)
	}
	le.PutUint32(b[k+2:], crc)
	b[0] = scratch[8]
}

// frameLen reads the length word of the format-2 or format-3 frame at
// b[off:], a uvarint of at most 5 bytes in its shortest form, and its
// length k; frameEnd for a zero first byte or the end of b.
func frameLen(b []byte, off int64) (l uint64, k int, st frameStatus, reason string) {
	size := int64(len(b))
	if off < headerSize || off > size {
		return 0, 0, frameBad, fmt.Sprintf("frame offset %d is out of bounds", off)
	}
	if off == size || b[off] == 0 {
		return 0, 0, frameEnd, ""
	}
	l, k = binary.Uvarint(b[off:min(off+binary.MaxVarintLen32, size)])
	switch {
	case k <= 0:
		return 0, 0, frameBad, "record length is not a varint of at most 5 bytes within the file"
	case k != uvarintLen(l):
		return 0, 0, frameBad, fmt.Sprintf("record length word %d is not in its shortest form", l)
	}
	return l, k, frameOK, ""
}

// badTag says why the tag at b[at:] is not record seq's, or "" if it is.
func badTag(b []byte, at int64, seq uint64) string {
	if tag := le.Uint16(b[at:]); tag != uint16(seq) {
		return fmt.Sprintf("record tag %#04x, want %#04x (sequence number %d)", tag, uint16(seq), seq)
	}
	return ""
}

// decodeFrame2 decodes the format-2 frame at b[off:], which must be record
// seq (its number is not stored: its low 16 bits, the tag, are, and the
// checksum covers all of it). Like decodeFrame it never reads outside b and
// never allocates from the length.
func decodeFrame2(b []byte, off int64, salt uint32, seq uint64, scratch *[8]byte) (frame, frameStatus, string) {
	size := int64(len(b))
	l, k, st, reason := frameLen(b, off)
	switch {
	case st != frameOK:
		return frame{}, st, reason
	case size-off-int64(k)-frame2Fixed < 0 || l-1 > uint64(size-off-int64(k)-frame2Fixed):
		return frame{}, frameBad, fmt.Sprintf("record length %d runs past the end of the file (%d bytes left)", l-1, size-off)
	}
	p := off + int64(k) + frame2Fixed
	end := p + int64(l-1)
	if reason := badTag(b, off+int64(k), seq); reason != "" {
		return frame{}, frameBad, reason
	}
	le.PutUint64(scratch[:], seq)
	want := crc32.Update(crc32.Update(crc32.Update(salt, castagnoli, scratch[:]), castagnoli, b[off:off+int64(k)+2]), castagnoli, b[p:end])
	if got := le.Uint32(b[off+int64(k)+2:]); got != want {
		return frame{}, frameBad, fmt.Sprintf("record checksum %#08x, want %#08x", got, want)
	}
	return frame{seq: seq, payload: b[p:end], next: end}, frameOK, ""
}

// Format 3 frames: a format-2 frame whose length word also says whether a
// tail follows the payload (see doc.go). maxTailWords bounds a tail; a
// tail starts at a multiple of tailAlign in the file, so that a piece of
// it of that size at a multiple of that size is never split between two
// disk sectors.
const (
	maxTailWords = 255
	tailAlign    = 32
)

// alignTail rounds n up to a multiple of tailAlign.
func alignTail(n int64) int64 { return (n + tailAlign - 1) &^ (tailAlign - 1) }

// frame3Size is the size of the format-3 frame at offset off of a payload
// of n bytes with a tail of words 8-byte words (0: no tail). A tail starts
// at a multiple of tailAlign in the file, so the size depends on off.
func frame3Size(off int64, n, words int) int64 {
	l := uint64(n+1) << 1
	if words == 0 {
		return int64(uvarintLen(l) + frame2Fixed + n)
	}
	end := off + int64(uvarintLen(l|1)+frame2Fixed+1+n)
	return alignTail(end) + int64(words)*8 - off
}

// putFrame3 writes the format-3 frame of record seq into b, which is zero
// beyond it and starts at a file offset such that b's tail (words 8-byte
// words, 0 for none) starts at len(b)-8*words, a multiple of 8. As in
// putFrame2, the first byte of the length goes last. The tail stays zero
// (the segment's bytes): its owner writes it.
func putFrame3(b []byte, salt uint32, scratch *[frame2Scratch]byte, seq uint64, payload []byte, words int) {
	le.PutUint64(scratch[0:], seq)
	l := uint64(len(payload)+1) << 1
	if words > 0 {
		l |= 1
	}
	k := binary.PutUvarint(scratch[8:], l)
	le.PutUint16(scratch[8+k:], uint16(seq))
	h := 10 + k // the checksum's input before the payload
	if words > 0 {
		scratch[h] = byte(words)
		h++
	}
	copy(b[1:], scratch[9:10+k]) // the rest of the length, and the tag
	p := k + frame2Fixed         // where the payload (or the word count) goes
	if words > 0 {
		b[p] = byte(words)
		p++
	}
	copy(b[p:], payload)
	var crc uint32
	if n := h + len(payload); n <= len(scratch) {
		copy(scratch[h:], payload)
		crc = crc32.Update(salt, castagnoli, scratch[:n])
	} else {
		crc = crc32.Update(crc32.Update(salt, castagnoli, scratch[:h]), castagnoli, payload)
	}
	le.PutUint32(b[k+2:], crc)
	b[0] = scratch[8]
}

// decodeFrame3 is decodeFrame2 for a format-3 frame, whose tail (if any)
// it returns unchecked: its bytes are its owner's to check.
func decodeFrame3(b []byte, off int64, salt uint32, seq uint64, scratch *[8]byte) (frame, frameStatus, string) {
	size := int64(len(b))
	l, k, st, reason := frameLen(b, off)
	switch {
	case st != frameOK:
		return frame{}, st, reason
	case l < 2:
		return frame{}, frameBad, fmt.Sprintf("record length word %d names no length", l)
	}
	n, tailed := l>>1-1, l&1 == 1
	p := off + int64(k) + frame2Fixed // the payload, or the tail's word count
	if p > size {
		return frame{}, frameBad, fmt.Sprintf("record header runs past the end of the file (%d bytes left)", size-off)
	}
	words := int64(0)
	if tailed {
		if p >= size {
			return frame{}, frameBad, "record tail length runs past the end of the file"
		}
		if words = int64(b[p]); words == 0 {
			return frame{}, frameBad, "record tail length is 0 words"
		}
		p++
	}
	if n > uint64(size-p) {
		return frame{}, frameBad, fmt.Sprintf("record length %d runs past the end of the file (%d bytes left)", n, size-off)
	}
	end := p + int64(n)
	next := end
	if tailed {
		next = alignTail(end) + 8*words
		if next > size {
			return frame{}, frameBad, fmt.Sprintf("record tail of %d words runs past the end of the file", words)
		}
	}
	if reason := badTag(b, off+int64(k), seq); reason != "" {
		return frame{}, frameBad, reason
	}
	le.PutUint64(scratch[:], seq)
	crc := crc32.Update(crc32.Update(salt, castagnoli, scratch[:]), castagnoli, b[off:off+int64(k)+2])
	if tailed {
		crc = crc32.Update(crc, castagnoli, b[p-1:p])
	}
	if got, want := le.Uint32(b[off+int64(k)+2:]), crc32.Update(crc, castagnoli, b[p:end]); got != want {
		return frame{}, frameBad, fmt.Sprintf("record checksum %#08x, want %#08x", got, want)
	}
	fr := frame{seq: seq, payload: b[p:end], next: next}
	if tailed {
		if !allZero(b[end:alignTail(end)]) {
			return frame{}, frameBad, "nonzero padding before the record's tail"
		}
		fr.tail = b[alignTail(end):next:next]
	}
	return fr, frameOK, ""
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if le.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// zeroPage is what dataEnd compares a segment's pages with. Never written.
var zeroPage [4096]byte

// dataEnd returns the offset just past the last nonzero byte of b at or
// after from, or from if b[from:] is all zeros. Recovery reads the unused
// rest of every segment with it: page by page, with the vectorised
// comparison of bytes.Equal, then word by word.
func dataEnd(b []byte, from int64) int64 {
	i := int64(len(b))
	for i-int64(len(zeroPage)) >= from && bytes.Equal(b[i-int64(len(zeroPage)):i], zeroPage[:]) {
		i -= int64(len(zeroPage))
	}
	for i-8 >= from && le.Uint64(b[i-8:]) == 0 {
		i -= 8
	}
	for i > from && b[i-1] == 0 {
		i--
	}
	return i
}
