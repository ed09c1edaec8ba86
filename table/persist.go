package table

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unsafe"
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
	// A bucket with a home is written there at once (see ChangesTo),
	// unless a unit may undo the change.
	if t.log != nil && !t.inTx && t.rewrite(t.log, i, t.slots.cell(i)) {
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

// deletion is a bucket deleted (by Reset, an eviction or a move to
// another window) whose delete record Changes has yet to report: by its
// reference if the journal has it bound to one, else by its key.
type deletion struct {
	ref    uint64
	key    groupKey
	window int64
	id     string
}

// logDelete records, for Changes, that bucket it of g is being deleted
// while it could still change a decision. The bucket's reference is
// unbound from here on.
func (t *Table) logDelete(g *group, it item) {
	if !t.track {
		return
	}
	if i := it.slot(); t.bound(i) {
		t.unbind(i)
		t.deleted = append(t.deleted, deletion{ref: refOf(i)})
		return
	}
	c := t.slots.cell(it.slot())
	t.deleted = append(t.deleted, deletion{key: g.key, window: it.bucket, id: strings.Clone(c.idIn(&t.ids))})
}

// refOf is the reference under which slot i is journaled.
func refOf(i uint32) uint64 { return uint64(i) + 1 }

// bound reports whether the journal holds slot i's bucket, as it is keyed
// now, bound to refOf(i): a change to its state may then be written as a
// count or tat entry.
func (t *Table) bound(i uint32) bool {
	return int(i/64) < len(t.bindings) && t.bindings[i/64]&(1<<(i%64)) != 0
}

func (t *Table) bind(i uint32) {
	w := int(i / 64)
	if w >= len(t.bindings) {
		t.bindings = append(t.bindings, make([]uint64, w+1-len(t.bindings))...)
	}
	t.bindings[w] |= 1 << (i % 64)
}

// unbind forgets that the journal holds slot i's bucket: its key changed,
// or it is being deleted.
func (t *Table) unbind(i uint32) {
	if int(i/64) < len(t.bindings) {
		t.bindings[i/64] &^= 1 << (i % 64)
	}
	t.unhome(i)
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
	if len(t.deleted) == 0 && len(t.changed) == 1 && t.bound(t.changed[0].slot()) {
		return t.changedOne(fn)
	}
	return t.changes(fn, nil)
}

// changes is Changes, and ChangesTo with l: a bucket with a tail in l
// (a home) has its state written there, not in a record.
func (t *Table) changes(fn func(rec []byte) error, l TailLog) error {
	// By limit, so that each group entry is written once per run.
	slices.SortFunc(t.changed, func(a, b item) int { return cmp.Compare(a.gid(), b.gid()) })
	w := &t.w
	w.reset2(t.rec)
	dFrom, cFrom := 0, 0 // the first deletion and change of the record being built
	emit := func(dTo, cTo int) error {
		if w.n > 0 { // else every change since cFrom went to a tail
			if err := fn(w.b); err != nil {
				t.deleted = t.deleted[:copy(t.deleted, t.deleted[dFrom:])]
				t.changed = t.changed[:copy(t.changed, t.changed[cFrom:])]
				return err
			}
			w.reset2(w.b)
		}
		for _, it := range t.changed[cFrom:cTo] {
			i := it.slot()
			t.dirty[i/64] &^= 1 << (i % 64)
			t.bind(i) // the journal holds it now, under refOf(i)
		}
		dFrom, cFrom = dTo, cTo
		return nil
	}
	for k := range t.deleted {
		if w.full() {
			if err := emit(k, 0); err != nil {
				return err
			}
		}
		del := &t.deleted[k]
		if del.ref != 0 {
			w.drop(del.ref)
		} else {
			w.del(&del.key, del.window, del.id)
		}
	}
	for k, it := range t.changed {
		if w.full() {
			if err := emit(len(t.deleted), k); err != nil {
				return err
			}
		}
		i := it.slot()
		k := &t.byID[it.gid()].key
		c := t.slots.cell(i)
		if t.bound(i) {
			if l != nil && t.rewrite(l, i, c) {
				continue
			}
			w.deltaCell(refOf(i), k.alg.gcra(), c)
		} else {
			w.putCell(k, it.bucket, refOf(i), c, c.idIn(&t.ids))
		}
		t.unhome(i) // this record is the bucket's latest
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

// changedOne is Changes for its most common batch, a check of one bucket
// the journal holds already (a repeat hit): the record of one count or
// TAT entry, the same bytes the general path writes, without its sort,
// its runs and its bookkeeping (BenchmarkCheckJournal/sync=interval in
// alternating rounds: one core, median +4.9% checks/s over 5; two cores,
// +4.5% and +6% to +8%, by how near the host placed the two vCPUs).
func (t *Table) changedOne(fn func(rec []byte) error) error {
	it := t.changed[0]
	i := it.slot()
	w := &t.w
	w.reset2(t.rec)
	w.deltaCell(refOf(i), t.byID[it.gid()].key.alg.gcra(), t.slots.cell(i))
	t.rec = w.b
	if err := fn(w.b); err != nil {
		return err // the change stays, for the next call
	}
	t.dirty[i/64] &^= 1 << (i % 64)
	t.changed = t.changed[:0]
	return nil
}

// Pending returns how many buckets' changes Changes has yet to report.
func (t *Table) Pending() int { return len(t.changed) + len(t.deleted) }

// Restore applies one record, as Changes or Frozen.Records produced it (or
// an earlier version's, format 1): each bucket it names takes the recorded
// state (created if missing), or is deleted. A bucket expired at now is not
// restored, so replaying an old journal cannot resurrect it. Restore is
// idempotent: replaying records in order, any number of times, leaves the
// last state of each bucket. It does not mark buckets changed. The table's
// clock moves to a bucket's last modification if that is later than now. A
// record that does not decode returns an error matching ErrBadRecord and
// changes nothing. The references records bind (see Changes) hold from
// record to record, until RestoreDone.
func (t *Table) Restore(rec []byte, now time.Time) error {
	return t.RestoreTail(rec, nil, now)
}

// RestoreTail is Restore for a record a journal recovered with its tail
// (see ChangesTo), nil if it has none: the state the tail holds, if it was
// written whole, replaces the one in the record's entry. A tail whose
// record holds other than one put, count or tat entry, or whose state is
// out of that bucket's ranges, is damage: ErrBadRecord, nothing changed.
func (t *Table) RestoreTail(rec, tail []byte, now time.Time) error {
	t.refs.budget += uint64(len(rec))
	// Taken apart whole before any entry is applied, so that a record that
	// does not decode changes nothing; into buffers the table keeps, so
	// that it is decoded once and a replay allocates per record size, not
	// per bucket.
	t.pend, t.pendKeys = t.pend[:0], t.pendKeys[:0]
	err := decodeRecordInto(rec, &t.dec, func(d *decoded) error {
		t.pend = append(t.pend, t.pending(rec, d))
		return nil
	})
	if err == nil && tail != nil {
		err = t.applyTail(tail)
	}
	if err == nil {
		var d decoded
		for i := range t.pend {
			t.unpend(rec, &t.pend[i], &d)
			t.restore(&d, now)
		}
	}
	clear(t.pendKeys) // their namespaces share the record's memory
	t.dec = decoded{}
	return err
}

// RestoreDone ends a replay: it forgets the references the records bound,
// which no later record of this table's own may name (its Changes bind
// their own), and the replay's buffers.
func (t *Table) RestoreDone() { t.refs, t.pend, t.pendKeys = refMap{}, nil, nil }

// pendingEntry is an entry of the record Restore is applying, as
// decodeRecord took it apart but without its strings, so that the buffer
// of a record's entries holds no pointer (no write barrier, nothing for
// the collector to scan): a put's or delete's group key is
// Table.pendKeys[key], its id the idLen bytes of the record from id.
type pendingEntry struct {
	window, count, aux, created, modified int64
	ref                                   uint64
	id                                    uint32
	key                                   uint32
	idLen                                 uint16
	kind                                  byte
}

// pending returns d, an entry of rec, as a pendingEntry. A journal's
// record is far below 4 GiB, the reach of its offsets.
func (t *Table) pending(rec []byte, d *decoded) pendingEntry {
	p := pendingEntry{kind: d.kind, window: d.window, ref: d.ref, count: d.slot.count, aux: d.slot.aux,
		created: d.slot.created, modified: d.slot.modified, idLen: uint16(len(d.slot.id))}
	if d.kind == recordPut || d.kind == recordDelete {
		if n := len(t.pendKeys); n == 0 || t.pendKeys[n-1] != d.key {
			t.pendKeys = append(t.pendKeys, d.key)
		}
		p.key = uint32(len(t.pendKeys) - 1)
	}
	if p.idLen > 0 {
		off := uintptr(unsafe.Pointer(unsafe.StringData(d.slot.id))) - uintptr(unsafe.Pointer(unsafe.SliceData(rec)))
		if off > uintptr(len(rec)) || uintptr(len(rec))-off < uintptr(p.idLen) {
			panic("table: a decoded id is not a slice of its record") // unpend reads it back from rec
		}
		p.id = uint32(off)
	}
	return p
}

// unpend sets d to p, an entry of rec, as decodeRecord gave it.
func (t *Table) unpend(rec []byte, p *pendingEntry, d *decoded) {
	d.kind, d.window, d.ref = p.kind, p.window, p.ref
	d.slot = slot{count: p.count, aux: p.aux, created: p.created, modified: p.modified}
	if p.idLen > 0 {
		d.slot.id = unsafe.String(&rec[p.id], int(p.idLen))
	}
	if p.kind == recordPut || p.kind == recordDelete {
		d.key = t.pendKeys[p.key]
	}
}

// restore applies one decoded entry.
func (t *Table) restore(d *decoded, now time.Time) {
	switch d.kind {
	case entryDrop, entryCount, entryTAT:
		t.restoreRef(d)
		return
	case recordPut:
		t.advance(time.UnixMilli(d.slot.modified))
	}
	_, ms := t.advance(now)
	g := t.groupOf(&d.key)
	h := t.hashID(d.slot.id)
	var it item
	found := false
	if g != nil {
		it, found = t.find(g, d.window, h, d.slot.id)
	}
	if d.kind == recordPut && !d.key.expired(d.window, ms, t.ttlMs) {
		if !found {
			if g == nil {
				k := d.key
				k.ns = strings.Clone(k.ns) // d's shares the record's memory
				g = t.newGroup(k)
			}
			it = t.insertState(g, d.window, h, d.slot)
		} else {
			c := t.slots.mut(it.slot())
			start := d.window * d.key.widthMs
			c.count, c.aux = d.slot.count, d.slot.aux
			c.setCreated(d.slot.created - start)
			c.setModified(d.slot.modified - start)
		}
		if d.ref != 0 {
			t.bindRef(d.ref, it.slot())
		}
		return
	}
	// A delete, or a state that has expired: the bucket must not be there.
	if d.ref != 0 {
		t.unbindRef(d.ref)
	}
	if found {
		t.remove(g, it)
	}
}

// restoreRef applies a drop, count or tat entry to the bucket its
// reference is bound to, if any: none when the put that bound it was
// expired at the replay (and so is the bucket's state since).
func (t *Table) restoreRef(d *decoded) {
	i, ok := t.refSlot(d.ref)
	if !ok {
		return
	}
	w := t.wins[t.slots.cell(i).win]
	g := t.byID[w.gid]
	if d.kind == entryDrop {
		t.unbindRef(d.ref)
		t.remove(g, mkItem(w.gid, w.bucket, i))
		return
	}
	if d.kind == entryTAT != g.key.alg.gcra() || d.kind == entryTAT && d.slot.aux > 2*g.key.widthMs*msNs ||
		d.slot.modified >= g.key.widthMs {
		return // not this bucket's kind of state: the entry is not its
	}
	m := t.slots.mut(i)
	m.count = d.slot.count
	m.setModified(m.createdOff() + d.slot.modified)
	if d.kind == entryTAT {
		m.aux = d.slot.aux
	}
	t.advance(time.UnixMilli(w.bucket*g.key.widthMs + m.modifiedOff()))
}

// refMap holds, while records are restored, the slot each of their
// references is bound to, and back. References are the writer's slots,
// dense from 1: they go in a slice, but for the few far beyond what it
// holds, which go in a map, so that no record can make it allocate much.
// The slice may reach as far as twice its length, or as many references
// as bytes were replayed: a snapshot, whose references descend from the
// largest, then has them in the slice once its records pass that many
// bytes (a bucket's put takes more than one), at four bytes of slice per
// byte of journal at most.
type refMap struct {
	dense  []uint32 // slot+1 by reference; 0: unbound
	sparse map[uint64]uint32
	back   []uint64 // reference by slot; 0: none
	budget uint64   // bytes of records restored
}

// refSlot returns the slot ref is bound to.
func (t *Table) refSlot(ref uint64) (uint32, bool) {
	m := &t.refs
	var v uint32
	if ref < uint64(len(m.dense)) {
		v = m.dense[ref]
	} else {
		v = m.sparse[ref]
	}
	return v - 1, v != 0
}

// setRef binds ref to slot+1 (0 unbinds it).
func (t *Table) setRef(ref uint64, v uint32) {
	m := &t.refs
	if ref >= uint64(len(m.dense)) && (ref <= 2*uint64(len(m.dense))+4096 || ref < m.budget) {
		m.dense = append(m.dense, make([]uint32, ref+1-uint64(len(m.dense)))...)
		// References bound while they were beyond the slice move into it.
		for r, sv := range m.sparse {
			if r < uint64(len(m.dense)) {
				m.dense[r] = sv
				delete(m.sparse, r)
			}
		}
	}
	switch {
	case ref < uint64(len(m.dense)):
		m.dense[ref] = v
	case v == 0:
		delete(m.sparse, ref)
	default:
		if m.sparse == nil {
			m.sparse = make(map[uint64]uint32)
		}
		m.sparse[ref] = v
	}
}

// bindRef binds reference ref to slot i for the rest of the replay.
func (t *Table) bindRef(ref uint64, i uint32) {
	t.unbindRef(ref)
	m := &t.refs
	if int(i) >= len(m.back) {
		m.back = append(m.back, make([]uint64, int(i)+1-len(m.back))...)
	}
	if old := m.back[i]; old != 0 {
		t.setRef(old, 0)
	}
	t.setRef(ref, i+1)
	m.back[i] = ref
}

// unbindRef forgets what ref is bound to.
func (t *Table) unbindRef(ref uint64) {
	if i, ok := t.refSlot(ref); ok {
		t.refs.back[i] = 0
		t.setRef(ref, 0)
	}
}

// releaseRef forgets the reference bound to slot i, which is being freed.
func (t *Table) releaseRef(i uint32) {
	if m := &t.refs; int(i) < len(m.back) && m.back[i] != 0 {
		t.setRef(m.back[i], 0)
		m.back[i] = 0
	}
}

// Frozen is a consistent, read-only copy of a Table at one moment, which
// another goroutine may read while the table's owner goes on changing the
// table: a copy of the windows' lists of every group, and copy-on-write
// shares of the slab's pages and of the id arena. It costs O(pages +
// windows) to take; afterwards the owner copies a page (4096 buckets) the
// first time it writes to it, and reuses no id's room until the thaw. Call
// Table.Thaw when done reading.
type Frozen struct {
	pages  []*page
	heads  []uint32      // the head of each window's list, by window id
	groups []frozenGroup // by group id
	ids    *arena
	n      int
	ttlMs  int64
	nowMs  int64
	thawed bool
}

// frozenGroup is a group as frozen: its key and windows.
type frozenGroup struct {
	key  groupKey
	wins []gwin
}

// Freeze returns a Frozen copy of t as of now. Buckets expired at now are
// left out of its Records.
func (t *Table) Freeze(now time.Time) *Frozen {
	_, ms := t.advance(now)
	f := &Frozen{pages: t.slots.freeze(), heads: make([]uint32, len(t.wins)), ids: t.ids.freeze(),
		n: t.n, ttlMs: t.ttlMs, nowMs: ms}
	for i := range t.wins {
		f.heads[i] = t.wins[i].head
	}
	f.groups = make([]frozenGroup, len(t.byID))
	for i, g := range t.byID {
		if g != nil {
			f.groups[i] = frozenGroup{key: g.key, wins: slices.Clone(g.wins)}
		}
	}
	return f
}

// Thaw tells t that f is no longer read, so that t stops copying pages it
// shared with f. Call it on the owner's goroutine, once per Freeze, after the
// reader of f is done.
func (t *Table) Thaw(f *Frozen) {
	if f.thawed {
		return
	}
	f.thawed = true
	f.pages, f.heads, f.groups, f.ids = nil, nil, nil, nil
	t.slots.thaw()
	t.ids.thaw()
}

// Len returns the number of buckets in f, expired or not.
func (f *Frozen) Len() int { return f.n }

// Records calls fn with records holding every bucket of f not expired at
// the time of the Freeze, in key order, each record at most MaxRecordBytes. A
// record is only valid during the call. If fn returns an error, Records
// stops and returns it. Records may run on any goroutine, but not on two at
// once.
func (f *Frozen) Records(fn func(rec []byte) error) error {
	var w recordWriter
	w.reset2(nil)
	err := f.each(func(k *groupKey, window int64, slot uint32, c *cell, id string) error {
		if w.full() {
			if err := fn(w.b); err != nil {
				return err
			}
			w.reset2(w.b)
		}
		w.putCell(k, window, refOf(slot), c, id)
		return nil
	})
	if err != nil {
		return err
	}
	if w.n > 0 {
		return fn(w.b)
	}
	return nil
}

// each calls fn with every bucket of f not expired at the time of the
// Freeze, in key order: its group's key, its window, its slot, its cell
// and its id (valid only during the call). It stops at fn's first error
// and returns it.
func (f *Frozen) each(fn func(k *groupKey, window int64, slot uint32, c *cell, id string) error) error {
	for _, fg := range f.groups {
		k := &fg.key
		for _, gw := range fg.wins {
			if k.expired(gw.bucket, f.nowMs, f.ttlMs) {
				continue
			}
			for s := f.heads[gw.id]; s != 0; {
				c := &f.pages[(s-1)>>pageBits][(s-1)&(pageSize-1)]
				if err := fn(k, gw.bucket, s-1, c, c.idIn(f.ids)); err != nil {
					return err
				}
				s = c.next
			}
		}
	}
	return nil
}
