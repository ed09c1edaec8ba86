package table

import (
	"encoding/binary"
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
	// MaxBuckets caps the buckets the table holds; 0 means no cap. When a
	// new bucket is needed and the table is full, expired buckets go first
	// (the check looks at a few limits' oldest windows for one, so that its
	// cost stays bounded); then, if Evict is set, the bucket closest to expiring is evicted
	// (counted in Stats.Evictions); otherwise the request is denied with
	// Decision.Full (counted in Stats.Rejections) and nothing changes.
	MaxBuckets int
	// Evict selects the evict-oldest policy for a full table; the default
	// is deny-new.
	Evict bool
	// HashKey, if set, keys the id hash of the table's index (Table.Hash)
	// with SipHash-1-3, so that a caller holding the same key computes an
	// id's hash once, for its own use (a shard) and for ApplyHashed. Nil
	// means maphash with HashSeed.
	HashKey *HashKey
	// HashSeed, if set and HashKey is not, is the maphash seed of the id
	// hash, which tables sharing it share: an owner of several tables that
	// needs no hash stable across processes (no journal) hashes an id once
	// for its table and for ApplyHashed. Nil means a seed of the table's own.
	HashSeed *maphash.Seed
}

// Stats counts what a bounded table did when it was full.
type Stats struct {
	Evictions  int64 // live buckets evicted to make room (Config.Evict)
	Rejections int64 // requests denied with Decision.Full
}

// Table holds the buckets of every id. It is not safe for concurrent use:
// one owner calls it, serially. Every method takes the current time; a time
// earlier than one already seen is treated as that later time, so a clock
// that steps back can never reopen a window that was swept.
type Table struct {
	tree  *btree.BTreeG[item] // (group, window, slot): the buckets in window order
	hint  btree.PathHint
	ix    index // (group, window, id) → slot
	slots slab

	groups   map[groupKey]*group
	byID     []*group // indexed by group id; nil where the id is free
	freeGIDs []uint32
	due      *btree.BTreeG[dueItem] // groups by the time their oldest window expires
	last     *group                 // the group of the previous Apply: most traffic hits few groups

	seed  maphash.Seed
	keyed bool   // the id hash is SipHash-1-3 under (k0, k1), not maphash
	k0    uint64 // Config.HashKey
	k1    uint64
	ttlMs int64
	nowNs int64 // the latest time seen, in Unix nanoseconds

	maxBuckets int
	evict      bool
	stats      Stats

	track bool
	dirty []uint64 // bit per slot: changed since the last Changes
	// bindings has a bit per slot: the journal holds the slot's bucket, as
	// keyed now, bound to refOf(slot) (see bound).
	bindings []uint64
	changed  []item // the buckets whose dirty bit is set, in the order first changed
	deleted  []deletion
	rec      []byte       // record buffer reused by Changes
	w        recordWriter // used by Changes

	counted int64 // Unix ms: the Reservation.Window of the last Apply that counted hits

	refs refMap // while records are restored: what their references name

	sweep sweepState // DeleteExpiredSlice's batch

	// An all-or-nothing unit in progress (see Begin).
	inTx        bool
	undo        []undo
	txDeleted   int   // len(deleted) at Begin
	txEvictions int64 // stats.Evictions at Begin
}

// item is one bucket's key in the ordered table: 16 bytes, compared
// without chasing a pointer. Within a window, buckets are in scattered
// slot order; the index, not the tree, finds a bucket by id.
type item struct {
	gs     uint64 // group id << 32 | slot: the group and the index of the state in Table.slots
	bucket int64  // window number, floor(unix_ms / width_ms)
}

func mkItem(gid uint32, bucket int64, slot uint32) item {
	return item{gs: uint64(gid)<<32 | uint64(slot), bucket: bucket}
}

func (it item) gid() uint32  { return uint32(it.gs >> 32) }
func (it item) slot() uint32 { return uint32(it.gs) }

// group is the set of buckets sharing a key (namespace, algorithm, scale,
// and without a namespace limit and burst). All windows of a group expire
// in window order, so the expired buckets of a group are a prefix of its
// key range, and one index entry per group (not per bucket) is enough to
// find them.
type group struct {
	key       groupKey
	id        uint32
	n         int   // live buckets in the group
	minBucket int64 // no live bucket of the group has a smaller window number
	due       int64 // Unix ms at which window minBucket expires (TTL included)
	indexed   bool  // whether due is in Table.due
}

