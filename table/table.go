package table

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
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
	ix    indexed // the buckets the windows' indexes find
	slots slab    // the buckets' cells
	ids   arena   // the buckets' ids
	n     int     // buckets

	// wins holds every window of every group, by window id; a group lists
	// its windows in order, and a window the cells of its buckets.
	wins     []window
	freeWins []uint32
	tree     keyOrder // the buckets in key order, walked through the windows

	groups   map[groupKey]*group
	byID     []*group // indexed by group id; nil where the id is free
	freeGIDs []uint32
	due      *btree.BTreeG[dueItem] // groups by the time their oldest window expires
	last     *group                 // the group of the previous Apply: most traffic hits few groups

	// nowNs and rewrites, which most checks write, are on one cache line
	// with the fields before and after, which most checks read
	// (TestRewriteWritesFewLines).
	nowNs    int64  // the latest time seen, in Unix nanoseconds
	rewrites uint64 // of tails: the generation of the last (see writeTail)
	seed     maphash.Seed
	keyed    bool   // the id hash is SipHash-1-3 under (k0, k1), not maphash
	k0       uint64 // Config.HashKey
	k1       uint64
	ttlMs    int64

	maxBuckets int
	evict      bool
	stats      Stats

	track bool
	dirty []uint64 // bit per slot: changed since the last Changes
	// bindings has a bit per slot: the journal holds the slot's bucket, as
	// keyed now, bound to refOf(slot) (see bound).
	bindings []uint64
	// homes has, per slot, where the bucket's tail is in the journal's
	// current segment (ChangesTo), 0 if it has none; homeEpoch is the
	// journal's epoch the positions are of.
	homes     []uint32
	homeEpoch uint64
	log       TailLog // the last ChangesTo's
	changed   []item  // the buckets whose dirty bit is set, in the order first changed
	deleted   []deletion
	rec       []byte       // record buffer reused by Changes
	w         recordWriter // used by Changes

	refs     refMap         // while records are restored: what their references name
	dec      decoded        // Restore's entry, kept here so that a replay does not allocate per record
	pend     []pendingEntry // the entries of the record Restore is applying
	pendKeys []groupKey     // their group keys

	// An all-or-nothing unit in progress (see Begin).
	inTx        bool
	undo        []undo
	txDeleted   int   // len(deleted) at Begin
	txEvictions int64 // stats.Evictions at Begin
}

// item names one bucket: its group, window and slot.
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
// in window order, so the expired buckets of a group are its oldest
// windows, and one index entry per group (not per bucket) is enough to
// find them.
type group struct {
	key       groupKey
	id        uint32
	n         int    // live buckets in the group
	wins      []gwin // the group's windows that hold a bucket, oldest first
	minBucket int64  // no live bucket of the group has a smaller window number
	due       int64  // Unix ms at which window minBucket expires (TTL included)
	indexed   bool   // whether due is in Table.due
}

// window is the buckets of one group in one window: a list of cells,
// linked through them, so that a sweep deletes a whole window without
// searching for its buckets and a bucket costs no tree entry to keep the
// table in window order; and a hash index of them by id.
//
// A sweep does not take the buckets it deletes out of their window's
// index: only expired windows are swept, and once expired a window
// never gains a bucket again, so its index goes whole with its last
// bucket. The entries of swept buckets left meanwhile name free or reused
// slots, which find tells apart by the cell's window (a restored eviction
// may bring back the same bucket in the same slot, which its entry then
// names rightly).
type window struct {
	bucket int64  // window number
	gid    uint32 // group id
	head   uint32 // slot+1 of the first cell; 0: none
	n      uint32 // cells in the list
	ix     index  // the window's buckets, by id
}

// indexed counts the buckets that the windows' indexes find: all of them.
type indexed struct{ n int }

// gwin is one window of a group's list.
type gwin struct {
	bucket int64
	id     uint32 // index in Table.wins
}

// windowAt returns the window of g (width ms wide, g's key's widthMs) that
// holds the time ms, floorDiv(ms, width): without the division when ms is
// in g's latest window, as for most checks (g may be nil).
func (g *group) windowAt(ms, width int64) int64 {
	if g != nil && len(g.wins) > 0 {
		if b := g.wins[len(g.wins)-1].bucket; b*width <= ms && ms-b*width < width {
			return b
		}
	}
	return floorDiv(ms, width)
}

// windowOf returns the id of g's window b, if it holds a bucket. The
// current window is the last: the search starts there.
func (g *group) windowOf(b int64) (uint32, bool) {
	for i := len(g.wins) - 1; i >= 0; i-- {
		switch w := &g.wins[i]; {
		case w.bucket == b:
			return w.id, true
		case w.bucket < b:
			return 0, false
		}
	}
	return 0, false
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
		wins:       make([]window, 0, 16),
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
	t.slots.t = t
	t.tree = keyOrder{t}
	opts := btree.Options{NoLocks: true, Degree: 128}
	t.due = btree.NewBTreeGOptions(func(a, b dueItem) bool {
		if a.at != b.at {
			return a.at < b.at
		}
		return a.gid < b.gid
	}, opts)
	return t
}

