package table

import (
	"cmp"
	"hash/maphash"
	"slices"
	"time"

	"github.com/tidwall/btree"
)

// This file is what a journal needs from the table: the buckets each batch
// changed (Changes), a consistent copy of the whole table that another
// goroutine can write out while the owner goes on (Freeze), and the way back
// from records to buckets (Restore).

// mark records that bucket it changed, for Changes.
func (t *Table) mark(it item) {
	if !t.track {
		return
	}
	i := it.slot()
	w := int(i / 64)
	if w >= len(t.dirty) {
		t.dirty = append(t.dirty, make([]uint64, w+1-len(t.dirty))...)
	}
	if t.dirty[w]&(1<<(i%64)) != 0 {
		return
	}
	t.dirty[w] |= 1 << (i % 64)
	t.changed = append(t.changed, it)
}

// unmark forgets a change to a slot about to be released. A slot is released
// with its change still unreported only after Changes failed (the journal
// could not take it), and only because the bucket expired, so nothing needs
// to be written for it any more.
func (t *Table) unmark(i uint32) {
	if !t.track || int(i/64) >= len(t.dirty) || t.dirty[i/64]&(1<<(i%64)) == 0 {
		return
	}
	t.dirty[i/64] &^= 1 << (i % 64)
	for k, it := range t.changed {
		if it.slot() == i {
			t.changed = append(t.changed[:k], t.changed[k+1:]...)
			break
		}
	}
}

// deletion is a bucket deleted (by Reset or an eviction) whose delete
// record Changes has yet to report.
type deletion struct {
	key    groupKey
	window int64
	id     string
}

// logDelete records, for Changes, that bucket it of g is being deleted
// while it could still change a decision.
func (t *Table) logDelete(g *group, it item) {
	if t.track {
		t.deleted = append(t.deleted, deletion{key: g.key, window: it.bucket, id: t.slots.at(it.slot()).id})
	}
}

// rekey replaces old by moved in the change log, if old is in it: the
// bucket moved to another window before its change was reported. This
// happens only to a bucket changed on both sides of a window boundary in
// one batch, so the backward scan is short and rare.
func (t *Table) rekey(old, moved item) {
	i := old.slot()
	if !t.track || int(i/64) >= len(t.dirty) || t.dirty[i/64]&(1<<(i%64)) == 0 {
		return
	}
	for k := len(t.changed) - 1; k >= 0; k-- {
		if t.changed[k] == old {
			t.changed[k] = moved
			return
		}
	}
}

// Changes calls fn with records holding the full current state of every
// bucket changed since the last call, each once, after the deletions of
// the buckets deleted meanwhile (a bucket deleted and created again is
// reported deleted, then as it is now). A batch of changes is one record
// (or a few, each at most MaxRecordBytes), so a journal appends it at once. A
// record is only valid during the call. If fn returns an error, Changes
// stops and returns it, and what it has not reported (the failed record
// included) stays for the next call: a journal that could not take it gets
// it again. Changes reports nothing unless Config.TrackChanges is set.
func (t *Table) Changes(fn func(rec []byte) error) error {
	if len(t.deleted)+len(t.changed) == 0 {
		return nil
	}
	// By limit, so that each group entry is written once per run.
	slices.SortFunc(t.changed, func(a, b item) int { return cmp.Compare(a.gid(), b.gid()) })
	w := &t.w
	w.reset(t.rec)
	dFrom, cFrom := 0, 0 // the first deletion and change of the record being built
	emit := func(dTo, cTo int) error {
		if w.n == 0 {
			return nil
		}
		if err := fn(w.b); err != nil {
			t.deleted = t.deleted[:copy(t.deleted, t.deleted[dFrom:])]
			t.changed = t.changed[:copy(t.changed, t.changed[cFrom:])]
			return err
		}
		for _, it := range t.changed[cFrom:cTo] {
			i := it.slot()
			t.dirty[i/64] &^= 1 << (i % 64)
		}
		dFrom, cFrom = dTo, cTo
		w.reset(w.b)
		return nil
	}
	for k := range t.deleted {
		if w.full() {
			if err := emit(k, 0); err != nil {
				return err
			}
		}
		del := &t.deleted[k]
		w.del(&del.key, del.window, del.id)
	}
	for k, it := range t.changed {
		if w.full() {
			if err := emit(len(t.deleted), k); err != nil {
				return err
			}
		}
		w.put(&t.byID[it.gid()].key, it.bucket, t.slots.at(it.slot()))
	}
	if err := emit(len(t.deleted), len(t.changed)); err != nil {
		return err
	}
	t.rec = w.b
	clear(t.deleted)
	t.deleted = t.deleted[:0]
	t.changed = t.changed[:0]
	return nil
}