// groupKey names a group.
type groupKey struct {
	ns      string
	alg     Algorithm
	scaleMs int64
	// widthMs is the width of the key windows: the scale, or for a token
	// or leaky bucket whose refill time is longer, that time, so that a
	// bucket is live only in the window of its last change and the next.
	widthMs int64
	limit   int64 // 0 with a namespace: a rule's limit may change
	burst   int64 // the requested Burst; 0 with a namespace or for windows
}

// span is how many windows a bucket stays live from its window's start:
// a fixed window one; a sliding window two (it is the next window's
// previous); a GCRA bucket two (it refills within a width of its last change).
func (k *groupKey) span() int64 {
	if k.alg == FixedWindow {
		return 1
	}
	return 2
}

// expired reports whether a bucket of group k in window w can no longer
// change a decision at nowMs, ttlMs later.
func (k *groupKey) expired(w, nowMs, ttlMs int64) bool {
	return (w+k.span())*k.widthMs+ttlMs <= nowMs
}

// keyOf returns the group key of req.
func keyOf(req *Request) groupKey {
	k := groupKey{ns: req.Namespace, alg: req.Algorithm, scaleMs: req.Scale.Milliseconds()}
	k.widthMs = k.scaleMs
	if req.Algorithm.gcra() && req.Limit > 0 {
		refill := req.burst() * emission(req.Scale, req.Limit) // ns, at most MaxScale
		if w := (refill + msNs - 1) / msNs; w > k.widthMs {
			k.widthMs = w
		}
	}
	if req.Namespace == "" {
		k.limit = req.Limit
		if req.Algorithm.gcra() {
			k.burst = req.Burst
		}
	}
	return k
}

const msNs = int64(time.Millisecond)

type dueItem struct {
	at  int64
	gid uint32
}

// New returns an empty Table.
func New(cfg Config) *Table {
	t := &Table{
		groups:     make(map[groupKey]*group),
		seed:       maphash.MakeSeed(),
		ttlMs:      int64((cfg.BucketTTL + time.Millisecond - 1) / time.Millisecond),
		track:      cfg.TrackChanges,
		maxBuckets: cfg.MaxBuckets,
		evict:      cfg.Evict,
	}
	if cfg.HashSeed != nil {
		t.seed = *cfg.HashSeed
	}
	if k := cfg.HashKey; k != nil {
		t.keyed = true
		t.k0, t.k1 = binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:])
	}
	opts := btree.Options{NoLocks: true, Degree: 128}
	t.tree = btree.NewBTreeGOptions(lessItem, opts)
	t.initSweep()
	t.due = btree.NewBTreeGOptions(func(a, b dueItem) bool {
		if a.at != b.at {
			return a.at < b.at
		}
		return a.gid < b.gid
	}, opts)
	return t
}

func lessItem(a, b item) bool {
	if a.gid() != b.gid() {
		return a.gid() < b.gid()
	}
	if a.bucket != b.bucket {
		return a.bucket < b.bucket
	}
	return scatter(a.slot()) < scatter(b.slot())
}

// scatter is a bijection of uint32 that orders the slots of one window
// pseudo-randomly. New slots are mostly handed out in increasing order, and
// a B-tree filled in key order leaves every node it splits half full; in
// scattered order the nodes stay about 70% full, as for random keys.
func scatter(x uint32) uint32 {
	x *= 0x9e3779b1 // odd: invertible mod 2^32
	return x ^ x>>16
}

// first is the smallest item of group gid.
func first(gid uint32) item { return item{gs: uint64(gid) << 32, bucket: math.MinInt64} }

// Len returns the number of buckets in the table, expired or not.
func (t *Table) Len() int { return t.tree.Len() }

// Stats returns what the table did when it was full.
func (t *Table) Stats() Stats { return t.stats }

// advance moves the table's clock to now unless it is already later, and
// returns the table's time in Unix nanoseconds and milliseconds.
func (t *Table) advance(now time.Time) (ns, ms int64) {
	if n := now.UnixNano(); n > t.nowNs {
		t.nowNs = n
	}
	return t.nowNs, floorDiv(t.nowNs, msNs)
}

// groupOf returns the group of k, or nil.
func (t *Table) groupOf(k *groupKey) *group {
	g := t.last
	if g == nil || g.key != *k {
		g = t.groups[*k]
	}
	if g != nil {
		t.last = g
	}
	return g
}

