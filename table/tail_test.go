package table

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// memLog is a TailLog in memory, as a journal of format 3 behaves: records
// in order, each with its tail (nil if none), a tail rewritable until the
// epoch changes.
type memLog struct {
	recs   [][]byte
	tails  [][]byte // by record; nil: none
	epoch  uint64
	from   int // the first record of the current epoch
	noTail bool
	fail   error // returned by the next append, once
}

func newMemLog() *memLog { return &memLog{epoch: 1} }

func (l *memLog) append(rec []byte, words int) (uint32, error) {
	if err := l.fail; err != nil {
		l.fail = nil
		return 0, err
	}
	l.recs = append(l.recs, bytes.Clone(rec))
	if words == 0 || l.noTail {
		l.tails = append(l.tails, nil)
		return 0, nil
	}
	l.tails = append(l.tails, make([]byte, 8*words))
	return 8 * uint32(len(l.recs)), nil // 8 times the record's number, from 1: a position, a multiple of 8
}

func (l *memLog) Append(rec []byte) error { _, err := l.append(rec, 0); return err }

func (l *memLog) AppendTail(rec []byte, words int) (uint64, uint32, error) {
	pos, err := l.append(rec, words)
	return l.epoch, pos, err
}

func (l *memLog) Tail(epoch uint64, pos uint32, words int) []byte {
	i := int(pos/8) - 1
	if pos%8 != 0 || epoch != l.epoch || i < l.from || i >= len(l.tails) || len(l.tails[i]) != 8*words {
		return nil
	}
	return l.tails[i]
}

func (l *memLog) Epoch() uint64 { return l.epoch }

// roll starts a new epoch, as a journal's roll to a new segment.
func (l *memLog) roll() { l.epoch, l.from = l.epoch+1, len(l.recs) }

// replay restores every record with its tail into a new table.
func (l *memLog) replay(t *testing.T, now time.Time) *Table {
	t.Helper()
	tb := New(Config{})
	for i, rec := range l.recs {
		if err := tb.RestoreTail(rec, l.tails[i], now); err != nil {
			t.Fatalf("restore record %d (%x, tail %x): %v", i, rec, l.tails[i], err)
		}
	}
	tb.RestoreDone()
	return tb
}

// replaysAs checks that the log's records, replayed with their tails into
// a new table, give every bucket of tb exactly as tb has it at now.
func (l *memLog) replaysAs(t *testing.T, tb *Table, now time.Time) {
	t.Helper()
	if got, want := snapshotOf(l.replay(t, now), now), snapshotOf(tb, now); !slices.Equal(got, want) {
		t.Fatalf("replayed:\n%q\nwant\n%q", got, want)
	}
}

// withEachAlgorithm runs fn in a parallel subtest for each algorithm,
// with a table that tracks its changes and an empty memLog.
func withEachAlgorithm(t *testing.T, fn func(t *testing.T, alg Algorithm, tb *Table, l *memLog)) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, alg, New(Config{TrackChanges: true}), newMemLog())
		})
	}
}

func changesTo(t *testing.T, tb *Table, l *memLog) {
	t.Helper()
	if err := tb.ChangesTo(l); err != nil {
		t.Fatal(err)
	}
}

// TestChangesToTails: a bucket's first batch appends its put, without a
// tail; its second, a repeat hit, its count with a tail; each later batch
// of that bucket alone rewrites the tail and appends nothing; a replay of
// the records with their tails gives every bucket's state exactly (count,
// aux, stamps), for every algorithm.
func TestChangesToTails(t *testing.T) {
	t.Parallel()
	withEachAlgorithm(t, func(t *testing.T, alg Algorithm, tb *Table, l *memLog) {
		r := Request{ID: "u", Policy: Policy{Scale: 10 * time.Second, Limit: 1000, Algorithm: alg}, Hits: 1}
		ms := int64(0)
		for i := range 300 {
			ms += 7
			r.ID = fmt.Sprint("u", i%3)
			tb.Apply(r, at(ms))
			changesTo(t, tb, l)
			if len(l.recs) != min(i+1, 6) {
				t.Fatalf("after %d single-bucket batches: %d records, want %d", i+1, len(l.recs), min(i+1, 6))
			}
		}
		for i, tail := range l.tails {
			if (tail != nil) != (i >= 3) {
				t.Fatalf("record %d has a tail %v, want one on the counts (records 3 to 5) only", i, tail != nil)
			}
		}
		l.replaysAs(t, tb, at(ms))
	})
}

