package table

import "unsafe"

// Footprint is the memory a Table holds, by part, in bytes.
type Footprint struct {
	Buckets int // the buckets in the table, expired or not
	// Slab is the buckets' cells, 56 bytes each: counters, stamps, the
	// key (window, and the id itself if it is of at most 16 bytes, else
	// its handle in the arena) and the links of the window lists that
	// keep the table in window order.
	Slab int64
	// Index is the hash index: 8 bytes an entry, between 3/8 and 3/4 of
	// its entries in use.
	Index int64
	// Windows is the windows and the limits (groups): their lists and the
	// index of limits by expiry.
	Windows int64
	// IDs is the id arena: the bytes of the ids longer than 16 bytes,
	// back to back by length.
	IDs int64
	// Other is the rest: free lists, change tracking, the table itself.
	Other int64
}

// Total returns the sum of the parts.
func (f Footprint) Total() int64 { return f.Slab + f.Index + f.Windows + f.IDs + f.Other }

// perGroup estimates what a limit costs besides its window list: the
// group, its entry in the map of groups and in the index of limits by
// expiry.
const perGroup = int64(unsafe.Sizeof(group{})) + 64 + 32

// Footprint returns the memory t holds, by part. It counts what t
// allocated (the capacity of its slices), not the allocator's rounding;
// the limits' map entries are estimated.
func (t *Table) Footprint() Footprint {
	f := Footprint{Buckets: t.n}
	var slabOther, idOther int64
	f.Slab, slabOther = t.slots.footprint()
	f.IDs, idOther = t.ids.footprint()
	for i := range t.wins {
		f.Index += int64(cap(t.wins[i].ix.e)) * 8
	}
	f.Windows = int64(cap(t.wins))*int64(unsafe.Sizeof(window{})) + int64(cap(t.freeWins))*4 +
		int64(cap(t.byID))*8 + int64(cap(t.freeGIDs))*4
	for _, g := range t.byID {
		if g != nil {
			f.Windows += perGroup + int64(len(g.key.ns)) + int64(cap(g.wins))*int64(unsafe.Sizeof(gwin{}))
		}
	}
	f.Other = slabOther + idOther + int64(unsafe.Sizeof(*t)) +
		int64(cap(t.dirty)+cap(t.bindings))*8 + int64(cap(t.homes))*4 + int64(cap(t.changed))*int64(unsafe.Sizeof(item{})) +
		int64(cap(t.deleted))*int64(unsafe.Sizeof(deletion{})) + int64(cap(t.rec)) +
		int64(cap(t.undo))*int64(unsafe.Sizeof(undo{})) +
		int64(cap(t.refs.dense))*4 + int64(cap(t.refs.back))*8 + int64(len(t.refs.sparse))*24
	return f
}
