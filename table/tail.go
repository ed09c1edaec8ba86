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

// A bucket's tail holds two slots of three words each, written in turn:
// count, aux, and a word of the stamp (modified, in ms after created: 36
// bits), the slot's generation (2 bits: 1, 2, 3 and around again, 0 in a
// slot never written) and a check (26 bits) of the other fields. A rewrite
// goes to the slot that is not the newest, its stamp word last, so that a
// process killed in the middle of one leaves the other slot whole:
// recovery takes the newest slot whose check holds (of two whole slots,
// the one whose generation follows the other's: a slot cut in the middle
// of its rewrite still holds the generation before the other's, or fails
// its check), that is, the state of the last change a Commit ended (a
// change cut off was never answered).
const (
	tailWords = 6
	tailSlot  = 24 // bytes
	modBits   = 36
	genBits   = 2
	genShift  = modBits
	chkShift  = modBits + genBits
	modMask   = 1<<modBits - 1
	genMask   = 1<<genBits - 1
	fieldMask = 1<<chkShift - 1 // the stamp word without its check
)

// tailCheck is the check of a slot: 26 bits of a hash of its fields.
func tailCheck(count, aux, stamp uint64) uint64 {
	h := count*0x9e3779b97f4a7c15 ^ aux*0xc2b2ae3d27d4eb4f ^ (stamp&fieldMask)*0x165667b19e3779f9
	h ^= h >> 31
	h *= 0xd6e8feb86659fd93
	return h >> chkShift
}

// nextGen is the generation after g: 1, 2, 3, then 1 again.
func nextGen(g uint64) uint64 { return g%3 + 1 }

// A home, as Table.homes keeps it, is the tail's position (a multiple of
// 8) with, in its low 3 bits, how far its rewrites went: 0 for none, else
// 1 to 6 and around again, so that the table knows which slot to write
// and with which generation without reading the tail: the n-th rewrite
// (from 1) writes slot (n-1) mod 2 with generation (n-1) mod 3 + 1.
const homeState = 7

// tailState is one slot of a tail.
type tailState struct {
	count, aux, stamp uint64
}

func (s tailState) gen() uint64 { return s.stamp >> genShift & genMask }
func (s tailState) mod() int64  { return int64(s.stamp & modMask) }
func (s tailState) whole() bool {
	return s.gen() != 0 && s.stamp>>chkShift == tailCheck(s.count, s.aux, s.stamp)
}

func tailSlotAt(b []byte, k int) tailState {
	b = b[k*tailSlot : (k+1)*tailSlot]
	return tailState{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])}
}

// newestSlot returns the index of the newest slot whose check holds, or -1
// if neither was written whole, or an error if both were and neither
// follows the other.
func newestSlot(b []byte) (int, error) {
	s0, s1 := tailSlotAt(b, 0), tailSlotAt(b, 1)
	w0, w1 := s0.whole(), s1.whole()
	switch {
	case w0 && w1:
		switch {
		case s1.gen() == nextGen(s0.gen()):
			return 1, nil
		case s0.gen() == nextGen(s1.gen()):
			return 0, nil
		}
		return -1, fmt.Errorf("%w: tail slots of generations %d and %d, neither the next of the other", ErrBadRecord, s0.gen(), s1.gen())
	case w0:
		return 0, nil
	case w1:
		return 1, nil
	}
	return -1, nil
}

// writeTail writes c's state into tail, the home of a bucket the table
// wrote, whose rewrites went as far as state (see homeState): into the
// slot that is not the newest, its stamp word last. It returns the new
// state, or 0, writing nothing, for a state a slot cannot hold.
func writeTail(tail []byte, c *cell, state uint32) uint32 {
	mod := c.modifiedOff() - c.createdOff()
	if mod < 0 || mod > modMask || c.count < 0 {
		return 0
	}
	state = state%6 + 1
	k, gen := (state-1)%2, uint64((state-1)%3+1)
	stamp := uint64(mod) | gen<<genShift
	stamp |= tailCheck(uint64(c.count), uint64(c.aux), stamp) << chkShift
	b := tail[k*tailSlot : (k+1)*tailSlot]
	binary.LittleEndian.PutUint64(b, uint64(c.count))
	binary.LittleEndian.PutUint64(b[8:], uint64(c.aux))
	binary.LittleEndian.PutUint64(b[16:], stamp)
	return state
}

// ChangesTo is Changes writing to l: each record Changes would pass to its
// fn goes to l.Append, but for a batch that changed one bucket the journal
// holds already and deleted none (a repeat hit, most batches), whose
// record l appends with a tail (the bucket's home), and for a bucket with
// a home, whose state is written into its tail instead of a record. From the first call on, the table
// keeps l and writes such a bucket's change into its home as it makes it,
// outside a unit (Begin), so that ChangesTo has nothing to do for it.
// Errors are as Changes's: what l did not take stays for the next call.
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
	if len(t.deleted) == 0 && len(t.changed) == 1 {
		return t.changedOneTail(l)
	}
	return t.changes(l.Append, l)
}

// changedOneTail is ChangesTo for a batch that changed one bucket: its
// tail rewritten if it has a home; else, for a bucket the journal holds
// (a repeat hit), its count with a tail that becomes its home; else its
// put, without a tail, so that a bucket hit once (most of them, where
// most ids come once) costs no tail.
func (t *Table) changedOneTail(l TailLog) error {
	it := t.changed[0]
	i := it.slot()
	if !t.bound(i) {
		return t.changes(l.Append, l)
	}
	c := t.slots.cell(i)
	if t.rewrite(l, i, c) {
		t.dirty[i/64] &^= 1 << (i % 64)
		t.changed = t.changed[:0]
		return nil
	}
	w := &t.w
	w.reset2(t.rec)
	w.deltaCell(refOf(i), t.byID[it.gid()].key.alg.gcra(), c)
	t.rec = w.b
	t.unhome(i)
	epoch, pos, err := l.AppendTail(w.b, tailWords)
	if err != nil {
		return err // the change stays, for the next call
	}
	if epoch != t.homeEpoch { // the append rolled to a new segment
		clear(t.homes)
		t.homeEpoch = epoch
	}
	t.setHome(i, pos)
	t.dirty[i/64] &^= 1 << (i % 64)
	t.bind(i)
	t.changed = t.changed[:0]
	return nil
}

// rewrite writes the state of slot i (c) into its home in l and reports
// whether it did; it forgets a home l no longer has.
func (t *Table) rewrite(l TailLog, i uint32, c *cell) bool {
	if int(i) >= len(t.homes) || t.homes[i] == 0 {
		return false
	}
	h := t.homes[i]
	tail := l.Tail(t.homeEpoch, h&^homeState, tailWords)
	if tail == nil {
		t.homes[i] = 0
		return false
	}
	state := writeTail(tail, c, h&homeState)
	if state == 0 {
		t.homes[i] = 0
		return false
	}
	t.homes[i] = h&^homeState | state
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
	k, err := newestSlot(tail)
	if err != nil || k < 0 {
		return err
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