// TestChangesToEpoch: after the journal's epoch changes (a roll), a
// bucket's next batch appends a count entry with a new tail (its first,
// the put, had none), then rewrites that one; the old tail keeps the state it had at the roll, and
// the replay is exact. Without tails (a segment of an older format, pos
// 0) every batch is a record.
func TestChangesToEpoch(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	l := newMemLog()
	r := Request{ID: "e", Policy: Policy{Scale: time.Minute, Limit: 100}, Hits: 1}
	for i := range 5 {
		tb.Apply(r, at(int64(i)))
		changesTo(t, tb, l)
	}
	l.roll()
	for i := range 5 {
		tb.Apply(r, at(int64(10+i)))
		changesTo(t, tb, l)
	}
	if len(l.recs) != 3 {
		t.Fatalf("%d records, want 3 (the put, a count with a tail, a count after the roll)", len(l.recs))
	}
	ds := decodeAll(t, l.recs[2])
	if len(ds) != 1 || ds[0].kind != entryCount || ds[0].slot.count != 6 || l.tails[2] == nil {
		t.Fatalf("the record after the roll: %+v, want a count entry of 6 with a tail", ds)
	}
	if s := newestSlot(l.tails[1]); s < 0 || tailSlotAt(l.tails[1], s).count != 5 {
		t.Fatalf("the first tail: newest slot %d, want one holding 5", s)
	}
	l.replaysAs(t, tb, at(20))
	l.roll()
	l.noTail = true
	for i := range 3 {
		tb.Apply(r, at(int64(30+i)))
		changesTo(t, tb, l)
	}
	if len(l.recs) != 6 {
		t.Fatalf("%d records, want 6 (one per batch without tails)", len(l.recs))
	}
	l.replaysAs(t, tb, at(40))
}

// TestChangesToBatches: a batch of several buckets rewrites the tails of
// those that have one and writes the new ones (their puts) in one record
// without a tail, their latest from then on (their next batch writes a
// record with a tail); deletions and window moves drop a home.
func TestChangesToBatches(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	l := newMemLog()
	p := Policy{Scale: time.Second, Limit: 100}
	a, b, c := Request{ID: "a", Policy: p, Hits: 1}, Request{ID: "b", Policy: p, Hits: 1}, Request{ID: "c", Policy: p, Hits: 1}
	tb.Apply(a, at(1))
	changesTo(t, tb, l) // a: its put
	tb.Apply(a, at(1))
	changesTo(t, tb, l) // a: a count with a tail
	tb.Apply(a, at(2))
	tb.Apply(b, at(2))
	tb.Apply(c, at(2))
	changesTo(t, tb, l) // a rewritten; b and c in one record
	if len(l.recs) != 3 || l.tails[1] == nil || l.tails[2] != nil {
		t.Fatalf("%d records, want 3, the second with a tail and the third without", len(l.recs))
	}
	if ds := decodeAll(t, l.recs[2]); len(ds) != 2 || ds[0].slot.id != "b" || ds[1].slot.id != "c" {
		t.Fatalf("the batch's record: %+v, want puts of b and c", ds)
	}
	tb.Apply(b, at(3))
	changesTo(t, tb, l) // b: a count with a tail
	tb.Apply(b, at(4))
	changesTo(t, tb, l) // rewritten
	if len(l.recs) != 4 || l.tails[3] == nil {
		t.Fatalf("%d records, want 4, the last with a tail", len(l.recs))
	}
	if n := tb.Reset(b, at(5)); n != 1 {
		t.Fatalf("Reset: %d, want 1", n)
	}
	tb.Apply(b, at(5))
	changesTo(t, tb, l) // the drop and a new put, no tail: two entries
	tb.Apply(b, at(6))
	changesTo(t, tb, l) // b's new put has no home: a count with a tail
	if len(l.recs) != 6 || l.tails[4] != nil || l.tails[5] == nil {
		t.Fatalf("%d records, want 6: the reset's without a tail, then one with", len(l.recs))
	}
	tb.Apply(a, at(1500)) // the next window: a new bucket
	changesTo(t, tb, l)
	for ms := range int64(3) {
		tb.Apply(a, at(1501+ms))
		changesTo(t, tb, l)
	}
	if len(l.recs) != 8 {
		t.Fatalf("%d records, want 8 (a's bucket of the next window: a put, a count with a tail, rewritten)", len(l.recs))
	}
	l.replaysAs(t, tb, at(1501))
}

