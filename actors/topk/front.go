package topk

import (
	"hash/maphash"
	"math"
	"unsafe"
)

// The front (Config.Front) is a small set-associative cache of the keys
// observed last, each with the weight observed since it came in: an
// Observe of a key in the front only adds to it there. A key that leaves
// the front (another key needs its place) takes its weight into the
// summaries of the current interval, as one weighted Observe would, and so
// does every key of the front before the interval changes and before a
// View merges the Sketch: the summaries, hence every View, are what they
// would be had the weights been observed in the order they reach them, so
// every guarantee holds. Repeated ids then cost a probe of one set of the
// front instead of two summaries; an id new to the front costs its
// set's lightest key's move into the summaries.
//
// A set is one 64-byte line: its keys' tags and weights. A key is known in
// the front by its tag alone, the caller's seeded 64-bit hash of the id
// (see ObserveHashed) mixed with a seeded hash of its label (labelMix), so
// that a repeat reads one line and no id: two keys share a tag with
// probability 2^-64, whatever the ids and labels. The key itself (its id,
// label and Hash) sits apart, written when it comes in and read when it
// leaves. The set of a key comes from the caller's hash before the label
// is mixed in (frontSetOf), so that the caller can ask for the line before
// it observes (Prefetch); one id's labels share a set.

// frontWays is how many keys one set of the front holds.
const frontWays = 4

// MaxFront is the largest Config.Front.
const MaxFront = 1 << 16

// frontSet is one set of the front, a cache line: the tags of its keys
// and the weights observed for them since they came in; hits 0 marks a
// free way. Weights are 32-bit: a key leaves for the summaries before its
// hits would pass 2^32-1, and a larger weight goes to them directly.
type frontSet struct {
	tags    [frontWays]uint64
	hits    [frontWays]uint32
	denials [frontWays]uint32
}

// frontKey is the key in one way of the front: what it takes with it into
// the summaries.
type frontKey struct {
	hash  uint64 // Hash(id)
	label string
	key   key
}

// frontSize returns the keys of a front of at least n keys: a power of
// two, at least frontWays.
func frontSize(n int) int {
	size := frontWays
	for size < n {
		size <<= 1
	}
	return size
}

// labelMix returns what label adds to a tag: its seeded hash, kept for the
// last label seen, as most checks of a shard share a few labels.
func (s *Sketch) labelMix(label string) uint64 {
	if !sameString(label, s.lastLabel) || !s.mixed {
		s.lastLabel, s.lastMix, s.mixed = label, maphash.String(s.seed, label), true
	}
	return s.lastMix
}

// frontSetOf returns the index of the front's set that holds the keys of
// an id of hash tag (the caller's, before labelMix): its top 16 bits
// (MaxFront/frontWays sets at most) masked with frontSets.
func (s *Sketch) frontSetOf(tag uint64) int { return int(tag>>48) & s.frontSets }

// Prefetch asks the processor for the line of the front that an
// ObserveHashed of tag will write, for writing, and returns at once: a
// caller with other work to do before it observes (deciding the check)
// has the line fetched meanwhile, instead of waiting for it then, as it
// would for a line another core wrote last. It changes nothing: a hint,
// which a Sketch without a front, or a processor without the
// instruction, ignores.
func (s *Sketch) Prefetch(tag uint64) {
	if canPrefetchW && s.front != nil {
		// frontSetOf(tag), written out so that Prefetch is inlined.
		prefetchW(unsafe.Pointer(&s.front[int(tag>>48)&s.frontSets]))
	}
}

// frontHit adds weight w (by denials too if denied) to the key of tag in
// set si of the front and reports whether it did: not when the key is not
// there, nor when its weight would pass 2^32-1 (frontAdd then takes it).
func (s *Sketch) frontHit(si int, tag, w uint64, denied bool) bool {
	set := &s.front[si]
	for i := range set.tags {
		if set.tags[i] == tag && set.hits[i] != 0 {
			if uint64(set.hits[i])+w > math.MaxUint32 {
				return false
			}
			set.hits[i] += uint32(w)
			if denied {
				set.denials[i] += uint32(w)
			}
			return true
		}
	}
	return false
}

// frontAdd counts weight w for p (of tag tag) in set si of the front, by
// denials too if denied, moving a key out to iv's summaries if p needs its
// place.
func (s *Sketch) frontAdd(iv *interval, p *probe, si int, tag, w uint64, denied bool) {
	if w > math.MaxUint32 {
		s.summariesAdd(iv, p, w, denied)
		return
	}
	set := &s.front[si]
	for i := range set.tags {
		if set.tags[i] == tag && set.hits[i] != 0 {
			if uint64(set.hits[i])+w > math.MaxUint32 {
				s.flushWay(iv, si, i)
				break // taken in again below
			}
			set.hits[i] += uint32(w)
			if denied {
				set.denials[i] += uint32(w)
			}
			return
		}
	}
	v := 0
	for i := 1; i < frontWays; i++ {
		if set.hits[i] < set.hits[v] {
			v = i // the lightest goes; a free way (0) first
		}
	}
	if set.hits[v] != 0 {
		s.flushWay(iv, si, v)
	}
	set.tags[v], set.hits[v], set.denials[v] = tag, uint32(w), 0
	if denied {
		set.denials[v] = uint32(w)
	}
	k := &s.frontKeys[si*frontWays+v]
	k.hash, k.label = p.hash, p.label
	k.key.set(p)
}

// summariesAdd counts weight w for p in iv's summaries.
func (s *Sketch) summariesAdd(iv *interval, p *probe, w uint64, denied bool) {
	iv.hits.add(p, w)
	if denied {
		iv.denials.add(p, w)
	}
}

// flushWay adds way i of set si's weights to iv's summaries and frees it.
func (s *Sketch) flushWay(iv *interval, si, i int) {
	set := &s.front[si]
	k := &s.frontKeys[si*frontWays+i]
	p := probe{hash: k.hash, label: k.label, key: &k.key}
	iv.hits.add(&p, uint64(set.hits[i]))
	if set.denials[i] != 0 {
		iv.denials.add(&p, uint64(set.denials[i]))
	}
	set.hits[i], set.denials[i] = 0, 0
}

// flushFront moves every key of the front into the summaries of the
// latest interval.
func (s *Sketch) flushFront() {
	if s.cur == nil {
		return // nothing observed yet
	}
	for si := range s.front {
		for i := range frontWays {
			if s.front[si].hits[i] != 0 {
				s.flushWay(s.cur, si, i)
			}
		}
	}
}

// frontBytes is the memory of the front.
func (s *Sketch) frontBytes() int {
	return len(s.front)*int(unsafe.Sizeof(frontSet{})) + len(s.frontKeys)*int(unsafe.Sizeof(frontKey{}))
}