// Pending returns how many buckets' changes Changes has yet to report.
func (t *Table) Pending() int { return len(t.changed) + len(t.deleted) }

// Restore applies one record, as Changes or Frozen.Records produced it:
// each bucket it names takes the recorded state (created if missing), or is
// deleted. A bucket expired at now is not restored, so replaying an old
// journal cannot resurrect it. Restore is idempotent: replaying records in
// order, any number of times, leaves the last state of each bucket. It does
// not mark buckets changed. The table's clock moves to a bucket's last
// modification if that is later than now. A record that does not decode
// returns an error matching ErrBadRecord and changes nothing.
func (t *Table) Restore(rec []byte, now time.Time) error {
	if err := decodeRecord(rec, func(*decoded) error { return nil }); err != nil {
		return err
	}
	return decodeRecord(rec, func(d *decoded) error {
		t.restore(d, now)
		return nil
	})
}

// restore applies one decoded entry.
func (t *Table) restore(d *decoded, now time.Time) {
	if d.kind == recordPut {
		t.advance(time.UnixMilli(d.slot.modified))
	}
	_, ms := t.advance(now)
	g := t.groupOf(&d.key)
	h := maphash.String(t.seed, d.slot.id)
	var it item
	found := false
	if g != nil {
		it, found = t.find(g, d.window, h, d.slot.id)
	}
	if d.kind == recordPut && !d.key.expired(d.window, ms, t.ttlMs) {
		if found {
			s := t.slots.mut(it.slot())
			s.count, s.aux, s.created, s.modified = d.slot.count, d.slot.aux, d.slot.created, d.slot.modified
			return
		}
		if g == nil {
			g = t.newGroup(d.key)
		}
		t.insertState(g, d.window, h, d.slot)
		return
	}
	// A delete, or a state that has expired: the bucket must not be there.
	if found {
		t.remove(g, it)
	}
}

// Frozen is a consistent, read-only copy of a Table at one moment, which
// another goroutine may read while the table's owner goes on changing the
// table: a copy-on-write clone of the B-tree (btree.Copy) and of the slab
// pages. It costs O(pages) to take; afterwards the owner copies a page (4096
// buckets) the first time it writes to it. Call Table.Thaw when done reading.
type Frozen struct {
	tree   *btree.BTreeG[item]
	pages  []*page
	groups []groupKey // by group id
	ttlMs  int64
	nowMs  int64
}

// Freeze returns a Frozen copy of t as of now. Buckets expired at now are
// left out of its Records.
func (t *Table) Freeze(now time.Time) *Frozen {
	_, ms := t.advance(now)
	f := &Frozen{tree: t.tree.Copy(), pages: t.slots.freeze(), ttlMs: t.ttlMs, nowMs: ms}
	f.groups = make([]groupKey, len(t.byID))
	for i, g := range t.byID {
		if g != nil {
			f.groups[i] = g.key
		}
	}
	return f
}

// Thaw tells t that f is no longer read, so that t stops copying pages it
// shared with f. Call it on the owner's goroutine, once per Freeze, after the
// reader of f is done.
func (t *Table) Thaw(f *Frozen) {
	if f.tree == nil {
		return
	}
	f.tree, f.pages = nil, nil
	t.slots.thaw()
}

// Len returns the number of buckets in f, expired or not.
func (f *Frozen) Len() int { return f.tree.Len() }

// Records calls fn with records holding every bucket of f not expired at
// the time of the Freeze, in key order, each record at most MaxRecordBytes. A
// record is only valid during the call. If fn returns an error, Records
// stops and returns it. Records may run on any goroutine, but not on two at
// once.
func (f *Frozen) Records(fn func(rec []byte) error) error {
	var err error
	var w recordWriter
	w.reset(nil)
	f.tree.Scan(func(it item) bool {
		k := &f.groups[it.gid()]
		if k.expired(it.bucket, f.nowMs, f.ttlMs) {
			return true
		}
		if w.full() {
			if err = fn(w.b); err != nil {
				return false
			}
			w.reset(w.b)
		}
		w.put(k, it.bucket, &f.pages[it.slot()>>pageBits].slots[it.slot()&(pageSize-1)])
		return true
	})
	if err == nil && w.n > 0 {
		err = fn(w.b)
	}
	return err
}
