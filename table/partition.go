package table

// This file serves a table split by id between owners (a cluster's
// virtual shards): the records of the buckets of some ids, each partition's
// apart (Frozen.Partition), and the deletion of the buckets of some ids
// (DeleteMatching).

// Partition calls fn with records holding the buckets of f not expired at
// the time of the Freeze, each record the buckets of one partition only:
// part(id) names the partition of a bucket's id, and a negative one leaves
// the bucket out; id is valid only during the call. Each record is at most
// MaxRecordBytes and valid only during the call, and binds no reference
// (format 1: its receiver has a table of its own); a partition's records
// come in key order, the last (partial) record of every partition at the
// end, in ascending order of partition. If fn returns an error, Partition
// stops and returns it. Like Records, it may run on any goroutine, but not
// on two at once.
func (f *Frozen) Partition(part func(id string) int, fn func(part int, rec []byte) error) error {
	ws := map[int]*recordWriter{}
	err := f.each(func(k *groupKey, window int64, _ uint32, c *cell, id string) error {
		p := part(id)
		if p < 0 {
			return nil
		}
		w := ws[p]
		if w == nil {
			w = &recordWriter{}
			w.reset(nil)
			ws[p] = w
		}
		if w.full() {
			if err := fn(p, w.b); err != nil {
				return err
			}
			w.reset(w.b)
		}
		w.putCell(k, window, 0, c, id)
		return nil
	})
	if err != nil {
		return err
	}
	parts := make([]int, 0, len(ws))
	for p, w := range ws {
		if w.n > 0 {
			parts = append(parts, p)
		}
	}
	sortInts(parts)
	for _, p := range parts {
		if err := fn(p, ws[p].b); err != nil {
			return err
		}
	}
	return nil
}

// sortInts sorts a few ints in place (insertion sort: there are as many
// as partitions).
func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// DeleteMatching deletes the buckets, expired or not, whose id match
// selects, among the slots from `from` on, looking at most at max of them,
// and returns how many it deleted and the slot to go on from: 0 once every
// slot has been looked at. Calls that go on from next, with no other
// change in between that creates a bucket match selects, delete every such
// bucket; a caller can so bound the time it holds the table. The deletions
// are reported by Changes, so that a journal forgets the buckets too. The
// id match is given is valid only during the call.
func (t *Table) DeleteMatching(match func(id string) bool, from, max int) (deleted, next int) {
	end := min(uint64(from)+uint64(max), uint64(t.slots.used))
	for i := uint64(from); i < end; i++ {
		c := t.slots.cell(uint32(i))
		if c.idLen == 0 || !match(c.idIn(&t.ids)) {
			continue
		}
		w := &t.wins[c.win]
		g := t.byID[w.gid]
		it := mkItem(w.gid, w.bucket, uint32(i))
		t.logDelete(g, it)
		t.remove(g, it)
		deleted++
	}
	if end >= uint64(t.slots.used) {
		return deleted, 0
	}
	return deleted, int(end)
}