// hashID returns the hash of id the index is keyed by (see Table.Hash): a
// keyed hash, and with a seed no client knows, so that nobody can craft ids
// that collide in the index.
func (t *Table) hashID(id string) uint64 {
	if t.keyed {
		return sipHash(t.k0, t.k1, id, 1, 3)
	}
	return maphash.String(t.seed, id)
}

// find returns the bucket of id (maphash h) in window b of g.
func (t *Table) find(g *group, b int64, h uint64, id string) (item, bool) {
	x := &t.ix
	if x.n == 0 {
		return item{}, false
	}
	fp := keyFP(h, g.id, b)
	for i := fp & x.mask; ; i = (i + 1) & x.mask {
		e := x.e[i]
		if e == 0 {
			return item{}, false
		}
		if uint32(e>>32) != fp {
			continue
		}
		slot := uint32(e) - 1
		if s := t.slots.at(slot); s.gid == g.id && s.bucket == b && s.id == id {
			return mkItem(g.id, b, slot), true
		}
	}
}

// Apply counts req.Hits against the bucket of req.ID and returns the
// decision, by req.Algorithm.
//
// A request is checked against the limit on every hit, the first included.
// A cost that does not fit is denied and consumes nothing; a peek
// (Hits == 0) changes nothing and never creates a bucket. req must be valid
// (see Request.Validate); the System facade validates before it asks.
func (t *Table) Apply(req Request, now time.Time) Decision {
	return t.apply(&req, t.hashID(req.ID), now)
}

// apply is Apply with h, the hash of req.ID.
func (t *Table) apply(req *Request, h uint64, now time.Time) Decision {
	ns, ms := t.advance(now)
	var k *groupKey
	g := t.sameGroup(req)
	if g != nil {
		k = &g.key
	} else {
		key := keyOf(req)
		k = &key
		g = t.groupOf(k)
	}
	switch {
	case req.Algorithm == SlidingWindow:
		return t.applySliding(g, k, req, h, ns, ms)
	case req.Algorithm.gcra():
		return t.applyGCRA(g, k, req, h, ns, ms)
	}
	return t.applyFixed(g, k, req, h, ns, ms)
}

// Reservation is a Decision and where its hits were counted, so that a
// Refund of them (Request.Window) credits that window and nothing else.
type Reservation struct {
	Decision
	// Window identifies where the hits were counted, in Unix ms; 0 when
	// nothing was counted (a denial, a peek). For the windows it is the
	// window's start; for token and leaky buckets, the time the bucket is
	// full again after these hits (its TAT, rounded down), which is when
	// the last of them has drained.
	Window int64
}

// Reserve is Apply that also says where the hits were counted.
func (t *Table) Reserve(req Request, now time.Time) Reservation {
	t.counted = 0
	d := t.Apply(req, now)
	return Reservation{Decision: d, Window: t.counted}
}

// sameGroup returns the previous request's group if req belongs to it, found
// without building req's key; the windows only (a GCRA key needs its width
// computed). Most traffic hits few groups.
func (t *Table) sameGroup(req *Request) *group {
	g := t.last
	if g == nil || req.Algorithm.gcra() {
		return nil
	}
	k := &g.key
	if k.alg != req.Algorithm || k.scaleMs*msNs != int64(req.Scale) || k.ns != req.Namespace ||
		(req.Namespace == "" && k.limit != req.Limit) {
		return nil
	}
	return g
}

func (t *Table) applyFixed(g *group, k *groupKey, req *Request, h uint64, ns, ms int64) Decision {
	b := floorDiv(ms, k.widthMs)
	reset := (b+1)*k.widthMs*msNs - ns
	if g != nil {
		if it, ok := t.find(g, b, h, req.ID); ok {
			d := decideFixed(t.slots.at(it.slot()).count, req, reset)
			if d.Allowed && req.Hits > 0 {
				t.saveUndo(it.slot())
				s := t.slots.mut(it.slot())
				s.count = d.Count
				s.modified = ms
				t.mark(it)
				t.counted = b * k.widthMs
			}
			return d
		}
	}
	d := decideFixed(0, req, reset)
	if d.Allowed && req.Hits > 0 {
		if !t.create(g, k, b, h, req.ID, slot{count: d.Count}, ms) {
			return t.full(d)
		}
		t.counted = b * k.widthMs
	}
	return d
}

