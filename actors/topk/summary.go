package topk

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"
	"unsafe"
)

// IDBytes is how many bytes of an id an entry stores. An id up to IDBytes
// long is stored whole; a longer one keeps its first idPrefix bytes and a
// 64-bit FNV-1a digest of the whole id (Hash) in the rest, so that two long ids
// sharing a prefix stay apart, and is reported with Entry.Truncated set.
const IDBytes = 64

// idPrefix is how much of a long id an entry keeps as text.
const idPrefix = IDBytes - 8

// probe is an observed key, hashed once for both summaries it may go to.
type probe struct {
	hash  uint64 // Hash(id): its home and fingerprint in an index, and the digest of a long id
	id    string
	label string
	key   *key // instead of id: the key of a front entry leaving the front
}

// Hash returns the hash of id that ObserveHashed takes: 64-bit FNV-1a,
// the same in every process and for every Sketch, so that a caller that
// has hashed the id already (to pick its shard, say) need not hash it again.
func Hash(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
}

// key is how an entry names its id: pointer-free and comparable, so that
// the entries hold no memory of the caller's and a View can use it as a map
// key.
type key struct {
	n  uint32 // the id's full length in bytes
	id [IDBytes]byte
}

func (k *key) set(p *probe) {
	if p.key != nil {
		*k = *p.key
		return
	}
	old := int(min(k.n, IDBytes))
	k.n = uint32(min(len(p.id), math.MaxUint32))
	if len(p.id) <= IDBytes {
		copy(k.id[:], p.id)
		if len(p.id) < old {
			clear(k.id[len(p.id):old]) // the bytes past an id are always 0
		}
		return
	}
	copy(k.id[:idPrefix], p.id)
	putUint64(k.id[idPrefix:], p.hash)
}

func (k *key) matches(p *probe) bool {
	if p.key != nil {
		return *k == *p.key
	}
	if int(k.n) != len(p.id) {
		return false
	}
	if n := len(p.id); n >= 8 && n <= 16 {
		// Two words each, overlapping for fewer than 16 bytes: most ids,
		// compared without a call.
		b := unsafe.Slice(unsafe.StringData(p.id), n)
		return binary.LittleEndian.Uint64(k.id[:]) == binary.LittleEndian.Uint64(b) &&
			binary.LittleEndian.Uint64(k.id[n-8:]) == binary.LittleEndian.Uint64(b[n-8:])
	}
	if len(p.id) <= IDBytes {
		return string(k.id[:len(p.id)]) == p.id
	}
	return string(k.id[:idPrefix]) == p.id[:idPrefix] && getUint64(k.id[idPrefix:]) == p.hash
}

// text returns the id as stored, and whether it was cut to fit.
func (k *key) text() (string, bool) {
	if k.n <= IDBytes {
		return string(k.id[:k.n]), false
	}
	b := k.id[:idPrefix]
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i] // the cut split this character: drop its first bytes
			}
			break
		}
	}
	return string(b), true
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func getUint64(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// entry is one counter of a summary, but for its count, which the summary
// keeps apart so that a scan for the smallest reads one small array.
type entry struct {
	err   uint64 // the summary's minimum when this key took the counter: count−err ≤ true count
	label string
	key   key
	slot  uint16 // where the index holds this counter
}

// summary is one Space-Saving summary (Metwally, Agrawal and El Abbadi,
// 2005) of a stream of weighted keys: len(counts) counters. A tracked key
// adds its weight to its counter; an untracked one takes the counter with
// the smallest count m, which becomes m+weight, with err m. So the counts
// add up to the stream's total weight N; every count is at least its key's
// true weight and at most err more; a key not tracked weighs at most m,
// and m ≤ N/len(counts).
type summary struct {
	total  uint64   // the stream's weight N, saturating
	n      int      // counters in use
	counts []uint64 // per counter, saturating
	ents   []entry
	// index is open addressing with linear probing: a slot holds a key's
	// hash with its low 16 bits replaced by its counter+1 (0: a free
	// slot), so that a probe passes other keys, and a deletion moves
	// them, without reading their entries. A key's home slot is taken
	// from the hash bits above those 16.
	index []uint64
	// atMin marks, once every counter is in use, counters whose count is
	// the smallest: a replacement takes the first one and only an empty
	// set costs a scan, which marks every counter at the new smallest
	// count. Counts only grow, so a mark stays true until its counter
	// grows, which clears it.
	atMin []uint64
}

const counterBits = 0xffff

func (s *summary) reset() {
	s.total, s.n = 0, 0
	clear(s.index)
	clear(s.atMin)
}

// home returns the slot where the probe for a hash (or an index slot's
// value) starts.
func (s *summary) home(h uint64) int { return int(h>>16) & (len(s.index) - 1) }

// add counts weight w > 0 for p.
func (s *summary) add(p *probe, w uint64) {
	s.total = satAdd(s.total, w)
	mask := len(s.index) - 1
	fp := p.hash &^ counterBits
	i := s.home(p.hash)
	for ; s.index[i] != 0; i = (i + 1) & mask {
		x := s.index[i]
		if x&^counterBits != fp {
			continue
		}
		c := int(x&counterBits) - 1
		if e := &s.ents[c]; sameString(e.label, p.label) && e.key.matches(p) {
			s.counts[c] = satAdd(s.counts[c], w)
			s.atMin[c>>6] &^= 1 << (c & 63)
			return
		}
	}
	var c int
	var err uint64
	if s.n < len(s.counts) {
		c = s.n
		s.n++
		s.counts[c] = w
	} else {
		c = s.smallest()
		err = s.counts[c]
		s.counts[c] = satAdd(err, w)
		s.atMin[c>>6] &^= 1 << (c & 63)
		s.unindex(c)
		// The freed slot may lie on p's probe sequence: probe again.
		for i = s.home(p.hash); s.index[i] != 0; i = (i + 1) & mask {
		}
	}
	e := &s.ents[c]
	e.err, e.label, e.slot = err, p.label, uint16(i)
	e.key.set(p)
	s.index[i] = fp | uint64(c+1)
}

// smallest returns the first counter with the smallest count, every
// counter being in use.
func (s *summary) smallest() int {
	for {
		for w, bits := range s.atMin {
			if bits != 0 {
				return w<<6 | lowestBit(bits)
			}
		}
		m := s.counts[0]
		for _, n := range s.counts[1:] {
			m = min(m, n)
		}
		for c, n := range s.counts {
			if n == m {
				s.atMin[c>>6] |= 1 << (c & 63)
			}
		}
	}
}

// lowestBit returns the index of the lowest set bit of x ≠ 0.
func lowestBit(x uint64) int { return bits.TrailingZeros64(x) }

// minimum returns m, the weight above which a key cannot be left out: the
// smallest count when every counter is in use, else 0.
func (s *summary) minimum() uint64 {
	if s.n < len(s.counts) {
		return 0
	}
	return slices.Min(s.counts)
}

// unindex deletes counter c from the index by backward shifting, so that
// no probe sequence is broken and no tombstone is left.
func (s *summary) unindex(c int) {
	mask := len(s.index) - 1
	i := int(s.ents[c].slot)
	for j := i; ; {
		s.index[i] = 0
		for {
			j = (j + 1) & mask
			x := s.index[j]
			if x == 0 {
				return
			}
			// x may fill the hole at i unless its home lies cyclically in (i, j].
			if home := s.home(x); (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				s.index[i] = x
				s.ents[x&counterBits-1].slot = uint16(i)
				i = j
				break
			}
		}
	}
}

// sameString is a == b, with the common case of one string (a label the
// caller passes each time) settled without comparing bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
