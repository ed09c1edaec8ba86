package table

import (
	"sort"
	"time"
)

// Refund gives back up to req.Hits (> 0) hits to req's bucket, and returns
// the decision a peek would get afterwards. With req.Window (the
// Reservation.Window of the check that counted the hits) it credits only
// that window, and nothing once it is over: a fixed or sliding window only
// while it is still the current one; a token or leaky bucket only the part
// of those hits that has not drained yet. Without it, the current window
// is credited. A refund never takes a bucket below empty (a count below 0,
// a token bucket above full) and never creates a bucket. req.Hits must be
// positive; the other fields are as for Apply.
func (t *Table) Refund(req Request, now time.Time) Decision {
	ns, ms := t.advance(now)
	k := keyOf(&req)
	if g := t.groupOf(&k); g != nil && req.Hits > 0 {
		h := t.hashID(req.ID)
		b := floorDiv(ms, k.widthMs)
		switch {
		case req.Algorithm.gcra():
			t.refundGCRA(g, &k, &req, h, b, ns, ms)
		case req.Window != 0 && req.Window != b*k.widthMs:
			// The hits were counted in a window that is over (or never was).
		default:
			if it, ok := t.find(g, b, h, req.ID); ok {
				c := t.slots.mut(it.slot())
				c.count -= min(req.Hits, c.count)
				c.setModified(ms - b*k.widthMs)
				t.mark(it)
			}
		}
	}
	req.Hits = 0
	return t.Apply(req, now)
}

func (t *Table) refundGCRA(g *group, k *groupKey, req *Request, h uint64, b, ns, ms int64) {
	if req.Limit == 0 {
		return
	}
	e := emission(req.Scale, req.Limit)
	credit := min(req.Hits, req.burst()) * e
	if req.Window != 0 {
		// The hits filled the bucket up to Window; what of them has not
		// drained by now is what there is to give back.
		credit = min(credit, max(req.Window*msNs-ns, 0))
		if credit == 0 {
			return
		}
	}
	it, ok := t.find(g, b, h, req.ID)
	if !ok {
		if it, ok = t.find(g, b-1, h, req.ID); !ok {
			return
		}
	}
	width := k.widthMs * msNs
	tat := max(it.bucket*width+t.slots.cell(it.slot()).aux, ns)
	tat = max(tat-credit, ns)
	it = t.moveTo(g, it, b, h, ms)
	c := t.slots.mut(it.slot())
	c.aux, c.count = tat-b*width, (tat-ns+e-1)/e
	c.setModified(ms - b*k.widthMs)
	t.mark(it)
}

// Reset deletes every bucket of req.ID under req's limit (its current and
// previous windows), so its next hit starts afresh, and returns how many of
// them could still change a decision (see live), as ResetID does: an
// expired bucket it finds, which a sweep had yet to delete or a restart
// did not bring back, is deleted without being counted, so that the count
// is the same whenever sweeps run. Other limits on the same id are
// untouched.
func (t *Table) Reset(req Request, now time.Time) int {
	nowNs, ms := t.advance(now)
	k := keyOf(&req)
	g := t.groupOf(&k)
	if g == nil {
		return 0
	}
	h := t.hashID(req.ID)
	b := floorDiv(ms, k.widthMs)
	n := 0
	for _, w := range []int64{b, b - 1} {
		live, gone := t.deleteBucket(g, w, h, req.ID, nowNs, ms)
		if live {
			n++
		}
		if gone {
			break
		}
	}
	return n
}

// ResetID deletes every bucket of id in namespace ns, under every limit
// of that namespace (each algorithm, scale and size), so that id's next hit
// there starts afresh, and returns how many of them could still change a
// decision (see live), as a Redis key of redis-cell's lives until its
// bucket is full. It looks at the windows Buckets reports; an older bucket
// is expired already. Buckets of id in other namespaces, ad-hoc ones
// included (ns ""), are untouched.
func (t *Table) ResetID(ns, id string, now time.Time) int {
	nowNs, ms := t.advance(now)
	h := t.hashID(id)
	live := 0
	for _, g := range t.byID {
		if g == nil || g.key.ns != ns {
			continue
		}
		k := &g.key
		b := floorDiv(ms, k.widthMs)
		for w := b - k.span(); w <= b; w++ {
			l, gone := t.deleteBucket(g, w, h, id, nowNs, ms)
			if l {
				live++
			}
			if gone {
				break
			}
		}
	}
	return live
}