func (t *Table) applySliding(g *group, k *groupKey, req *Request, h uint64, ns, ms int64) Decision {
	b := floorDiv(ms, k.widthMs)
	w := windowState{size: k.widthMs * msNs}
	w.elapsed = ns - b*w.size
	var cur item
	found := false
	if g != nil {
		if cur, found = t.find(g, b, h, req.ID); found {
			s := t.slots.at(cur.slot())
			w.cur, w.prev = s.count, s.aux
		} else if p, ok := t.find(g, b-1, h, req.ID); ok {
			w.prev = t.slots.at(p.slot()).count
		}
	}
	d := w.decide(req)
	if !d.Allowed || req.Hits == 0 {
		return d
	}
	t.counted = b * k.widthMs
	if found {
		t.saveUndo(cur.slot())
		s := t.slots.mut(cur.slot())
		s.count += req.Hits
		s.modified = ms
		t.mark(cur)
		return d
	}
	// The previous window's count is final: keep it beside the new count,
	// so later hits in this window need one search, not two.
	if !t.create(g, k, b, h, req.ID, slot{count: req.Hits, aux: w.prev}, ms) {
		t.counted = 0
		return t.full(d)
	}
	return d
}

func (t *Table) applyGCRA(g *group, k *groupKey, req *Request, h uint64, ns, ms int64) Decision {
	burst := req.burst()
	if req.Limit == 0 {
		// No rate: nothing ever fits. Ask again after a scale.
		return Decision{Limit: burst, Remaining: 0, RetryAfter: req.Scale}
	}
	width := k.widthMs * msNs
	b := floorDiv(ms, k.widthMs)
	c := gcraState{emission: emission(req.Scale, req.Limit), burst: burst, tat: ns}
	it, found := item{}, false
	if g != nil {
		// A bucket lives in the window of its last change: this one or
		// the one before.
		if it, found = t.find(g, b, h, req.ID); !found {
			it, found = t.find(g, b-1, h, req.ID)
		}
		if found {
			c.tat = max(it.bucket*width+t.slots.at(it.slot()).aux, ns)
		}
	}
	d := c.decide(req, ns)
	if !d.Allowed || req.Hits == 0 {
		return d
	}
	tat := c.tat + req.Hits*c.emission
	t.counted = floorDiv(tat, msNs)
	if !found {
		if !t.create(g, k, b, h, req.ID, slot{count: d.Count, aux: tat - b*width}, ms) {
			t.counted = 0
			return t.full(d)
		}
		return d
	}
	t.saveUndo(it.slot())
	it = t.moveTo(g, it, b, h, ms)
	s := t.slots.mut(it.slot())
	s.count, s.aux, s.modified = d.Count, tat-b*width, ms
	t.mark(it)
	return d
}

// moveTo moves bucket it of g, whose id has maphash h, to window b, where
// its next state belongs, and returns its new key. The bucket keeps its
// slot; its old key is journaled as deleted.
func (t *Table) moveTo(g *group, it item, b int64, h uint64, ms int64) item {
	if it.bucket == b {
		return it
	}
	t.logDelete(g, it) // and its reference is unbound: its key changes
	t.tree.Delete(it)
	moved := it
	moved.bucket = b
	t.tree.SetHint(moved, &t.hint)
	s := t.slots.mut(it.slot())
	t.ix.del(s.fp, it.slot())
	s.created, s.bucket, s.fp = ms, b, keyFP(h, g.id, b)
	t.ix.add(s.fp, it.slot())
	t.rekey(it, moved)
	return moved
}

// create inserts a new bucket of state s for id in window b, creating its
// group if g is nil. It reports false, changing nothing, when the table is
// full and the policy is deny-new.
func (t *Table) create(g *group, k *groupKey, b int64, h uint64, id string, s slot, ms int64) bool {
	if t.maxBuckets > 0 && t.tree.Len() >= t.maxBuckets && !t.makeRoom(ms) {
		return false
	}
	if g == nil || t.byID[g.id] != g {
		// A new group, or one that making room dropped.
		if g = t.groups[*k]; g == nil {
			g = t.newGroup(*k)
		}
		t.last = g
	}
	idx := t.slots.alloc()
	// Clone the id: the caller's string may be a slice of something much
	// larger (a request line) that the table must not keep alive.
	s.id = strings.Clone(id)
	s.created, s.modified = ms, ms
	s.gid, s.bucket, s.fp = g.id, b, keyFP(h, g.id, b)
	*t.slots.mut(idx) = s
	t.ix.add(s.fp, idx)
	t.insert(g, mkItem(g.id, b, idx))
	if t.inTx {
		t.undo = append(t.undo, undo{kind: undoCreated, slot: idx})
	}
	return true
}

