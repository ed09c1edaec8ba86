package table

import (
	"strings"
	"unsafe"
)

// slot is the state of one bucket as the record codec and the tests see
// it: its id, counters and stamps in Unix ms, and its key (bucket, gid).
// The table stores it packed, as a cell.
type slot struct {
	id       string
	count    int64 // hits in the window; for token and leaky buckets, tokens in use at the last change
	aux      int64 // sliding window: the previous window's count; GCRA: the TAT, in ns after the window's start
	created  int64 // Unix ms of the first counted hit in the window
	modified int64 // Unix ms of the last counted hit

	bucket int64  // window number
	gid    uint32 // group id
}

// cell is one bucket as the table stores it: 56 bytes and no pointer, so
// that the garbage collector never scans the slab. An id of up to
// inlineID bytes lives in the cell itself, so that finding a bucket by id
// touches its index entry and its cell and nothing else (BenchmarkApply
// at 1M keys: a quarter less time per check than with every id in the
// arena, a third line to miss); a longer id lives in the arena, the cell
// holding its handle. The cell's key is its window (which names the group
// and the window number); its fingerprint in the window's index is keyFP
// of its id's hash, computed again where an entry must be found to be
// removed.
// The stamps are ms after the window's start, 36 bits each (a window is at
// most MaxScale, 2^35 ms, and a restored bucket may have been changed up
// to a width after its creation).
type cell struct {
	count int64
	aux   int64
	win   uint32 // the cell's window, an index in Table.wins
	// next and prev link the cells of a window, as slot+1 (0: none).
	next, prev uint32
	createdLo  uint32 // created, ms after the window's start: low 32 bits
	modLo      uint32 // modified, likewise
	idLen      uint16 // the id's length; 0: a free cell
	hi         uint8  // bits 0-3: created>>32; 4-7: modified>>32
	// tailNext is the slot of the bucket's tail (Table.homes) its next
	// rewrite writes, 0 or 1. It is kept here, in the line the change
	// writes anyway, and not in homes, which a repeat hit then only reads:
	// a line written by every check moves between the cores that serve the
	// shard in turn.
	tailNext uint8
	// id is the id when idLen <= inlineID, else its handle in the arena
	// (handleBytes bytes, little-endian).
	id [inlineID]byte
}

// inlineID is the longest id a cell holds itself: an IPv4 address in text
// (15 bytes) and most user ids and short keys fit.
const inlineID = 16

// handleBytes is the size of an arena handle kept in a cell: 40 bits.
const handleBytes = 5

// setID stores id (1 to MaxIDLen bytes) in c, or in a if it is longer than
// inlineID.
func (c *cell) setID(a *arena, id string) {
	c.idLen = uint16(len(id))
	if len(id) <= inlineID {
		copy(c.id[:], id)
		return
	}
	h := a.alloc(id)
	for i := range handleBytes {
		c.id[i] = byte(h >> (8 * i))
	}
}

// handle returns the arena handle of c's id, which is longer than inlineID.
func (c *cell) handle() uint64 {
	var h uint64
	for i := range handleBytes {
		h |= uint64(c.id[i]) << (8 * i)
	}
	return h
}

// idIn returns c's id without copying it, a being the arena of c's table
// (or of a frozen view): valid while c is not changed and, for an id in
// the arena, until it is freed (for a frozen view, while the view is not
// thawed). A free cell's is "".
func (c *cell) idIn(a *arena) string {
	n := int(c.idLen)
	if n <= inlineID {
		return unsafe.String(&c.id[0], n)
	}
	return a.view(n, c.handle())
}

// hasID reports whether c holds id, without touching the arena unless the
// id is longer than inlineID.
func (c *cell) hasID(a *arena, id string) bool {
	n := len(id)
	if int(c.idLen) != n {
		return false
	}
	if n <= inlineID {
		return string(c.id[:n]) == id
	}
	return a.view(n, c.handle()) == id
}

