package table

import (
	"encoding/binary"
	"unicode/utf8"
	"unsafe"
)

// arena stores the ids too long for their cell (see inlineID) without a
// string header or an allocation per id: an id of length n lives in the
// class of length n, a list of chunks of at most chunkBytes holding ids of
// exactly n bytes back to back.
// An id is named by a handle, its chunk number and byte offset in the
// chunk. A deleted id's room goes to the next id of the same length, so
// deletions do not leak: a class never holds more than the most ids of its
// length the table held at once.
//
// The bytes of an id are never written again while a frozen view may read
// them: an id freed while the arena is frozen is held back and reused only
// after the last thaw, and a chunk that grows is copied, the frozen view
// keeping the old copy.
type arena struct {
	class  [MaxIDLen + 1]*idClass
	frozen int // frozen views reading the arena
	bytes  int64
}

// chunkBytes bounds a chunk: handles keep a 16-bit offset.
const chunkBytes = 1 << 16

// firstChunkIDs is the capacity, in ids, of a class's first chunk when it is
// created; it doubles up to a full chunk as the class grows, so that a
// class holding a few ids costs a few ids.
const firstChunkIDs = 8

// idClass holds the ids of one length.
type idClass struct {
	chunks [][]byte
	free   []uint64 // handles of freed ids, reused first
	held   []uint64 // handles freed while frozen: free again after the thaw
}

// handle is chunk<<16 | offset.
func mkHandle(chunk int, off int) uint64 { return uint64(chunk)<<16 | uint64(off) }

// alloc stores id (1 to MaxIDLen bytes) and returns its handle.
func (a *arena) alloc(id string) uint64 {
	n := len(id)
	c := a.class[n]
	if c == nil {
		c = &idClass{}
		a.class[n] = c
	}
	if k := len(c.free); k > 0 {
		h := c.free[k-1]
		c.free = c.free[:k-1]
		copy(c.chunks[h>>16][h&0xffff:], id)
		return h
	}
	last := len(c.chunks) - 1
	if last < 0 || len(c.chunks[last])+n > chunkBytes/n*n {
		size := chunkBytes / n * n
		if last < 0 {
			size = min(size, firstChunkIDs*n)
		}
		c.chunks = append(c.chunks, make([]byte, 0, size))
		a.bytes += int64(size)
		last++
	}
	b := c.chunks[last]
	if len(b)+n > cap(b) {
		// Only a class's first chunk grows: doubling, up to a full chunk.
		grown := make([]byte, len(b), min(2*cap(b), chunkBytes/n*n))
		copy(grown, b)
		a.bytes += int64(cap(grown) - cap(b))
		b = grown
	}
	off := len(b)
	c.chunks[last] = append(b, id...)
	return mkHandle(last, off)
}

// free gives back the room of the id of length n at h.
func (a *arena) free(n int, h uint64) {
	c := a.class[n]
	if a.frozen > 0 {
		c.held = append(c.held, h)
		return
	}
	c.free = append(c.free, h)
}

// view returns the id of length n at h without copying it: valid until the
// id is freed (for a frozen view's arena, while the view is not thawed).
func (a *arena) view(n int, h uint64) string {
	b := a.class[n].chunks[h>>16]
	return unsafe.String(&b[h&0xffff], n)
}

// freeze returns a copy of the chunk lists, which the ids they hold keep
// reading the same until thaw.
func (a *arena) freeze() *arena {
	a.frozen++
	v := &arena{}
	for n, c := range a.class {
		if c != nil {
			v.class[n] = &idClass{chunks: append([][]byte(nil), c.chunks...)}
		}
	}
	return v
}

// thaw ends one frozen view; after the last, the ids freed meanwhile are
// free to reuse.
func (a *arena) thaw() {
	if a.frozen--; a.frozen > 0 {
		return
	}
	for _, c := range a.class {
		if c != nil && len(c.held) > 0 {
			c.free = append(c.free, c.held...)
			c.held = c.held[:0]
		}
	}
}

// footprint returns the bytes the arena holds: its chunks (bytes), its
// free lists and its class headers.
func (a *arena) footprint() (chunks, other int64) {
	other = int64(unsafe.Sizeof(a.class))
	for _, c := range a.class {
		if c != nil {
			other += int64(unsafe.Sizeof(*c)) + int64(cap(c.chunks))*int64(unsafe.Sizeof([]byte(nil))) +
				8*int64(cap(c.free)+cap(c.held))
		}
	}
	return a.bytes, other
}

// validUTF8 is utf8.ValidString(s), with a fast path for the ids of most
// checks, which are ASCII: eight bytes at a time, the last word read
// overlapping the one before it. About 6 ns for an id of 12 bytes against
// 13 ns for utf8.ValidString (BenchmarkValidUTF8); a non-ASCII id pays
// both.
func validUTF8(s string) bool {
	n := len(s)
	if n < 8 {
		var a byte
		for i := 0; i < n; i++ {
			a |= s[i]
		}
		return a < utf8.RuneSelf || utf8.ValidString(s)
	}
	b := unsafe.Slice(unsafe.StringData(s), n)
	a := binary.LittleEndian.Uint64(b[n-8:])
	for i := 0; i+8 <= n; i += 8 {
		a |= binary.LittleEndian.Uint64(b[i:])
	}
	return a&0x8080808080808080 == 0 || utf8.ValidString(s)
}
