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
	kind undoKind
	slot uint32   // undoChanged, undoCreated: the bucket's slot
	prev slot     // undoChanged: the state before; undoEvicted: the evicted state
	key  groupKey // undoEvicted: the evicted bucket's group
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
			t.undoChange(u.slot, &u.prev)
		case undoCreated:
			s := t.slots.at(u.slot)
			t.remove(t.byID[s.gid], mkItem(s.gid, s.bucket, u.slot))
		case undoEvicted:
			g := t.groups[u.key]
			if g == nil {
				g = t.newGroup(u.key)
			}
			t.mark(t.insertState(g, u.prev.bucket, t.hashID(u.prev.id), u.prev))
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
		t.undo = append(t.undo, undo{kind: undoChanged, slot: i, prev: *t.slots.at(i)})
	}
}

// undoChange puts the bucket of slot i back to its state prev, and back
// in prev's window if it moved (a token or leaky bucket).
func (t *Table) undoChange(i uint32, prev *slot) {
	s := t.slots.at(i)
	cur := mkItem(s.gid, s.bucket, i)
	back := mkItem(prev.gid, prev.bucket, i)
	if cur != back {
		t.unbind(i) // the journal's binding, if any, is of cur's key
		g := t.byID[s.gid]
		t.tree.Delete(cur)
		t.tree.SetHint(back, &t.hint)
		t.ix.del(s.fp, i)
		t.ix.add(prev.fp, i)
		t.rekey(cur, back)
		if back.bucket < g.minBucket {
			t.reindex(g, back.bucket)
		}
	}
	*t.slots.mut(i) = *prev
	t.mark(back)
}

// insertState adds a bucket of group g in window with state s (its id
// set, of maphash h), indexed and in the tree, and returns its key. It does
// not mark it.
func (t *Table) insertState(g *group, window int64, h uint64, s slot) item {
	idx := t.slots.alloc()
	s.gid, s.bucket, s.fp = g.id, window, keyFP(h, g.id, window)
	*t.slots.mut(idx) = s
	t.ix.add(s.fp, idx)
	it := mkItem(g.id, window, idx)
	t.tree.SetHint(it, &t.hint)
	g.n++
	if !g.indexed || it.bucket < g.minBucket {
		t.reindex(g, it.bucket)
	}
	t.last = g
	return it
}