// TestChangesToFailure: an append that fails leaves the change for the
// next call, which writes it; a rewrite cannot fail.
func TestChangesToFailure(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	l := newMemLog()
	r := Request{ID: "f", Policy: Policy{Scale: time.Minute, Limit: 100}, Hits: 1}
	for ms, kind := range []string{"put", "count with a tail"} {
		tb.Apply(r, at(int64(1+ms)))
		l.fail = errors.New("disk full")
		if err := tb.ChangesTo(l); err == nil || tb.Pending() != 1 {
			t.Fatalf("ChangesTo with a failing append of the %s: %v, %d pending; want the error and 1", kind, err, tb.Pending())
		}
		changesTo(t, tb, l)
	}
	tb.Apply(r, at(3))
	changesTo(t, tb, l)
	if len(l.recs) != 2 || l.tails[1] == nil || tb.Pending() != 0 {
		t.Fatalf("%d records, %d pending; want 2, the second with a tail, and 0", len(l.recs), tb.Pending())
	}
	l.replaysAs(t, tb, at(3))
}

// TestTailTorn: a rewrite cut short (a process killed between its stores,
// in any order) leaves the slot's check wrong, or its generation the one
// before the other slot's, and the replay takes the other slot: the state
// of the change before, the last one answered; after every number of
// rewrites, around the cycles of slots and generations. A tail never
// rewritten leaves the record's own state.
func TestTailTorn(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	l := newMemLog()
	r := Request{ID: "t", Policy: Policy{Scale: time.Minute, Limit: 100}, Hits: 1}
	tb.Apply(r, at(1))
	changesTo(t, tb, l) // the put
	tb.Apply(r, at(1))
	changesTo(t, tb, l) // a count of 2 with a tail
	if got := peekCount(t, l.replay(t, at(1)), r); got != 2 {
		t.Fatalf("a tail never rewritten: count %d, want the record's 2", got)
	}
	for n := int64(1); n <= 13; n++ {
		before := bytes.Clone(l.tails[1])
		tb.Apply(r, at(1+n))
		changesTo(t, tb, l)
		if len(l.recs) != 2 {
			t.Fatalf("rewrite %d appended a record", n)
		}
		if got := peekCount(t, l.replay(t, at(20)), r); got != n+2 {
			t.Fatalf("after rewrite %d: count %d, want %d", n, got, n+2)
		}
		for word := range tailWords { // only this word of the rewrite stored
			cut := bytes.Clone(before)
			copy(cut[8*word:8*word+8], l.tails[1][8*word:8*word+8])
			l2 := &memLog{recs: l.recs, tails: [][]byte{nil, cut}, epoch: 1}
			if got := peekCount(t, l2.replay(t, at(20)), r); got != n+1 && got != n+2 {
				t.Fatalf("rewrite %d cut with only word %d stored: count %d, want %d (the change before)", n, word, got, n+1)
			} else if got == n+2 && !bytes.Equal(cut, l.tails[1]) {
				t.Fatalf("rewrite %d cut with only word %d stored: count %d, the cut rewrite's", n, word, got)
			}
		}
	}
}

