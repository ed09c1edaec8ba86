package table

// slot is the mutable state of one bucket.
type slot struct {
	id       string
	count    int64
	created  int64 // Unix ms of the first counted hit
	modified int64 // Unix ms of the last counted hit
}

const (
	pageBits = 12
	pageSize = 1 << pageBits
)

// slab stores slots in fixed pages, so growing it never copies or doubles
// what is there, and a slot's address is stable while it is live.
type slab struct {
	pages [][]slot
	used  uint32   // slots handed out at least once
	spare []uint32 // slots handed back, reused first
}

func (s *slab) at(i uint32) *slot { return &s.pages[i>>pageBits][i&(pageSize-1)] }

func (s *slab) alloc() uint32 {
	if n := len(s.spare); n > 0 {
		i := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return i
	}
	if int(s.used>>pageBits) == len(s.pages) {
		s.pages = append(s.pages, make([]slot, pageSize))
	}
	i := s.used
	s.used++
	return i
}

func (s *slab) release(i uint32) {
	*s.at(i) = slot{}
	s.spare = append(s.spare, i)
}