// keyOrder walks the buckets of a table in key order: by group id, window
// number, and within a window in the order of its list.
type keyOrder struct{ t *Table }

// Len returns the number of buckets.
func (o keyOrder) Len() int { return o.t.n }

// Scan calls fn with every bucket in key order until it returns false. fn
// must not change the table.
func (o keyOrder) Scan(fn func(item) bool) {
	t := o.t
	for _, g := range t.byID {
		if g == nil {
			continue
		}
		for _, gw := range g.wins {
			for s := t.wins[gw.id].head; s != 0; s = t.slots.cell(s - 1).next {
				if !fn(mkItem(g.id, gw.bucket, s-1)) {
					return
				}
			}
		}
	}
}

// Len returns the number of buckets in the table, expired or not.
func (t *Table) Len() int { return t.n }

// Stats returns what the table did when it was full.
func (t *Table) Stats() Stats { return t.stats }

// advance moves the table's clock to now unless it is already later, and
// returns the table's time in Unix nanoseconds and milliseconds.
func (t *Table) advance(now time.Time) (ns, ms int64) { return t.advanceTo(now.UnixNano()) }

// advanceTo is advance at the time n, in Unix ns.
func (t *Table) advanceTo(n int64) (ns, ms int64) {
	if n > t.nowNs {
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

// find returns the bucket of id (hash h) in window b of g.
func (t *Table) find(g *group, b int64, h uint64, id string) (item, bool) {
	w, ok := g.windowOf(b)
	if !ok {
		return item{}, false
	}
	x := &t.wins[w].ix
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
		if c := t.slots.cell(slot); c.win == w && c.hasID(&t.ids, id) {
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
	var d Decision
	var win int64
	t.apply(&d, &win, &req, t.hashID(req.ID), now.UnixNano())
	return d
}

// apply is Apply with h, the hash of req.ID, deciding into d. The
// decision is written in place all the way down (applyFixed, decide...),
// never returned by value: a Decision is too large to stay in registers,
// and each copy of a returned one read back with 16-byte loads what 8-byte
// stores had just written, most likely a stall each (a profile put the
// time on those copies; BenchmarkApply at 1k keys went from 100 to 72 ns
// a check without them).
//
// win receives the Reservation.Window of the hits, or 0 when none were
// counted: written through a pointer into the caller's answer, not kept
// in the table, whose header lines every check of the shard reads (a
// field written there at each check took its line from the other core:
// BenchmarkCheck system/p=1, 15 alternating rounds, median 152.0 → 147.0
// ns a check).
func (t *Table) apply(d *Decision, win *int64, req *Request, h uint64, unixNano int64) {
	*win = 0
	ns, ms := t.advanceTo(unixNano)
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
		t.applySliding(d, win, g, k, req, h, ns, ms)
	case req.Algorithm.gcra():
		t.applyGCRA(d, win, g, k, req, h, ns, ms)
	default:
		t.applyFixed(d, win, g, k, req, h, ns, ms)
	}
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
	var r Reservation
	t.ReserveHashedTo(&r, &req, t.hashID(req.ID), now)
	return r
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

func (t *Table) applyFixed(d *Decision, win *int64, g *group, k *groupKey, req *Request, h uint64, ns, ms int64) {
	b := g.windowAt(ms, k.widthMs)
	reset := (b+1)*k.widthMs*msNs - ns
	if g != nil {
		if it, ok := t.find(g, b, h, req.ID); ok {
			decideFixed(d, t.slots.cell(it.slot()).count, req, reset)
			if d.Allowed && req.Hits > 0 {
				t.saveUndo(it.slot())
				c := t.slots.mut(it.slot())
				c.count = d.Count
				c.setModified(ms - b*k.widthMs)
				t.mark(it)
				*win = b * k.widthMs
			}
			return
		}
	}
	decideFixed(d, 0, req, reset)
	if d.Allowed && req.Hits > 0 {
		if !t.create(g, k, b, h, req.ID, d.Count, 0, ms) {
			t.full(d)
			return
		}
		*win = b * k.widthMs
	}
}

func (t *Table) applySliding(d *Decision, win *int64, g *group, k *groupKey, req *Request, h uint64, ns, ms int64) {
	b := g.windowAt(ms, k.widthMs)
	w := windowState{size: k.widthMs * msNs}
	w.elapsed = ns - b*w.size
	var cur item
	found := false
	if g != nil {
		if cur, found = t.find(g, b, h, req.ID); found {
			c := t.slots.cell(cur.slot())
			w.cur, w.prev = c.count, c.aux
		} else if p, ok := t.find(g, b-1, h, req.ID); ok {
			w.prev = t.slots.cell(p.slot()).count
		}
	}
	w.decide(d, req)
	if !d.Allowed || req.Hits == 0 {
		return
	}
	*win = b * k.widthMs
	if found {
		t.saveUndo(cur.slot())
		c := t.slots.mut(cur.slot())
		c.count += req.Hits
		c.setModified(ms - b*k.widthMs)
		t.mark(cur)
		return
	}
	// The previous window's count is final: keep it beside the new count,
	// so later hits in this window need one search, not two.
	if !t.create(g, k, b, h, req.ID, req.Hits, w.prev, ms) {
		*win = 0
		t.full(d)
	}
}

func (t *Table) applyGCRA(d *Decision, win *int64, g *group, k *groupKey, req *Request, h uint64, ns, ms int64) {
	burst := req.burst()
	if req.Limit == 0 {
		// No rate: nothing ever fits. Ask again after a scale.
		*d = Decision{Limit: burst, Remaining: 0, RetryAfter: req.Scale}
		return
	}
	width := k.widthMs * msNs
	b := g.windowAt(ms, k.widthMs)
	c := gcraState{emission: emission(req.Scale, req.Limit), burst: burst, tat: ns}
	it, found := item{}, false
	if g != nil {
		// A bucket lives in the window of its last change: this one or
		// the one before.
		if it, found = t.find(g, b, h, req.ID); !found {
			it, found = t.find(g, b-1, h, req.ID)
		}
		if found {
			c.tat = max(it.bucket*width+t.slots.cell(it.slot()).aux, ns)
		}
	}
	c.decide(d, req, ns)
	if !d.Allowed || req.Hits == 0 {
		return
	}
	tat := c.tat + req.Hits*c.emission
	*win = floorDiv(tat, msNs)
	if !found {
		if !t.create(g, k, b, h, req.ID, d.Count, tat-b*width, ms) {
			*win = 0
			t.full(d)
		}
		return
	}
	t.saveUndo(it.slot())
	it = t.moveTo(g, it, b, h, ms)
	m := t.slots.mut(it.slot())
	m.count, m.aux = d.Count, tat-b*width
	m.setModified(ms - b*k.widthMs)
	t.mark(it)
}

// moveTo moves bucket it of g, whose id has hash h, to window b, where
// its next state belongs, and returns its new key. The bucket keeps its
// slot; its old key is journaled as deleted.
func (t *Table) moveTo(g *group, it item, b int64, h uint64, ms int64) item {
	if it.bucket == b {
		return it
	}
	t.logDelete(g, it) // and its reference is unbound: its key changes
	i := it.slot()
	c := t.slots.mut(i)
	t.wins[c.win].ix.del(keyFP(h, g.id, it.bucket), i)
	t.detach(g, i)
	c.setCreated(ms - b*g.key.widthMs)
	c.setModified(ms - b*g.key.widthMs)
	w := t.openWindow(g, b)
	t.link(w, i, c)
	t.wins[w].ix.add(keyFP(h, g.id, b), i)
	moved := mkItem(g.id, b, i)
	t.rekey(it, moved)
	return moved
}

// openWindow returns the id of g's window b, making it if g has none.
func (t *Table) openWindow(g *group, b int64) uint32 {
	i := len(g.wins)
	for ; i > 0 && g.wins[i-1].bucket >= b; i-- {
		if g.wins[i-1].bucket == b {
			return g.wins[i-1].id
		}
	}
	var id uint32
	if n := len(t.freeWins); n > 0 {
		id = t.freeWins[n-1]
		t.freeWins = t.freeWins[:n-1]
	} else {
		id = uint32(len(t.wins))
		t.wins = append(t.wins, window{})
	}
	t.wins[id] = window{bucket: b, gid: g.id}
	g.wins = slices.Insert(g.wins, i, gwin{bucket: b, id: id})
	return id
}

// closeWindow forgets window i of g's list, which holds no cell any more,
// and its index.
func (t *Table) closeWindow(g *group, i int) {
	id := g.wins[i].id
	t.wins[id] = window{}
	t.freeWins = append(t.freeWins, id)
	g.wins = slices.Delete(g.wins, i, i+1)
}

// link puts slot i, whose cell c is writable, at the head of window w.
func (t *Table) link(w uint32, i uint32, c *cell) {
	win := &t.wins[w]
	c.win, c.prev, c.next = w, 0, win.head
	if win.head != 0 {
		// On c's page or on one of its own: c stays writable.
		t.slots.mut(win.head - 1).prev = i + 1
	}
	win.head = i + 1
	win.n++
}

// detach takes slot i out of its window's list, and the window out of g's
// list if it is left empty.
func (t *Table) detach(g *group, i uint32) {
	c := t.slots.mut(i)
	w := &t.wins[c.win]
	if c.prev != 0 {
		t.slots.mut(c.prev - 1).next = c.next
	} else {
		w.head = c.next
	}
	if c.next != 0 {
		t.slots.mut(c.next - 1).prev = c.prev
	}
	c.next, c.prev = 0, 0
	if w.n--; w.n > 0 {
		return
	}
	for k := len(g.wins) - 1; k >= 0; k-- {
		if g.wins[k].id == c.win {
			t.closeWindow(g, k)
			return
		}
	}
	panic("table: a window is missing from its group")
}

// create inserts a new bucket for id in window b, with count and aux,
// creating its group if g is nil. It reports false, changing nothing, when
// the table is full and the policy is deny-new.
func (t *Table) create(g *group, k *groupKey, b int64, h uint64, id string, count, aux, ms int64) bool {
	if t.maxBuckets > 0 && t.n >= t.maxBuckets && !t.makeRoom(ms) {
		return false
	}
	if g == nil || t.byID[g.id] != g {
		// A new group, or one that making room dropped.
		if g = t.groups[*k]; g == nil {
			g = t.newGroup(*k)
		}
		t.last = g
	}
	off := ms - b*g.key.widthMs
	idx := t.addCell(g, b, h, id, count, aux, off, off)
	t.mark(mkItem(g.id, b, idx))
	if t.inTx {
		t.undo = append(t.undo, undo{kind: undoCreated, slot: idx})
	}
	return true
}

// addCell stores a new bucket of g in window b (id of hash h, its state,
// its stamps in ms after the window's start): in the slab, the arena, the
// window's list and the index. It returns the bucket's slot.
func (t *Table) addCell(g *group, b int64, h uint64, id string, count, aux, createdOff, modifiedOff int64) uint32 {
	idx := t.slots.alloc()
	c := t.slots.mut(idx)
	*c = cell{count: count, aux: aux}
	c.setID(&t.ids, id)
	c.setCreated(createdOff)
	c.setModified(modifiedOff)
	w := t.openWindow(g, b)
	t.link(w, idx, c)
	t.wins[w].ix.add(keyFP(h, g.id, b), idx)
	t.ix.n++
	t.n++
	g.n++
	if !g.indexed || b < g.minBucket {
		t.reindex(g, b)
	}
	return idx
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
	gw := g.wins[0]
	victim := mkItem(g.id, gw.bucket, t.wins[gw.id].head-1)
	if t.inTx {
		t.undo = append(t.undo, undo{kind: undoEvicted, state: *t.slots.at(victim.slot()), key: g.key})
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
func (t *Table) full(d *Decision) {
	t.stats.Rejections++
	d.Allowed, d.Full = false, true
	d.Count, d.Remaining = 0, d.Limit
	d.RetryAfter = fullRetry
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
	i := it.slot()
	c := t.slots.cell(i)
	t.wins[c.win].ix.del(keyFP(t.hashID(c.idIn(&t.ids)), g.id, it.bucket), i)
	t.detach(g, i)
	t.release(i)
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
// when it has refilled. The cost is proportional to the buckets deleted,
// not to the size of the table.
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

// sweepBatch is how many buckets DeleteExpiredSlice deletes at once,
// between two looks at its bounds.
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
			t.reindex(g, g.wins[0].bucket)
		}
		if stop {
			r.More = true
			return r
		}
	}
}

// deleteBatch deletes up to n of the buckets of g's oldest windows whose
// number is below cut, from the heads of their lists, and returns how many
// it deleted. A window deleted whole leaves g's list with its index; one
// deleted in part keeps the rest of its list, and in its index entries
// that name the deleted buckets' free slots (see window).
func (t *Table) deleteBatch(g *group, cut int64, n int) int {
	k := 0
	for k < n && len(g.wins) > 0 && g.wins[0].bucket < cut {
		w := &t.wins[g.wins[0].id]
		s := w.head
		for ; s != 0 && k < n; k++ {
			i := s - 1
			s = t.slots.cell(i).next
			w.n--
			t.release(i)
		}
		if w.n == 0 {
			t.closeWindow(g, 0)
			continue
		}
		w.head = s
		t.slots.mut(s - 1).prev = 0
	}
	g.n -= k
	return k
}

// release frees slot i, which no window lists any more and whose index
// entry is gone or stale: out of the change log, its id out of the arena,
// its cell back to the slab.
func (t *Table) release(i uint32) {
	t.slots.cell(i).freeID(&t.ids)
	t.unmark(i)
	t.unbind(i)
	t.releaseRef(i)
	t.slots.release(i)
	t.ix.n--
	t.n--
}

// floorDiv is a / b rounded toward negative infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
