package table

// slot is the mutable state of one bucket.
type slot struct {
	id       string
	count    int64 // hits in the window; for token and leaky buckets, tokens in use at the last change
	aux      int64 // sliding window: the previous window's count; GCRA: the TAT, in ns after the window's start
	created  int64 // Unix ms of the first counted hit in the window
	modified int64 // Unix ms of the last counted hit

	// The bucket's key, for the index to tell it from others.
	bucket int64  // window number
	gid    uint32 // group id
	fp     uint32 // keyFP of the key: where the index holds the slot
}

const (
	pageBits = 12
	pageSize = 1 << pageBits
)

// page is a fixed block of slots. A page whose gen is older than its slab's
// gen may be read by a frozen view on another goroutine, so it is never
// written again: the slab copies it first.
type page struct {
	slots [pageSize]slot
	gen   uint64
}

// slab stores slots in fixed pages, so growing it never copies or doubles
// what is there. Writes go through mut, which copies a page shared with a
// frozen view (copy-on-write); reads go through at.
type slab struct {
	pages  []*page
	used   uint32   // slots handed out at least once
	spare  []uint32 // slots handed back, reused first
	gen    uint64   // pages of an older gen are shared while frozen > 0
	frozen int      // frozen views that may be reading pages of an older gen
}

// at returns slot i for reading.
func (s *slab) at(i uint32) *slot { return &s.pages[i>>pageBits].slots[i&(pageSize-1)] }

// mut returns slot i for writing, first copying its page if a frozen view
// shares it.
func (s *slab) mut(i uint32) *slot {
	p := s.pages[i>>pageBits]
	if s.frozen > 0 && p.gen != s.gen {
		cp := *p
		cp.gen = s.gen
		p = &cp
		s.pages[i>>pageBits] = p
	}
	return &p.slots[i&(pageSize-1)]
}

func (s *slab) alloc() uint32 {
	if n := len(s.spare); n > 0 {
		i := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return i
	}
	if int(s.used>>pageBits) == len(s.pages) {
		s.pages = append(s.pages, &page{gen: s.gen})
	}
	i := s.used
	s.used++
	return i
}

func (s *slab) release(i uint32) {
	*s.mut(i) = slot{}
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
