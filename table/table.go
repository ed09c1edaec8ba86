package table

import (
	"hash/maphash"
	"math"
	"strings"
	"time"

	"github.com/tidwall/btree"
)

// Config tunes a Table. The zero value is ready to use.
type Config struct {
	// BucketTTL keeps a bucket this much longer after it expired, for
	// inspection. It can only delay deletion, never hasten it. Zero deletes a
	// bucket as soon as it can no longer change a decision.
	BucketTTL time.Duration
	// TrackChanges makes the table remember which buckets each Apply
	// changed, for Changes to report (a journal writes them).
	TrackChanges bool
}

// Table holds the buckets of every id. It is not safe for concurrent use:
// one owner calls it, serially. Every method takes the current time; a time
// earlier than one already seen is treated as that later time, so a clock
// that steps back can never reopen a window that was swept.
type Table struct {
	tree  *btree.BTreeG[item] // (group, window, hash, id) → slot
	hint  btree.PathHint
	slots slab
	probe string // the id of the key being searched for (item.slot == probeSlot)

	groups   map[groupKey]*group
	byID     []*group // indexed by group id; nil where the id is free
	freeGIDs []uint32
	due      *btree.BTreeG[dueItem] // groups by the time their oldest window expires
	last     *group                 // the group of the previous Apply: most traffic hits few groups

	seed  maphash.Seed
	ttlMs int64
	nowNs int64 // the latest time seen, in Unix nanoseconds

	track   bool
	dirty   []uint64 // bit per slot: changed since the last Changes
	changed []item   // the buckets whose dirty bit is set, in the order first changed
	rec     []byte   // record buffer reused by Changes
}

// item is one bucket's key in the ordered table. It is fixed-size so that
// comparisons never chase a pointer: the id itself lives in the slot and is
// compared only when two ids of one window share a 64-bit hash.
type item struct {
	gs     uint64 // group id << 32 | slot: the group (algorithm, scale, limit) and the index of the state in Table.slots
	bucket int64  // window number, floor(now_ms / scale_ms)
	hash   uint64 // maphash of the id
}

func mkItem(gid uint32, bucket int64, hash uint64, slot uint32) item {
	return item{gs: uint64(gid)<<32 | uint64(slot), bucket: bucket, hash: hash}
}

func (it item) gid() uint32  { return uint32(it.gs >> 32) }
func (it item) slot() uint32 { return uint32(it.gs) }

// probeSlot marks a search key; its id is Table.probe.
const probeSlot = math.MaxUint32

// group is the set of buckets sharing an algorithm, scale and limit. All
// windows of a group expire in window order, so the expired buckets of a
// group are a prefix of its key range, and one index entry per group (not per
// bucket) is enough to find them.
type group struct {
	key       groupKey
	id        uint32
	n         int   // live buckets in the group
	minBucket int64 // no live bucket of the group has a smaller window number
	due       int64 // Unix ms at which window minBucket expires (TTL included)
	indexed   bool  // whether due is in Table.due
}

type groupKey struct {
	alg     Algorithm
	scaleMs int64
	limit   int64
}

type dueItem struct {
	at  int64
	gid uint32
}

// New returns an empty Table.
func New(cfg Config) *Table {
	t := &Table{
		groups: make(map[groupKey]*group),
		seed:   maphash.MakeSeed(),
		ttlMs:  int64((cfg.BucketTTL + time.Millisecond - 1) / time.Millisecond),
		track:  cfg.TrackChanges,
	}
	opts := btree.Options{NoLocks: true, Degree: 128}
	t.tree = btree.NewBTreeGOptions(t.less, opts)
	t.due = btree.NewBTreeGOptions(func(a, b dueItem) bool {
		if a.at != b.at {
			return a.at < b.at
		}
		return a.gid < b.gid
	}, opts)
	return t
}

