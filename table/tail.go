package table

import (
	"encoding/binary"
	"fmt"
)

// A TailLog is a journal whose records may carry a tail: bytes after the
// record that its writer rewrites in place, outside the record's checksum,
// as long as the journal allows (journal.Journal is one). ChangesTo gives
// a bucket's record a tail, the bucket's home, and writes the bucket's
// later changes there, a few stores instead of a record each, until the
// journal moves to a new segment (its epoch changes) or the bucket is
// deleted, rekeyed or written in another record.
type TailLog interface {
	// Append appends a record without a tail.
	Append(rec []byte) error
	// AppendTail appends a record with a tail of words 8-byte words, zeros,
	// and says where it is: pos 0 if the journal gave it none.
	AppendTail(rec []byte, words int) (epoch uint64, pos uint32, err error)
	// Tail returns the tail AppendTail made at pos in epoch, or nil if it
	// can no longer be rewritten.
	Tail(epoch uint64, pos uint32, words int) []byte
	// Epoch changes whenever the tails made before can no longer be
	// rewritten.
	Epoch() uint64
}

// A bucket's tail holds two slots of four words each, written in turn:
// count, aux, the slot's generation (from the table's counter of
// rewrites, so that a later rewrite of a tail has a higher one; 0 in a
// slot never written) and a word of the stamp (modified, in ms after
// created: 36 bits) and a check (28 bits) of the other fields. A rewrite
// goes to the slot that is not the newest, its stamp word last, so that a
// process killed in the middle of one leaves the other slot whole:
// recovery takes the whole slot (its check holds) of the higher
// generation, that is, the state of the last change a Commit ended (a
// change cut off was never answered). The generations order any two slots
// the file may hold, also after a power loss that kept some sectors of a
// page as they were at the last msync and others as they were later: the
// newer whole slot is never older than the state that msync made durable.
// A slot is 32 bytes and a journal of format 3 starts a tail at a multiple
// of 32 in the file, so that a slot never straddles two disk sectors: a
// power loss leaves each slot as one sector write left it, whole.
const (
	tailWords = 8
	tailSlot  = 32 // bytes
	modBits   = 36
	modMask   = 1<<modBits - 1
)

// tailCheck is the check of a slot: 28 bits of a hash of its fields.
func tailCheck(count, aux, gen uint64, mod int64) uint64 {
	h := count*0x9e3779b97f4a7c15 ^ aux*0xc2b2ae3d27d4eb4f ^ gen*0x165667b19e3779f9 ^ uint64(mod)*0x27d4eb2f165667c5
	h ^= h >> 31
	h *= 0xd6e8feb86659fd93
	h ^= h >> 29
	return h >> modBits
}

// tailState is one slot of a tail.
type tailState struct {
	count, aux, gen, stamp uint64
}

func (s tailState) mod() int64 { return int64(s.stamp & modMask) }
func (s tailState) whole() bool {
	return s.gen != 0 && s.stamp>>modBits == tailCheck(s.count, s.aux, s.gen, s.mod())
}

func tailSlotAt(b []byte, k int) tailState {
	b = b[k*tailSlot : (k+1)*tailSlot]
	le := binary.LittleEndian
	return tailState{le.Uint64(b), le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[24:])}
}

// newestSlot returns the index of the whole slot of the higher generation,
// or -1 if neither was written whole.
func newestSlot(b []byte) int {
	s0, s1 := tailSlotAt(b, 0), tailSlotAt(b, 1)
	w0, w1 := s0.whole(), s1.whole()
	switch {
	case w0 && w1 && s1.gen > s0.gen, !w0 && w1:
		return 1
	case w0:
		return 0
	}
	return -1
}

// writeTail writes c's state into slot k of tail, the home of a bucket
// the table wrote, with generation gen, its stamp word last. It reports
// false, writing nothing, for a state a slot cannot hold.
func writeTail(tail []byte, c *cell, k int, gen uint64) bool {
	mod := c.modifiedOff() - c.createdOff()
	if mod < 0 || mod > modMask || c.count < 0 {
		return false
	}
	b := tail[k*tailSlot : (k+1)*tailSlot]
	le := binary.LittleEndian
	le.PutUint64(b, uint64(c.count))
	le.PutUint64(b[8:], uint64(c.aux))
	le.PutUint64(b[16:], gen)
	le.PutUint64(b[24:], uint64(mod)|tailCheck(uint64(c.count), uint64(c.aux), gen, mod)<<modBits)
	return true
}

// ChangesTo is Changes writing to l: each record Changes would pass to its
// fn goes to l.Append, but for a bucket the journal holds already (a
// repeat hit), in a batch of one bucket or of many, whose change l
// appends in a record of its own with a tail (the bucket's home), and for
// a bucket with a home, whose state is written into its tail instead of a
// record. From the first call on, the table keeps l and writes such a
// bucket's change into its home as it makes it, outside a unit (Begin),
// so that ChangesTo has nothing to do for it. A unit's changes may so
// take several records: a process killed between two of them recovers
// part of a unit that was never answered, which counts hits, never admits
// more. Errors are as Changes's: what l did not take stays for the next
// call. l must be the same log at every call, as the references bound and
// the homes are its (a table recovered from a journal goes on writing to
// it; a new journal needs a new table).
func (t *Table) ChangesTo(l TailLog) error {
	if t.log != l {
		t.log = l
	}
	if len(t.deleted)+len(t.changed) == 0 {
		return nil
	}
	if e := l.Epoch(); e != t.homeEpoch {
		clear(t.homes) // of a segment the journal left
		t.homeEpoch = e
	}
	if err := t.homeAll(l); err != nil {
		return err
	}
	if len(t.deleted)+len(t.changed) == 0 {
		return nil
	}
	return t.changes(l.Append, l)
}

