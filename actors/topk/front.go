package topk

import "unsafe"

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

// frontWays is how many keys one set of the front holds.
const frontWays = 4

// MaxFront is the largest Config.Front.
const MaxFront = 1 << 16

// frontEntry is one key of the front and the weight observed for it since
// it came in; hits 0 marks a free entry.
type frontEntry struct {
	hash          uint64
	hits, denials uint64
	label         string
	key           key
}

// frontSize returns the entries of a front of at least n keys: a power of
// two, at least frontWays.
func frontSize(n int) int {
	size := frontWays
	for size < n {
		size <<= 1
	}
	return size
}

// frontAdd counts weight w for p in the front (by denials too if denied),
// moving a key out to iv's summaries if p needs its place.
func (s *Sketch) frontAdd(iv *interval, p *probe, w uint64, denied bool) {
	ways := (*[frontWays]frontEntry)(s.front[int(p.hash>>48)&s.frontSets*frontWays:])
	for i := range ways {
		if e := &ways[i]; e.hash == p.hash && e.hits != 0 && sameString(e.label, p.label) && e.key.matches(p) {
			e.hits = satAdd(e.hits, w)
			if denied {
				e.denials = satAdd(e.denials, w)
			}
			return
		}
	}
	v := 0
	for i := 1; i < frontWays; i++ {
		if ways[i].hits < ways[v].hits {
			v = i // the lightest goes; a free entry (0) first
		}
	}
	e := &ways[v]
	if e.hits != 0 {
		s.flushEntry(iv, e)
	}
	e.hash, e.label, e.hits, e.denials = p.hash, p.label, w, 0
	if denied {
		e.denials = w
	}
	e.key.set(p)
}

// flushEntry adds front entry e's weights to iv's summaries and frees it.
func (s *Sketch) flushEntry(iv *interval, e *frontEntry) {
	p := probe{hash: e.hash, label: e.label, key: &e.key}
	iv.hits.add(&p, e.hits)
	if e.denials != 0 {
		iv.denials.add(&p, e.denials)
	}
	e.hits, e.denials = 0, 0
}

// flushFront moves every key of the front into the summaries of the
// latest interval.
func (s *Sketch) flushFront() {
	if s.cur == nil {
		return // nothing observed yet
	}
	for i := range s.front {
		if e := &s.front[i]; e.hits != 0 {
			s.flushEntry(s.cur, e)
		}
	}
}

// frontBytes is the memory of the front.
func (s *Sketch) frontBytes() int { return len(s.front) * int(unsafe.Sizeof(frontEntry{})) }