func (t *Table) less(a, b item) bool {
	switch {
	case a.gid() != b.gid():
		return a.gid() < b.gid()
	case a.bucket != b.bucket:
		return a.bucket < b.bucket
	case a.hash != b.hash:
		return a.hash < b.hash
	case a.slot() == b.slot():
		return false
	}
	return t.idOf(a.slot()) < t.idOf(b.slot())
}

func (t *Table) idOf(slot uint32) string {
	if slot == probeSlot {
		return t.probe
	}
	return t.slots.at(slot).id
}

// Len returns the number of buckets in the table, expired or not.
func (t *Table) Len() int { return t.tree.Len() }

// advance moves the table's clock to now unless it is already later, and
// returns the table's time in Unix nanoseconds and milliseconds.
func (t *Table) advance(now time.Time) (ns, ms int64) {
	if n := now.UnixNano(); n > t.nowNs {
		t.nowNs = n
	}
	return t.nowNs, floorDiv(t.nowNs, int64(time.Millisecond))
}

// Apply counts req.Hits against the bucket of req.ID in the window that
// holds now, and returns the decision.
//
// A request is checked against the limit on every hit, the first included.
// A cost that does not fit is denied and consumes nothing; a peek
// (Hits == 0) changes nothing and never creates a bucket. req must be valid
// (see Request.Validate); the System facade validates before it asks.
func (t *Table) Apply(req Request, now time.Time) Decision {
	ns, ms := t.advance(now)
	gk := groupKey{alg: req.Algorithm, scaleMs: req.Scale.Milliseconds(), limit: req.Limit}
	b := floorDiv(ms, gk.scaleMs)
	reset := time.Duration((b+1)*gk.scaleMs*int64(time.Millisecond) - ns)
	h := maphash.String(t.seed, req.ID)

	g := t.last
	if g == nil || g.key != gk {
		g = t.groups[gk]
	}
	if g != nil {
		t.last = g
		t.probe = req.ID
		it, ok := t.tree.Get(mkItem(g.id, b, h, probeSlot))
		t.probe = ""
		if ok {
			d := decideFixed(t.slots.at(it.slot()).count, &req, reset)
			if d.Allowed && req.Hits > 0 {
				s := t.slots.mut(it.slot())
				s.count = d.Count
				s.modified = ms
				t.mark(it)
			}
			return d
		}
	}
	d := decideFixed(0, &req, reset)
	if !d.Allowed || req.Hits == 0 {
		return d
	}
	if g == nil {
		g = t.newGroup(gk)
	}
	idx := t.slots.alloc()
	// Clone the id: the caller's string may be a slice of something much
	// larger (a request line) that the table must not keep alive.
	*t.slots.mut(idx) = slot{id: strings.Clone(req.ID), count: d.Count, created: ms, modified: ms}
	t.insert(g, mkItem(g.id, b, h, idx))
	return d
}

// insert puts the new bucket it of group g in the table and the change log.
func (t *Table) insert(g *group, it item) {
	t.tree.SetHint(it, &t.hint)
	g.n++
	if !g.indexed || it.bucket < g.minBucket {
		t.reindex(g, it.bucket)
	}
	t.mark(it)
}

// decideFixed is the fixed-window rule for a window already holding count hits.
func decideFixed(count int64, req *Request, reset time.Duration) Decision {
	d := Decision{Limit: req.Limit, ResetAfter: reset}
	switch {
	case req.Hits == 0:
		d.Allowed = count < req.Limit
	case req.Hits <= req.Limit-count:
		d.Allowed = true
		count += req.Hits
	}
	d.Count = count
	d.Remaining = max(req.Limit-count, 0)
	if !d.Allowed {
		d.RetryAfter = reset
	}
	return d
}

