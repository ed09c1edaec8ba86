package table

// index finds a bucket's slot from its key (group, window, id) in about one
// memory access: an open-addressing hash table with linear probing, whose
// entries hold a 32-bit fingerprint of the key and the slot. Each window
// has one, for its buckets; the windows' lists keep the buckets in order
// for sweeps and snapshots.
//
// An entry is fp<<32 | slot+1 (0 is empty); an entry's home position is
// fp & mask, so growing needs no rehashing of ids. The index holds at most
// 3/4 of its capacity (at least 1/2 after growing once); deletion shifts
// the entries after the hole back, so there are no tombstones.
type index struct {
	e    []uint64
	n    int
	mask uint32
}

const minIndexCap = 8

// keyFP returns the fingerprint of the bucket of id (maphash h) in window b
// of group gid: a 64-bit mix of the three, folded to 32 bits.
func keyFP(h uint64, gid uint32, b int64) uint32 {
	m := h ^ uint64(gid)*0x9e3779b97f4a7c15 ^ uint64(b)*0xc2b2ae3d27d4eb4f
	m ^= m >> 31
	m *= 0xbf58476d1ce4e5b9
	m ^= m >> 29
	return uint32(m) ^ uint32(m>>32)
}

// add records that the bucket of fingerprint fp is in slot.
func (x *index) add(fp, slot uint32) {
	if (x.n+1)*4 > len(x.e)*3 {
		x.grow()
	}
	x.put(uint64(fp)<<32 | uint64(slot) + 1)
	x.n++
}

func (x *index) put(e uint64) {
	i := uint32(e>>32) & x.mask
	for x.e[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.e[i] = e
}

func (x *index) grow() {
	old := x.e
	n := max(minIndexCap, 2*len(old))
	x.e, x.mask = make([]uint64, n), uint32(n-1)
	for _, e := range old {
		if e != 0 {
			x.put(e)
		}
	}
}

// del forgets slot, whose bucket has fingerprint fp. It must be there.
func (x *index) del(fp, slot uint32) {
	want := uint64(fp)<<32 | uint64(slot) + 1
	i := fp & x.mask
	for x.e[i] != want {
		if x.e[i] == 0 {
			panic("table: index lost a bucket")
		}
		i = (i + 1) & x.mask
	}
	// Shift back every entry after the hole that may not sit past it: one
	// whose home is not cyclically in (hole, j].
	for j := (i + 1) & x.mask; x.e[j] != 0; j = (j + 1) & x.mask {
		home := uint32(x.e[j]>>32) & x.mask
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.e[i] = x.e[j]
			i = j
		}
	}
	x.e[i] = 0
	x.n--
}