func peekCount(t *testing.T, tb *Table, r Request) int64 {
	t.Helper()
	b, ok := tb.Get(r, at(10))
	if !ok {
		t.Fatalf("%s: no bucket", r.ID)
	}
	return b.Count
}

// TestRestoreTailRejects: a tail on a record it cannot belong to, or whose
// newest whole slot holds a state out of the bucket's ranges, is
// ErrBadRecord, and nothing changes; of two whole slots the one of the
// higher generation counts, whichever it is.
func TestRestoreTailRejects(t *testing.T) {
	t.Parallel()
	src := New(Config{TrackChanges: true})
	p := Policy{Scale: time.Minute, Limit: 100}
	src.Apply(Request{ID: "a", Policy: p, Hits: 1}, at(1))
	src.Apply(Request{ID: "b", Policy: p, Hits: 1}, at(1))
	two := collect(t, src.Changes)[0]
	src.Apply(Request{ID: "c", Policy: p, Hits: 1}, at(1))
	one := collect(t, src.Changes)[0]
	slotOf := func(count, aux uint64, mod int64, gen uint64) []byte {
		b := binary.LittleEndian.AppendUint64(nil, count)
		b = binary.LittleEndian.AppendUint64(b, aux)
		b = binary.LittleEndian.AppendUint64(b, gen)
		return binary.LittleEndian.AppendUint64(b, uint64(mod)|tailCheck(count, aux, gen, mod)<<modBits)
	}
	empty := make([]byte, tailSlot)
	cases := map[string]struct {
		rec, tail []byte
	}{
		"two entries":           {two, append(slotOf(3, 0, 0, 1), empty...)},
		"short tail":            {one, slotOf(3, 0, 0, 1)},
		"aux of a fixed window": {one, append(slotOf(3, 1, 0, 1), empty...)},
		"modified past width":   {one, append(slotOf(3, 0, 60_000, 1), empty...)},
		"count above int64":     {one, append(slotOf(1<<63, 0, 0, 1), empty...)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tb := New(Config{})
			if err := tb.RestoreTail(c.rec, c.tail, at(1)); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("RestoreTail: got %v, want ErrBadRecord", err)
			}
			if tb.Len() != 0 {
				t.Fatalf("a bad tail left %d buckets", tb.Len())
			}
		})
	}
	for _, c := range []struct {
		tail []byte
		want int64
	}{
		{append(slotOf(9, 0, 0, 7), slotOf(4, 0, 0, 5)...), 9},
		{append(slotOf(4, 0, 0, 5), slotOf(9, 0, 0, 7)...), 9},
		{append(slotOf(4, 0, 0, 5), make([]byte, tailSlot)...), 4},
		{append(make([]byte, tailSlot), slotOf(4, 0, 0, 5)...), 4},
		{make([]byte, 2*tailSlot), 1}, // never rewritten: the record's
	} {
		tb := New(Config{})
		if err := tb.RestoreTail(one, c.tail, at(1)); err != nil {
			t.Fatal(err)
		}
		if got := peekCount(t, tb, Request{ID: "c", Policy: p}); got != c.want {
			t.Fatalf("tail %x: count %d, want %d", c.tail, got, c.want)
		}
	}
}

// TestChangesToRewriteAllocs: a batch that rewrites a tail allocates
// nothing.
func TestChangesToRewriteAllocs(t *testing.T) {
	tb := New(Config{TrackChanges: true})
	l := newMemLog()
	r := Request{ID: "z", Policy: Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1}
	for range 2 { // the put, a count with a tail
		tb.Apply(r, at(1))
		changesTo(t, tb, l)
	}
	ms := int64(1)
	if n := testing.AllocsPerRun(1000, func() {
		ms++
		tb.Apply(r, at(ms))
		if err := tb.ChangesTo(l); err != nil {
			t.Fatal(err)
		}
	}); n != 0 || len(l.recs) != 2 {
		t.Fatalf("%v allocations per rewrite, %d records; want 0 and 2", n, len(l.recs))
	}
}