// homeAll is ChangesTo's first pass over a batch: each bucket the journal
// holds is written into its home, or gets one (its count in a record of
// its own with a tail), and leaves t.changed; the rest (new buckets, whose
// puts carry no tail, so that an id seen once costs none, and those whose
// record could not be appended) stay for changes. A bucket gets its home
// whether it comes alone or with others (a loaded shard's batch, a
// pipeline's), and journals one record per segment either way, not a
// count per batch.
func (t *Table) homeAll(l TailLog) error {
	kept := t.changed[:0]
	for k, it := range t.changed {
		i := it.slot()
		if !t.bound(i) {
			kept = append(kept, it)
			continue
		}
		if !t.rewrite(l, i, t.slots.cell(i)) {
			if err := t.homeRecord(l, it); err != nil {
				t.changed = append(kept, t.changed[k:]...)
				return err
			}
		}
		t.dirty[i/64] &^= 1 << (i % 64)
	}
	t.changed = kept
	return nil
}

// homeRecord appends the change of it, a bucket the journal holds and
// without a home, as its count with a tail, which becomes its home.
func (t *Table) homeRecord(l TailLog, it item) error {
	i := it.slot()
	w := &t.w
	w.reset2(t.rec)
	w.deltaCell(refOf(i), t.byID[it.gid()].key.alg.gcra(), t.slots.cell(i))
	t.rec = w.b
	t.unhome(i)
	epoch, pos, err := l.AppendTail(w.b, tailWords)
	if err != nil {
		return err
	}
	if epoch != t.homeEpoch { // the append rolled to a new segment
		clear(t.homes)
		t.homeEpoch = epoch
	}
	t.setHome(i, pos)
	t.bind(i)
	return nil
}

// rewrite writes the state of slot i (c) into its home in l and reports
// whether it did; it forgets a home l no longer has.
func (t *Table) rewrite(l TailLog, i uint32, c *cell) bool {
	if int(i) >= len(t.homes) || t.homes[i] == 0 {
		return false
	}
	tail := l.Tail(t.homeEpoch, t.homes[i], tailWords)
	if tail == nil || !writeTail(tail, c, int(c.tailNext&1), t.rewrites+1) {
		t.homes[i] = 0
		return false
	}
	t.rewrites++
	t.slots.mut(i).tailNext ^= 1
	return true
}

// setHome records pos (0: none) as the home of slot i.
func (t *Table) setHome(i uint32, pos uint32) {
	if int(i) >= len(t.homes) {
		if pos == 0 {
			return
		}
		t.homes = append(t.homes, make([]uint32, int(i)+1-len(t.homes))...)
	}
	t.homes[i] = pos
}

// unhome forgets the home of slot i: a record holds a later state of its
// bucket, or the bucket is no longer the one its home names.
func (t *Table) unhome(i uint32) {
	if int(i) < len(t.homes) {
		t.homes[i] = 0
	}
}

// applyTail replaces the state of the one entry Restore took from a record
// with the state its tail holds, if a slot of it was written whole.
func (t *Table) applyTail(tail []byte) error {
	if len(tail) != tailWords*8 {
		return fmt.Errorf("%w: tail is %d bytes, want %d", ErrBadRecord, len(tail), tailWords*8)
	}
	if len(t.pend) != 1 || t.pend[0].kind != recordPut && t.pend[0].kind != entryCount && t.pend[0].kind != entryTAT {
		return fmt.Errorf("%w: a record with a tail holds %d entries, want one put, count or tat", ErrBadRecord, len(t.pend))
	}
	k := newestSlot(tail)
	if k < 0 {
		return nil
	}
	s := tailSlotAt(tail, k)
	p := &t.pend[0]
	count, aux, mod := int64(s.count), int64(s.aux), s.mod()
	if count < 0 {
		return fmt.Errorf("%w: tail count %d is above %d", ErrBadRecord, s.count, int64(1<<63-1))
	}
	switch p.kind {
	case recordPut:
		key := &t.pendKeys[p.key]
		maxAux := int64(0)
		switch {
		case key.alg == SlidingWindow:
			maxAux = 1<<63 - 1
		case key.alg.gcra():
			maxAux = 2 * key.widthMs * msNs
		}
		if aux < 0 || aux > maxAux {
			return fmt.Errorf("%w: tail aux %d is outside [0, %d]", ErrBadRecord, aux, maxAux)
		}
		if mod >= key.widthMs {
			return fmt.Errorf("%w: tail modified %d is outside [0, %d]", ErrBadRecord, mod, key.widthMs-1)
		}
		p.count, p.aux, p.modified = count, aux, p.created+mod
	case entryTAT:
		if aux < 0 || aux > maxTATAux {
			return fmt.Errorf("%w: tail aux %d is outside [0, %d]", ErrBadRecord, aux, maxTATAux)
		}
		p.count, p.aux, p.modified = count, aux, mod
	default: // a count entry: the bucket's aux never changes with a hit
		p.count, p.modified = count, mod
	}
	return nil
}
