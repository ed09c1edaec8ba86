package topk

import (
	"cmp"
	"slices"
	"time"
)

// View merges the summaries of one Metric over one Window, from one Sketch
// or several (a shard's each), and ranks the keys they hold. Its zero value
// is ready to use: Hits over the last Minute, not Partitioned.
//
// Merge copies what it needs (no strings, no allocation once the View has
// grown), so that it can be called while a shard's lock is held; Top does
// the merging, after. A View is not safe for concurrent use.
type View struct {
	Metric Metric
	Window Window
	// Partitioned promises that every key was observed by one Sketch only,
	// as when ids are hashed to shards. A key's count then takes the error
	// of its own Sketch only, not of every merged one, and Bound is the
	// largest Sketch's error instead of their sum.
	Partitioned bool

	recs   []record
	total  uint64   // Σ of the merged summaries' weights
	errors []uint64 // per merged Sketch: Σ of its summaries' minimums
}

// record is one counter of a merged summary.
type record struct {
	sketch int // index into View.errors
	key    key
	label  string
	excess uint64 // count − the summary's minimum
	low    uint64 // count − err: at most the key's true weight in that summary
}

// Entry is one key of a View, its estimated weight and the bounds on it.
type Entry struct {
	ID string // the id, or its first bytes if Truncated
	// Truncated reports an id longer than IDBytes, of which ID holds the
	// first bytes (cut on a UTF-8 boundary); the id was counted whole.
	Truncated bool
	Label     string // the label the id was observed with
	// Count is at least the key's true weight in the window and at most
	// Bound above it (at most Count−Min above it, which is often less).
	Count uint64
	// Min is at most the key's true weight in the window.
	Min uint64
}

// Reset empties v, keeping its settings and its memory.
func (v *View) Reset() {
	v.recs = v.recs[:0]
	v.total = 0
	v.errors = v.errors[:0]
}

// Merge adds the summaries of s that v's Window covers at now, for v's
// Metric, having first moved the keys of its front (Config.Front) into
// them: it writes s, so it needs what Observe needs (the shard's lock). A
// now earlier than the latest time s observed is taken as that time, as
// in Observe.
func (v *View) Merge(s *Sketch, now time.Time) {
	s.flushFront()
	cur := max(floorDiv(now.UnixNano(), int64(width)), s.latest)
	oldest := cur - v.Window.span() + 1
	sk := len(v.errors)
	var errSum uint64
	for i := range s.ivs {
		iv := &s.ivs[i]
		if iv.stamp == noStamp || iv.stamp > cur || iv.stamp < oldest {
			continue
		}
		sm := &iv.hits
		if v.Metric == Denials {
			sm = &iv.denials
		}
		m := sm.minimum()
		errSum = satAdd(errSum, m)
		v.total = satAdd(v.total, sm.total)
		for c := range sm.n {
			e := &sm.ents[c]
			v.recs = append(v.recs, record{sketch: sk, key: e.key, label: e.label, excess: sm.counts[c] - m, low: sm.counts[c] - e.err})
		}
	}
	v.errors = append(v.errors, errSum)
}

// Total returns the weight the merged summaries saw: every hit (Hits) or
// every denied hit (Denials) in the window, exact up to saturation.
func (v *View) Total() uint64 { return v.total }

// Bound returns the most by which any Count exceeds its key's true weight:
// the sum of the merged summaries' smallest counts (for Partitioned, that
// sum within the one Sketch where it is largest). It is at most
// Total/Capacity. A key that is not among the candidates weighs at most
// Bound, so every key weighing more is listed by Top(-1).
func (v *View) Bound() uint64 {
	var b uint64
	for _, e := range v.errors {
		if v.Partitioned {
			b = max(b, e)
		} else {
			b = satAdd(b, e)
		}
	}
	return b
}

// Top returns at most n keys (every candidate when n < 0), heaviest first:
// by Count, then Min, then ID and Label. A key's Count is, for each merged
// summary, its counter there or, where it has none, that summary's smallest
// count (the most it can weigh there unseen); Min adds its counters'
// count−err.
func (v *View) Top(n int) []Entry {
	type agg struct {
		count, low uint64
		sketch     int // the last Sketch whose error the count includes
	}
	type aggKey struct {
		key   key
		label string
	}
	var all uint64 // Σ of every Sketch's error, the count of a key seen nowhere
	for _, e := range v.errors {
		all = satAdd(all, e)
	}
	byKey := make(map[aggKey]*agg, len(v.recs))
	order := make([]aggKey, 0, len(v.recs))
	for i := range v.recs {
		r := &v.recs[i]
		k := aggKey{r.key, r.label}
		a := byKey[k]
		if a == nil {
			a = &agg{sketch: -1}
			if !v.Partitioned {
				a.count = all
			}
			byKey[k] = a
			order = append(order, k)
		}
		if v.Partitioned && a.sketch != r.sketch {
			a.count = satAdd(a.count, v.errors[r.sketch])
			a.sketch = r.sketch
		}
		a.count = satAdd(a.count, r.excess)
		a.low = satAdd(a.low, r.low)
	}
	out := make([]Entry, 0, len(order))
	for _, k := range order {
		a := byKey[k]
		id, cut := k.key.text()
		out = append(out, Entry{ID: id, Truncated: cut, Label: k.label, Count: a.count, Min: a.low})
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Min, a.Min),
			cmp.Compare(a.ID, b.ID), cmp.Compare(a.Label, b.Label))
	})
	if n >= 0 && n < len(out) {
		out = out[:n:n]
	}
	return out
}