// TestChangesToUnit: after a ChangesTo, a change of a bucket with a home
// is written into it as it is made (nothing left for ChangesTo), but not
// inside a unit: a unit rolled back leaves the home as it was, and one
// committed is written at the next ChangesTo.
func TestChangesToUnit(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	l := newMemLog()
	r := Request{ID: "u", Policy: Policy{Scale: time.Minute, Limit: 100}, Hits: 1}
	tb.Apply(r, at(1))
	changesTo(t, tb, l) // the put
	tb.Apply(r, at(1))
	changesTo(t, tb, l) // a count with a tail
	tb.Apply(r, at(2))
	if tb.Pending() != 0 {
		t.Fatalf("a change of a bucket with a home: %d pending, want 0 (written at once)", tb.Pending())
	}
	if got := peekCount(t, l.replay(t, at(3)), r); got != 3 {
		t.Fatalf("replayed without a ChangesTo: count %d, want 3", got)
	}
	tb.Begin()
	tb.Apply(r, at(3))
	if tb.Pending() != 1 {
		t.Fatalf("a change in a unit: %d pending, want 1", tb.Pending())
	}
	tb.Rollback()
	changesTo(t, tb, l)
	if got := peekCount(t, l.replay(t, at(4)), r); got != 3 {
		t.Fatalf("after a unit rolled back: count %d, want 3", got)
	}
	tb.Begin()
	tb.Apply(r, at(4))
	tb.Commit()
	if got := peekCount(t, l.replay(t, at(5)), r); got != 3 {
		t.Fatalf("a committed unit before ChangesTo: count %d in the journal, want 3", got)
	}
	changesTo(t, tb, l)
	if got := peekCount(t, l.replay(t, at(5)), r); got != 4 || len(l.recs) != 2 {
		t.Fatalf("after the unit's ChangesTo: count %d, %d records; want 4 and 2", got, len(l.recs))
	}
}

// FuzzRestoreTail: a record with any tail never panics: RestoreTail either
// applies it (the record decodes, holds one put, count or tat entry, and
// the tail's newest whole slot is in the bucket's ranges, or none is
// whole) or refuses it with ErrBadRecord and changes nothing; a tail of
// zeros leaves the record's own state.
func FuzzRestoreTail(f *testing.F) {
	src := New(Config{TrackChanges: true})
	l := newMemLog()
	for i, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket} {
		r := Request{ID: fmt.Sprint("f", i), Policy: Policy{Scale: time.Second, Limit: 50, Algorithm: alg}, Hits: 2}
		for k := range 3 {
			src.Apply(r, at(int64(10*k)))
			if err := src.ChangesTo(l); err != nil {
				f.Fatal(err)
			}
		}
		src.Apply(r, at(500))
		if err := src.ChangesTo(l); err != nil {
			f.Fatal(err)
		}
	}
	for i, rec := range l.recs {
		f.Add(rec, l.tails[i])
	}
	f.Add([]byte{0x20, 0x05, 0x01, 0x07, 0x02}, make([]byte, 8*tailWords))
	f.Fuzz(func(t *testing.T, rec, tail []byte) {
		tb := New(Config{})
		err := tb.RestoreTail(rec, tail, at(0))
		if err != nil {
			if !errors.Is(err, ErrBadRecord) || tb.Len() != 0 {
				t.Fatalf("RestoreTail refused with %v, %d buckets; want ErrBadRecord and none", err, tb.Len())
			}
			return
		}
		if len(tail) == 8*tailWords && bytes.Equal(tail, make([]byte, len(tail))) {
			plain := New(Config{})
			if err := plain.Restore(rec, at(0)); err != nil {
				t.Fatalf("Restore of a record RestoreTail took with a zero tail: %v", err)
			}
			if got, want := snapshotOf(tb, at(0)), snapshotOf(plain, at(0)); !slices.Equal(got, want) {
				t.Fatalf("a zero tail changed the state: %q, want %q", got, want)
			}
		}
	})
}