// makeRoomGroups bounds the limits a full table looks at, on the check
// path, for an expired bucket to reclaim. A limit whose oldest window was
// emptied by a reset or a move can be due without holding an expired
// bucket; looking at it moves it to its real due time, so a later look
// goes further.
const makeRoomGroups = 8

// makeRoom frees one bucket in a full table: an expired one, or with the
// evict policy the one closest to expiring. It reports whether it did.
func (t *Table) makeRoom(ms int64) bool {
	if t.DeleteExpiredSlice(time.UnixMilli(ms), Slice{Max: 1, Groups: makeRoomGroups}).Deleted == 1 {
		return true
	}
	if !t.evict {
		return false
	}
	d, ok := t.due.Min()
	if !ok {
		return false
	}
	g := t.byID[d.gid]
	var victim item
	t.tree.Ascend(first(g.id), func(it item) bool {
		victim = it
		return false
	})
	if t.inTx {
		t.undo = append(t.undo, undo{kind: undoEvicted, prev: *t.slots.at(victim.slot()), key: g.key})
	}
	t.logDelete(g, victim)
	t.remove(g, victim)
	t.stats.Evictions++
	return true
}

// fullRetry is the RetryAfter of a request refused by a full table: room
// comes back as buckets expire and sweeps run, not at a time the table can
// name, so the caller is asked to try again soon.
const fullRetry = time.Second

// full turns d into the denial of a request that found the table full.
func (t *Table) full(d Decision) Decision {
	t.stats.Rejections++
	d.Allowed, d.Full = false, true
	d.Count, d.Remaining = 0, d.Limit
	d.RetryAfter = fullRetry
	return d
}

// insert puts the new bucket it of group g in the tree and the change log.
func (t *Table) insert(g *group, it item) {
	t.tree.SetHint(it, &t.hint)
	g.n++
	if !g.indexed || it.bucket < g.minBucket {
		t.reindex(g, it.bucket)
	}
	t.mark(it)
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
	g.due = (minBucket+g.key.span())*g.key.widthMs + t.ttlMs
	g.indexed = true
	t.due.Set(dueItem{at: g.due, gid: g.id})
}

// remove deletes one bucket of group g. It reports whether that was the
// group's last bucket, so that the group is gone too.
func (t *Table) remove(g *group, it item) bool {
	t.tree.Delete(it)
	t.release(it.slot())
	if g.n--; g.n == 0 {
		t.dropGroup(g)
		return true
	}
	// g's index entry may now point at a window with no bucket left; it is a
	// lower bound still, and DeleteExpired moves it on when it comes due.
	return false
}

// DeleteExpired deletes up to max buckets that expired at or before now
// (plus the configured TTL) and returns how many it deleted. A bucket
// expires when no decision can read it any more: a fixed window when it
// ends, a sliding window when the next one ends, a token or leaky bucket
// when it has refilled. The cost is proportional to the buckets deleted
// (times log n), not to the size of the table.
func (t *Table) DeleteExpired(now time.Time, max int) int {
	return t.DeleteExpiredSlice(now, Slice{Max: max}).Deleted
}

// SliceCheck is how many units of work (deletions, and limits looked at)
// DeleteExpiredSlice does between two calls of Slice.Over.
const SliceCheck = 64

// Slice bounds one DeleteExpiredSlice call by count and by time, so that a
// sweep can hold its table for a bounded while and let checks in between
// slices. The table reads no clock: the caller's Over says when the time
// is up.
type Slice struct {
	// Max is the most buckets the slice deletes; 0 or less deletes none.
	Max int
	// Groups, if positive, bounds how many limits' oldest windows the
	// slice looks at, whether or not they hold expired buckets.
	Groups int
	// Over, if set, is called after every SliceCheck units of work (a
	// bucket deleted, or a limit looked at); when it returns true the
	// slice ends there. Typically it compares a monotonic clock with a
	// deadline.
	Over func() bool
}

