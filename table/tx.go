package table

// This file makes several Apply calls one all-or-nothing unit: Begin
// records how to undo each change, Rollback undoes them, Commit keeps them.
// A batch of checks that spans several tables (several shards) is decided
// holding every table's owner, so that nobody sees the changes of a batch
// that is then rolled back: no hit of a doomed batch is ever admitted or
// counted anywhere, and no concurrent check is denied because of it.

// undoKind says what an undo entry reverses.
type undoKind uint8

const (
	undoChanged undoKind = iota // an existing bucket's state (and perhaps window) changed
	undoCreated                 // a bucket was created
	undoEvicted                 // a live bucket was evicted from a full table
)

// undo reverses one change made since Begin.
type undo struct {
	kind   undoKind
	slot   uint32   // undoChanged, undoCreated: the bucket's slot
	prev   cell     // undoChanged: the cell before
	bucket int64    // undoChanged: the window the bucket was in
	state  slot     // undoEvicted: the evicted bucket (its id and window too)
	key    groupKey // undoEvicted: the evicted bucket's group
}

// Begin starts an all-or-nothing unit: the changes of the Apply calls that
// follow are kept by Commit or undone exactly by Rollback. Apply is the
// only method that may be called until then, all with one now. A unit does
// not nest.
func (t *Table) Begin() {
	t.inTx = true
	t.undo = t.undo[:0]
	t.txDeleted = len(t.deleted)
	t.txEvictions = t.stats.Evictions
}

// Commit keeps the changes made since Begin and ends the unit.
func (t *Table) Commit() {
	t.inTx = false
	clear(t.undo)
	t.undo = t.undo[:0]
}

// Rollback undoes every change made since Begin, newest first, and ends the
// unit: each bucket is back in its window with its state, created buckets
// are gone and evicted ones are back. Buckets that expired meanwhile and
// were deleted to make room stay deleted (they could not change a
// decision). A restored bucket may be journaled again, with its state as
// it was; nothing of the undone changes is journaled.
func (t *Table) Rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := &t.undo[i]
		switch u.kind {
		case undoChanged:
			t.undoChange(u)
		case undoCreated:
			w := &t.wins[t.slots.cell(u.slot).win]
			t.remove(t.byID[w.gid], mkItem(w.gid, w.bucket, u.slot))
		case undoEvicted:
			g := t.groups[u.key]
			if g == nil {
				g = t.newGroup(u.key)
			}
			t.mark(t.insertState(g, u.state.bucket, t.hashID(u.state.id), u.state))
		}
	}
	t.deleted = t.deleted[:t.txDeleted]
	t.stats.Evictions = t.txEvictions
	t.Commit()
}

// saveUndo records, inside a unit, the state of bucket slot i before it
// changes.
func (t *Table) saveUndo(i uint32) {
	if t.inTx {
		c := t.slots.cell(i)
		t.undo = append(t.undo, undo{kind: undoChanged, slot: i, prev: *c, bucket: t.wins[c.win].bucket})
	}
}

// undoChange puts the bucket of slot u.slot back to its state u.prev, and
// back in window u.bucket if it moved (a token or leaky bucket).
func (t *Table) undoChange(u *undo) {
	i := u.slot
	w := &t.wins[t.slots.cell(i).win]
	g := t.byID[w.gid]
	cur := mkItem(g.id, w.bucket, i)
	back := mkItem(g.id, u.bucket, i)
	c := t.slots.mut(i)
	if cur != back {
		t.unbind(i) // the journal's binding, if any, is of cur's key
		h := t.hashID(c.idIn(&t.ids))
		t.wins[c.win].ix.del(keyFP(h, g.id, cur.bucket), i)
		t.detach(g, i)
		w := t.openWindow(g, u.bucket)
		t.link(w, i, c)
		t.wins[w].ix.add(keyFP(h, g.id, u.bucket), i)
		t.rekey(cur, back)
		if u.bucket < g.minBucket {
			t.reindex(g, u.bucket)
		}
	}
	c.count, c.aux = u.prev.count, u.prev.aux
	c.setCreated(u.prev.createdOff())
	c.setModified(u.prev.modifiedOff())
	t.mark(back)
}

// insertState adds a bucket of group g in window with state s (its id
// set, of hash h, its stamps in Unix ms), indexed and in its window, and
// returns its key. It does not mark it.
func (t *Table) insertState(g *group, window int64, h uint64, s slot) item {
	start := window * g.key.widthMs
	idx := t.addCell(g, window, h, s.id, s.count, s.aux, s.created-start, s.modified-start)
	t.last = g
	return mkItem(g.id, window, idx)
}