// TestTailPowerLoss: a power loss may keep some sectors of a tail's page
// as the last msync left them and others as they were later: of every mix
// of the two slots as they were at the msync and as they were after 1 to
// 5 more rewrites, the replay gives the state of the msync or a later
// one, never an earlier one.
func TestTailPowerLoss(t *testing.T) {
	t.Parallel()
	for more := int64(1); more <= 5; more++ {
		tb := New(Config{TrackChanges: true})
		l := newMemLog()
		r := Request{ID: "p", Policy: Policy{Scale: time.Minute, Limit: 1000}, Hits: 1}
		for ms := range int64(7) { // a put, a count with a tail, five rewrites
			tb.Apply(r, at(ms))
			changesTo(t, tb, l)
		}
		synced := bytes.Clone(l.tails[1]) // count 7
		for ms := range more {
			tb.Apply(r, at(10+ms))
			changesTo(t, tb, l)
		}
		final := bytes.Clone(l.tails[1]) // count 7+more
		for mix := range 4 {
			img := bytes.Clone(synced)
			for k := range 2 {
				if mix&(1<<k) != 0 {
					copy(img[k*tailSlot:(k+1)*tailSlot], final[k*tailSlot:(k+1)*tailSlot])
				}
			}
			l2 := &memLog{recs: l.recs, tails: [][]byte{nil, img}, epoch: 1}
			got := peekCount(t, l2.replay(t, at(20)), r)
			if got < 7 || got > 7+more || mix == 0 && got != 7 || mix == 3 && got != 7+more {
				t.Fatalf("%d rewrites after the msync, slots mixed %02b: count %d, want 7 to %d", more, mix, got, 7+more)
			}
		}
	}
}

// TestRewriteWritesFewLines: a repeat hit on a bucket with a home writes
// its cell, its tail and the table's line of the latest time, nothing
// else: the home (Table.homes) is only read, which slot comes next is in
// the cell, and the counter of rewrites is on the line of Table.nowNs
// (cache lines of 64 bytes, from the Table's start: the allocator places
// an object of its size at a multiple of 64). A line written by every
// check moves between the cores that serve a shard in turn, under its
// lock.
func TestRewriteWritesFewLines(t *testing.T) {
	t.Parallel()
	var x Table
	if a, b := unsafe.Offsetof(x.nowNs)/64, unsafe.Offsetof(x.rewrites)/64; a != b {
		t.Fatalf("nowNs at %#x and rewrites at %#x: on lines %d and %d, want one", unsafe.Offsetof(x.nowNs), unsafe.Offsetof(x.rewrites), a, b)
	}
	tb := New(Config{TrackChanges: true})
	l := newMemLog()
	ids := []string{"a", "b", "c"}
	r := Request{Policy: Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1}
	ms := int64(1)
	for range 2 { // each bucket's put, then its count with a tail
		for _, id := range ids {
			r.ID = id
			tb.Apply(r, at(ms))
			changesTo(t, tb, l)
		}
	}
	homes := slices.Clone(tb.homes)
	if len(homes) < len(ids) || slices.Contains(homes[:len(ids)], 0) {
		t.Fatalf("homes %v: want one for each of the %d buckets (slots 0 to %d)", homes, len(ids), len(ids)-1)
	}
	for i := range 100 {
		ms++
		r.ID = ids[i%len(ids)]
		tb.Apply(r, at(ms))
		changesTo(t, tb, l)
		if !slices.Equal(tb.homes, homes) {
			t.Fatalf("rewrite %d changed homes from %v to %v", i+1, homes, tb.homes)
		}
	}
	if len(l.recs) != 2*len(ids) {
		t.Fatalf("%d records, want %d (a put and a count per bucket)", len(l.recs), 2*len(ids))
	}
	l.replaysAs(t, tb, at(ms))
}