// deleteBucket deletes the bucket of id (hash h) in window w of g, if it
// has one, journaling the deletion, and reports whether that bucket could
// still change a decision at nowNs (ms), and whether g went with it.
func (t *Table) deleteBucket(g *group, w int64, h uint64, id string, nowNs, ms int64) (live, gone bool) {
	it, ok := t.find(g, w, h, id)
	if !ok {
		return false, false
	}
	live = t.live(g, it, nowNs, ms)
	t.logDelete(g, it)
	return live, t.remove(g, it)
}

// live reports whether bucket it of g could still change a decision at
// nowNs (ms): a window while it (or, sliding, the next) is current, a
// token or leaky bucket until it is full again (its TAT).
func (t *Table) live(g *group, it item, nowNs, ms int64) bool {
	k := &g.key
	if k.alg.gcra() {
		return it.bucket*k.widthMs*msNs+t.slots.cell(it.slot()).aux > nowNs
	}
	return !k.expired(it.bucket, ms, 0)
}

// Bucket is the state of one bucket, as Buckets reports it.
type Bucket struct {
	ID        string
	Namespace string
	// Policy is the limit of the bucket's key: its Limit and Burst are 0
	// with a namespace (a rule's may change), Burst is 0 for the windows.
	Policy
	Window int64 // window number: floor(unix_ms / width), width the scale or a GCRA bucket's refill time
	// Count is the hits counted in the window; for a token or leaky bucket,
	// the tokens in use at its last change.
	Count int64
	// Previous is a sliding window's count of the window before.
	Previous int64
	// FullAt is when a token or leaky bucket is full again (its TAT).
	FullAt     time.Time
	CreatedAt  time.Time // first counted hit in the window, millisecond precision
	ModifiedAt time.Time // last change, millisecond precision
	Expired    bool      // no decision reads it any more; a sweep will delete it
}

// Buckets returns every bucket of id, under every limit, sorted by
// namespace, algorithm, scale, limit, burst and window. It changes nothing.
// It costs a search per limit in use.
func (t *Table) Buckets(id string, now time.Time) []Bucket {
	_, ms := t.advance(now)
	h := t.hashID(id)
	var out []Bucket
	for _, g := range t.byID {
		if g == nil {
			continue
		}
		b := floorDiv(ms, g.key.widthMs)
		for w := b - g.key.span(); w <= b; w++ {
			if it, ok := t.find(g, w, h, id); ok {
				out = append(out, t.bucketOf(g, it, ms))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		switch {
		case a.Namespace != b.Namespace:
			return a.Namespace < b.Namespace
		case a.Algorithm != b.Algorithm:
			return a.Algorithm < b.Algorithm
		case a.Scale != b.Scale:
			return a.Scale < b.Scale
		case a.Limit != b.Limit:
			return a.Limit < b.Limit
		case a.Burst != b.Burst:
			return a.Burst < b.Burst
		}
		return a.Window < b.Window
	})
	return out
}

func (t *Table) bucketOf(g *group, it item, ms int64) Bucket {
	s := t.slots.at(it.slot()) // a copy, its id too: the Bucket outlives the cell
	k := &g.key
	b := Bucket{
		ID: s.id, Namespace: k.ns, Window: it.bucket, Count: s.count,
		Policy:    Policy{Algorithm: k.alg, Scale: time.Duration(k.scaleMs) * time.Millisecond, Limit: k.limit, Burst: k.burst},
		CreatedAt: time.UnixMilli(s.created), ModifiedAt: time.UnixMilli(s.modified),
		Expired: k.expired(it.bucket, ms, 0),
	}
	switch {
	case k.alg == SlidingWindow:
		b.Previous = s.aux
	case k.alg.gcra():
		b.FullAt = time.Unix(0, it.bucket*k.widthMs*msNs+s.aux)
	}
	return b
}

// Get returns the bucket that req would be counted in at now, if it exists.
// It changes nothing.
func (t *Table) Get(req Request, now time.Time) (Bucket, bool) {
	_, ms := t.advance(now)
	k := keyOf(&req)
	g := t.groups[k]
	if g == nil {
		return Bucket{}, false
	}
	h := t.hashID(req.ID)
	b := floorDiv(ms, k.widthMs)
	it, ok := t.find(g, b, h, req.ID)
	if !ok && req.Algorithm.gcra() {
		it, ok = t.find(g, b-1, h, req.ID)
	}
	if !ok {
		return Bucket{}, false
	}
	return t.bucketOf(g, it, ms), true
}