// freeID gives back the arena room of c's id, if it has any.
func (c *cell) freeID(a *arena) {
	if n := int(c.idLen); n > inlineID {
		a.free(n, c.handle())
	}
}

// createdOff and modifiedOff return the stamps, in ms after the start of
// the cell's window.
func (c *cell) createdOff() int64  { return int64(c.createdLo) | int64(c.hi&0xf)<<32 }
func (c *cell) modifiedOff() int64 { return int64(c.modLo) | int64(c.hi>>4)<<32 }

func (c *cell) setCreated(off int64) {
	c.createdLo = uint32(off)
	c.hi = c.hi&^0xf | uint8(off>>32)&0xf
}

func (c *cell) setModified(off int64) {
	c.modLo = uint32(off)
	c.hi = c.hi&^0xf0 | (uint8(off>>32)&0xf)<<4
}

const (
	pageBits = 12
	pageSize = 1 << pageBits
)

// page is a fixed block of cells: 224 KiB, a whole number of the
// allocator's pages.
type page [pageSize]cell

// slab stores cells in fixed pages, so growing it never copies or doubles
// what is there. Writes go through mut, which copies a page shared with a
// frozen view (copy-on-write); reads go through cell. A page whose gen is
// older than the slab's may be read by a frozen view on another goroutine,
// so it is never written again: the slab copies it first.
type slab struct {
	pages  []*page
	gens   []uint64 // by page
	used   uint32   // slots handed out at least once
	spare  []uint32 // slots handed back, reused first
	gen    uint64   // pages of an older gen are shared while frozen > 0
	frozen int      // frozen views that may be reading pages of an older gen

	t *Table // for at
}

// cell returns the cell of slot i for reading.
func (s *slab) cell(i uint32) *cell { return &s.pages[i>>pageBits][i&(pageSize-1)] }

// mut returns the cell of slot i for writing, first copying its page if a
// frozen view shares it.
func (s *slab) mut(i uint32) *cell {
	p := i >> pageBits
	if s.frozen > 0 && s.gens[p] != s.gen {
		cp := *s.pages[p]
		s.pages[p] = &cp
		s.gens[p] = s.gen
	}
	return &s.pages[p][i&(pageSize-1)]
}

// at returns the state of the bucket in slot i (a copy: writing to it
// changes nothing), the zero slot for a free one.
func (s *slab) at(i uint32) *slot {
	c := s.cell(i)
	if c.idLen == 0 {
		return &slot{}
	}
	t := s.t
	w := &t.wins[c.win]
	start := w.bucket * t.byID[w.gid].key.widthMs
	return &slot{
		id: strings.Clone(c.idIn(&t.ids)), count: c.count, aux: c.aux,
		created: start + c.createdOff(), modified: start + c.modifiedOff(),
		bucket: w.bucket, gid: w.gid,
	}
}

func (s *slab) alloc() uint32 {
	if n := len(s.spare); n > 0 {
		i := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return i
	}
	if int(s.used>>pageBits) == len(s.pages) {
		s.pages = append(s.pages, new(page))
		s.gens = append(s.gens, s.gen)
	}
	i := s.used
	s.used++
	return i
}

func (s *slab) release(i uint32) {
	*s.mut(i) = cell{}
	s.spare = append(s.spare, i)
}

// freeze marks every page shared and returns them, for a frozen view.
func (s *slab) freeze() []*page {
	s.gen++
	s.frozen++
	return append([]*page(nil), s.pages...)
}

// thaw ends the sharing with one frozen view, which reads the pages no more.
func (s *slab) thaw() { s.frozen-- }

// footprint returns the bytes of the pages and of the slab's own lists.
func (s *slab) footprint() (pages, other int64) {
	pages = int64(len(s.pages)) * int64(unsafe.Sizeof(page{}))
	other = int64(cap(s.pages))*8 + int64(cap(s.gens))*8 + int64(cap(s.spare))*4
	return pages, other
}