// Swept is what one DeleteExpiredSlice call did.
type Swept struct {
	Deleted int // buckets deleted
	Groups  int // limits whose oldest window was looked at
	// More reports that the slice ended on its bounds (Max, Groups or
	// Over) while expired buckets may remain: another slice is due. False
	// means every bucket expired at now is gone.
	More bool
}

// sweepBatch is how many buckets DeleteExpiredSlice deletes at once: it
// loads their slots and index entries together first, so that their cache
// misses overlap instead of coming one after the other.
const sweepBatch = 64

// DeleteExpiredSlice is DeleteExpired bounded by s: it deletes buckets
// expired at now, oldest limits first, until none is left or a bound of s
// is reached. Its cost is proportional to what it deletes and looks at,
// and between two calls of s.Over it does at most SliceCheck units of
// work.
func (t *Table) DeleteExpiredSlice(now time.Time, s Slice) Swept {
	_, ms := t.advance(now)
	var r Swept
	work := 0 // units since Over was last called
	over := func() bool {
		if s.Over == nil || work < SliceCheck {
			return false
		}
		work = 0
		return s.Over()
	}
	for {
		d, ok := t.due.Min()
		if !ok || d.at > ms {
			return r
		}
		if r.Deleted >= s.Max || s.Groups > 0 && r.Groups >= s.Groups || over() {
			r.More = true
			return r
		}
		r.Groups++
		work++
		g := t.byID[d.gid]
		// Windows below cut have expired.
		cut := floorDiv(ms-t.ttlMs, g.key.widthMs) - g.key.span() + 1
		stop := false
		for !stop {
			k := t.deleteBatch(g, cut, min(sweepBatch, s.Max-r.Deleted))
			r.Deleted += k
			work += k
			if g.n == 0 || k == 0 {
				break
			}
			stop = r.Deleted >= s.Max || over()
		}
		if g.n == 0 {
			t.dropGroup(g)
		} else {
			t.tree.Ascend(first(g.id), func(it item) bool {
				t.reindex(g, it.bucket)
				return false
			})
		}
		if stop {
			r.More = true
			return r
		}
	}
}

// deleteBatch deletes up to n (at most sweepBatch) of the oldest buckets
// of g whose window is below cut, and returns how many it deleted. It
// first collects them and loads their slots and then their index
// entries, each pass a run of independent loads that the CPU overlaps,
// so that deleting them finds both in the cache.
func (t *Table) deleteBatch(g *group, cut int64, n int) int {
	b := &t.sweep
	b.gid, b.cut, b.want, b.batch = g.id, cut, n, b.buf[:0]
	t.tree.Ascend(first(g.id), b.collect)
	k := len(b.batch)
	if k == 0 {
		return 0
	}
	for i, it := range b.batch {
		b.fps[i] = t.slots.at(it.slot()).fp
	}
	var sink uint64
	for _, fp := range b.fps[:k] {
		sink += t.ix.e[fp&t.ix.mask]
	}
	b.sink = sink
	b.left = k
	t.tree.DeleteAscend(first(g.id), b.delete)
	g.n -= k
	return k
}

// sweepState is the state of deleteBatch, kept in the Table with the
// callbacks it gives the tree, so that a sweep allocates nothing.
type sweepState struct {
	buf     [sweepBatch]item
	fps     [sweepBatch]uint32
	batch   []item
	gid     uint32
	cut     int64
	want    int
	left    int
	sink    uint64 // keeps the loads of a batch's index entries
	collect func(item) bool
	delete  func(item) btree.Action
}

// initSweep binds the sweep's tree callbacks to t.
func (t *Table) initSweep() {
	b := &t.sweep
	b.collect = func(it item) bool {
		if it.gid() != b.gid || it.bucket >= b.cut || len(b.batch) >= b.want {
			return false
		}
		b.batch = append(b.batch, it)
		return true
	}
	b.delete = func(it item) btree.Action {
		if b.left == 0 {
			return btree.Stop
		}
		t.release(it.slot())
		b.left--
		return btree.Delete
	}
}

// release frees slot i, which the tree no longer holds: out of the index
// and the change log, back to the slab.
func (t *Table) release(i uint32) {
	t.ix.del(t.slots.at(i).fp, i)
	t.unmark(i)
	t.unbind(i)
	t.releaseRef(i)
	t.slots.release(i)
}

// floorDiv is a / b rounded toward negative infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
