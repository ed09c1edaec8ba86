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

// cell is one bucket as the table stores it: 48 bytes and no pointer, so
// that the garbage collector never scans the slab. Its id lives in the
// arena; its key is its window (which names the group and the window
// number); the stamps are ms after the window's start, 36 bits each (a
// window is at most MaxScale, 2^35 ms, and a restored bucket may have been
// changed up to a width after its creation).
type cell struct {
	count int64
	aux   int64
	win   uint32 // the cell's window, an index in Table.wins
	fp    uint32 // keyFP of the key: where the index holds the cell
	// next and prev link the cells of a window, as slot+1 (0: none).
	next, prev uint32
	idRef      uint32 // the id's handle in the arena, its low 32 bits
	createdLo  uint32 // created, ms after the window's start: low 32 bits
	modLo      uint32 // modified, likewise
	idLen      uint16 // the id's length; 0: a free cell
	hi         uint16 // bits 0-3: created>>32; 4-7: modified>>32; 8-15: idRef's bits 32-39
}

// idHandle returns the cell's id handle in the arena.
func (c *cell) idHandle() uint64 { return uint64(c.idRef) | uint64(c.hi>>8)<<32 }

func (c *cell) setID(n int, h uint64) {
	c.idLen, c.idRef = uint16(n), uint32(h)
	c.hi = c.hi&0xff | uint16(h>>32)<<8
}

// createdOff and modifiedOff return the stamps, in ms after the start of
// the cell's window.
func (c *cell) createdOff() int64  { return int64(c.createdLo) | int64(c.hi&0xf)<<32 }
func (c *cell) modifiedOff() int64 { return int64(c.modLo) | int64(c.hi>>4&0xf)<<32 }

func (c *cell) setCreated(off int64) {
	c.createdLo = uint32(off)
	c.hi = c.hi&^0xf | uint16(off>>32)&0xf
}

func (c *cell) setModified(off int64) {
	c.modLo = uint32(off)
	c.hi = c.hi&^0xf0 | (uint16(off>>32)&0xf)<<4
}

const (
	pageBits = 12
	pageSize = 1 << pageBits
)

// page is a fixed block of cells: 192 KiB, a whole number of the
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
		id: strings.Clone(t.ids.view(int(c.idLen), c.idHandle())), count: c.count, aux: c.aux,
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