// newGroup registers an empty group for k, reusing a free group id.
func (t *Table) newGroup(k groupKey) *group {
	g := &group{key: k}
	if n := len(t.freeGIDs); n > 0 {
		g.id = t.freeGIDs[n-1]
		t.freeGIDs = t.freeGIDs[:n-1]
	} else {
		g.id = uint32(len(t.byID))
		t.byID = append(t.byID, nil)
	}
	t.byID[g.id] = g
	t.groups[k] = g
	return g
}

// dropGroup forgets g, which holds no bucket, and frees its id.
func (t *Table) dropGroup(g *group) {
	if g.indexed {
		t.due.Delete(dueItem{at: g.due, gid: g.id})
	}
	delete(t.groups, g.key)
	if t.last == g {
		t.last = nil
	}
	t.byID[g.id] = nil
	t.freeGIDs = append(t.freeGIDs, g.id)
}

// reindex records that the oldest live window of g is minBucket.
func (t *Table) reindex(g *group, minBucket int64) {
	if g.indexed {
		t.due.Delete(dueItem{at: g.due, gid: g.id})
	}
	g.minBucket = minBucket
	g.due = (minBucket+1)*g.key.scaleMs + t.ttlMs
	g.indexed = true
	t.due.Set(dueItem{at: g.due, gid: g.id})
}

// DeleteExpired deletes up to max buckets that expired at or before now
// (plus the configured TTL) and returns how many it deleted. A fixed-window
// bucket expires when its window ends: from then on no decision reads it.
// The cost is proportional to the buckets deleted (times log n), not to the
// size of the table.
func (t *Table) DeleteExpired(now time.Time, max int) int {
	_, ms := t.advance(now)
	deleted := 0
	for deleted < max {
		d, ok := t.due.Min()
		if !ok || d.at > ms {
			break
		}
		g := t.byID[d.gid]
		cut := floorDiv(ms-t.ttlMs, g.key.scaleMs) // windows below cut have expired
		t.tree.DeleteAscend(mkItem(g.id, math.MinInt64, 0, probeSlot), func(it item) btree.Action {
			if it.gid() != g.id || it.bucket >= cut || deleted >= max {
				return btree.Stop
			}
			t.unmark(it.slot())
			t.slots.release(it.slot())
			g.n--
			deleted++
			return btree.Delete
		})
		if g.n == 0 {
			t.dropGroup(g)
			continue
		}
		t.tree.Ascend(mkItem(g.id, math.MinInt64, 0, probeSlot), func(it item) bool {
			t.reindex(g, it.bucket)
			return false
		})
	}
	return deleted
}

// Bucket is the state of one bucket, as Get reports it.
type Bucket struct {
	ID         string
	Algorithm  Algorithm
	Scale      time.Duration
	Limit      int64
	Window     int64 // window number: floor(unix_ms / scale_ms)
	Count      int64
	CreatedAt  time.Time // first counted hit in the window, millisecond precision
	ModifiedAt time.Time // last counted hit in the window, millisecond precision
}

// Get returns the bucket that req would be counted in at now, if it exists.
// It changes nothing.
func (t *Table) Get(req Request, now time.Time) (Bucket, bool) {
	g := t.groups[groupKey{alg: req.Algorithm, scaleMs: req.Scale.Milliseconds(), limit: req.Limit}]
	if g == nil {
		return Bucket{}, false
	}
	_, ms := t.advance(now)
	b := floorDiv(ms, g.key.scaleMs)
	t.probe = req.ID
	it, ok := t.tree.Get(mkItem(g.id, b, maphash.String(t.seed, req.ID), probeSlot))
	t.probe = ""
	if !ok {
		return Bucket{}, false
	}
	s := t.slots.at(it.slot())
	return Bucket{
		ID: s.id, Algorithm: g.key.alg, Scale: time.Duration(g.key.scaleMs) * time.Millisecond,
		Limit: g.key.limit, Window: b, Count: s.count,
		CreatedAt: time.UnixMilli(s.created), ModifiedAt: time.UnixMilli(s.modified),
	}, true
}

// floorDiv is a / b rounded toward negative infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