// TestChangesToBatchHomes: in a batch of several buckets, each bucket the
// journal holds gets a record of its own with a tail (its home), whatever
// comes with it (new buckets, a deletion, in one record without a tail);
// the next batches of the same buckets append nothing. An append that
// fails midway leaves the batch's remaining changes for the next call,
// and the replay is exact after every step, for every algorithm.
func TestChangesToBatchHomes(t *testing.T) {
	t.Parallel()
	withEachAlgorithm(t, func(t *testing.T, alg Algorithm, tb *Table, l *memLog) {
		req := func(id string) Request {
			return Request{ID: id, Policy: Policy{Scale: time.Minute, Limit: 1000, Algorithm: alg}, Hits: 1}
		}
		ids := []string{"a", "b", "c", "d"}
		ms := int64(1)
		batch := func(ids ...string) {
			t.Helper()
			ms += 100 // a leaky bucket of 1000 a minute admits one each 60 ms
			for _, id := range ids {
				tb.Apply(req(id), at(ms))
			}
		}
		batch(ids...)
		changesTo(t, tb, l)
		if len(l.recs) != 1 || l.tails[0] != nil {
			t.Fatalf("the first batch: %d records, want 1 without a tail (the puts)", len(l.recs))
		}
		l.replaysAs(t, tb, at(ms))
		refs := map[string]uint64{}
		for _, d := range decodeAll(t, l.recs[0]) {
			refs[d.slot.id] = d.ref
		}

		// a, b and c again, with a new bucket e and d reset (a
		// deletion): a record with a tail for each of a, b and c,
		// then one without for the drop and e's put.
		if n := tb.Reset(req("d"), at(ms)); n != 1 {
			t.Fatalf("Reset: %d, want 1", n)
		}
		batch("a", "b", "c", "e")
		changesTo(t, tb, l)
		if len(l.recs) != 5 {
			t.Fatalf("the second batch: %d records in all, want 5: %+v", len(l.recs), decodeAll(t, l.recs[1:]...))
		}
		for k, id := range []string{"a", "b", "c"} {
			ds := decodeAll(t, l.recs[1+k])
			if l.tails[1+k] == nil || len(ds) != 1 || ds[0].ref != refs[id] || refs[id] == 0 {
				t.Fatalf("record %d: %+v (tail %v), want %s's count alone with a tail", 1+k, ds, l.tails[1+k] != nil, id)
			}
		}
		if l.tails[4] != nil || len(decodeAll(t, l.recs[4])) != 2 {
			t.Fatalf("record 4: %+v, want d's drop and e's put, without a tail", decodeAll(t, l.recs[4]))
		}
		l.replaysAs(t, tb, at(ms))

		for range 20 { // rewritten in place: nothing appended
			batch("a", "b", "c")
			changesTo(t, tb, l)
		}
		if len(l.recs) != 5 {
			t.Fatalf("after 20 batches of buckets with homes: %d records, want 5", len(l.recs))
		}
		l.replaysAs(t, tb, at(ms))

		// e (held, no home) and a new bucket f, the append of e's
		// count failing: nothing is lost; the next call writes both.
		batch("e", "f", "a")
		l.fail = errors.New("disk full")
		if err := tb.ChangesTo(l); err == nil || tb.Pending() != 2 {
			t.Fatalf("ChangesTo with a failing append: %v, %d pending; want the error and 2 (e and f)", err, tb.Pending())
		}
		changesTo(t, tb, l)
		if len(l.recs) != 7 || l.tails[5] == nil || l.tails[6] != nil || tb.Pending() != 0 {
			t.Fatalf("%d records, %d pending; want 7 (e's count with a tail, f's put) and 0", len(l.recs), tb.Pending())
		}
		l.replaysAs(t, tb, at(ms))
	})
}
