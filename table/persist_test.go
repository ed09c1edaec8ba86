package table

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// snapshotOf lists every bucket of tb visible at now as "id/scale/limit/window=count created modified".
func snapshotOf(tb *Table, now time.Time) []string {
	_, ms := tb.advance(now)
	var out []string
	tb.tree.Scan(func(it item) bool {
		g := tb.byID[it.gid()]
		if g.key.expired(it.bucket, ms, tb.ttlMs) {
			return true
		}
		s := tb.slots.at(it.slot())
		k := g.key
		out = append(out, fmt.Sprintf("%s/%d/%d/%d=%d %d %d|%s/%v/%d/%d aux %d", s.id, k.scaleMs, k.limit, it.bucket, s.count, s.created, s.modified, k.ns, k.alg, k.widthMs, k.burst, s.aux))
		return true
	})
	sort.Strings(out)
	return out
}

// collect returns a copy of every record fn reports.
func collect(t *testing.T, each func(func([]byte) error) error) [][]byte {
	t.Helper()
	var recs [][]byte
	if err := each(func(rec []byte) error {
		recs = append(recs, bytes.Clone(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

func restoreAll(t *testing.T, tb *Table, recs [][]byte, now time.Time) {
	t.Helper()
	for i, rec := range recs {
		if err := tb.Restore(rec, now); err != nil {
			t.Fatalf("restore record %d (%x): %v", i, rec, err)
		}
	}
}

func TestRecordGolden(t *testing.T) {
	t.Parallel()
	s := slot{id: "user-42", count: 7, created: 1_700_000_030_123, modified: 1_700_000_031_000}
	k := groupKey{alg: FixedWindow, scaleMs: 60_000, widthMs: 60_000, limit: 500}
	window := int64(1_700_000_030_123 / 60_000)
	var w recordWriter
	w.reset(nil)
	w.put(&k, window, &s)
	s2 := slot{id: "user-43", count: 1, created: s.created, modified: s.created}
	w.put(&k, window, &s2) // same limit: no second group entry
	got := hex.EncodeToString(w.b)
	// record 10; group 11: fixed_window 00, no namespace 00, scale 60000
	// (e0d403), width 60000 (e0d403), limit 500 (f403), burst 00;
	// put 01: window 28333333 (zigzag: aad4821b), count 7 (07), aux 0 (00),
	// created +50123 ms (zigzag: 968f06), modified +877 ms (zigzag: da0d),
	// id "user-42" (07 …); put 01: … id "user-43".
	const want = "1011" + "0000e0d403e0d403f40300" +
		"01aad4821b0700968f06da0d07757365722d3432" +
		"01aad4821b0100968f060007757365722d3433"
	if got != want {
		t.Fatalf("record bytes changed:\ngot  %s\nwant %s\n(a format change needs a new kind byte and a decoder for the old one)", got, want)
	}
	ds := decodeAll(t, w.b)
	if len(ds) != 2 || ds[0].slot != s || ds[1].slot != s2 || ds[0].key != k || ds[0].window != window || ds[0].kind != recordPut {
		t.Fatalf("decode: got %+v; want %+v and %+v in window %d", ds, s, s2, window)
	}
}

// decodeAll returns the entries of records.
func decodeAll(t testing.TB, recs ...[]byte) []decoded {
	t.Helper()
	var out []decoded
	for _, rec := range recs {
		if err := decodeRecord(rec, func(d *decoded) error { out = append(out, *d); return nil }); err != nil {
			t.Fatalf("decode %x: %v", rec, err)
		}
	}
	return out
}

func TestChangesReportEachChangedBucketOnce(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	second := Request{Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}
	for _, id := range []string{"a", "b", "a", "c", "a"} {
		r := second
		r.ID = id
		tb.Apply(r, at(5))
	}
	tb.Apply(Request{ID: "a", Policy: Policy{Scale: time.Minute, Limit: 3}, Hits: 2}, at(6))
	tb.Apply(Request{ID: "b", Policy: Policy{Scale: time.Second, Limit: 10}}, at(7))         // a peek changes nothing
	tb.Apply(Request{ID: "d", Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 2}, at(8)) // denied: nothing
	tb.Apply(Request{ID: "a", Policy: Policy{Scale: time.Minute, Limit: 3}, Hits: 2}, at(9)) // denied: nothing
	recs := collect(t, tb.Changes)
	if n := len(decodeAll(t, recs...)); len(recs) != 1 || n != 4 {
		t.Fatalf("got %d records of %d entries, want 1 of 4 (a, b, c per second; a per minute)", len(recs), n)
	}
	if tb.Pending() != 0 {
		t.Fatalf("pending after Changes: got %d, want 0", tb.Pending())
	}
	if again := collect(t, tb.Changes); len(again) != 0 {
		t.Fatalf("second Changes with nothing new: got %d records, want 0", len(again))
	}
	fresh := New(Config{})
	restoreAll(t, fresh, recs, at(10))
	if got, want := snapshotOf(fresh, at(10)), snapshotOf(tb, at(10)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored table:\ngot  %v\nwant %v", got, want)
	}
	if b, ok := fresh.Get(Request{ID: "a", Policy: Policy{Scale: time.Second, Limit: 10}}, at(10)); !ok || b.Count != 3 || !b.CreatedAt.Equal(at(5)) || !b.ModifiedAt.Equal(at(5)) {
		t.Fatalf("restored a: got %+v, %v; want count 3 created and modified at +5ms", b, ok)
	}
	// The restored table goes on counting where the old one stopped.
	if d := fresh.Apply(Request{ID: "a", Policy: Policy{Scale: time.Minute, Limit: 3}, Hits: 1}, at(11)); !d.Allowed || d.Count != 3 {
		t.Fatalf("hit after restore: got %+v, want allowed with count 3", d)
	}
}

func TestChangesKeepsWhatTheJournalRefused(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	for _, id := range []string{"a", "b", "c"} {
		tb.Apply(Request{ID: id, Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, at(0))
	}
	full := errors.New("disk full")
	err := tb.Changes(func(rec []byte) error { return full })
	if !errors.Is(err, full) || tb.Pending() != 3 {
		t.Fatalf("got err %v, %d pending; want disk full, 3", err, tb.Pending())
	}
	tb.Apply(Request{ID: "b", Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, at(1)) // already pending
	tb.Apply(Request{ID: "d", Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, at(1))
	rest := collect(t, tb.Changes)
	if n := len(decodeAll(t, rest...)); n != 4 {
		t.Fatalf("after the refusal: got %d entries, want 4 (a, b, c, d)", n)
	}
	fresh := New(Config{})
	restoreAll(t, fresh, rest, at(2))
	if got, want := snapshotOf(fresh, at(2)), snapshotOf(tb, at(2)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored:\ngot  %v\nwant %v", got, want)
	}
}

// TestChangesKeepsARefusedRepeatHit: a repeat hit on a journaled bucket,
// the batch of one count entry, stays pending when the journal refuses it,
// and the next call reports the bucket as it is then, once.
func TestChangesKeepsARefusedRepeatHit(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	req := Request{ID: "a", Policy: Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
	tb.Apply(req, at(0))
	all := collect(t, tb.Changes) // the put that binds a reference
	tb.Apply(req, at(10))
	full := errors.New("disk full")
	if err := tb.Changes(func([]byte) error { return full }); !errors.Is(err, full) || tb.Pending() != 1 {
		t.Fatalf("got err %v, %d pending; want disk full, 1", err, tb.Pending())
	}
	tb.Apply(req, at(20))
	recs := collect(t, tb.Changes)
	if ds := decodeAll(t, recs...); len(ds) != 1 || ds[0].kind != entryCount || ds[0].slot.count != 3 || ds[0].slot.modified != 20 {
		t.Fatalf("after the refusal: %+v, want one count entry of 3, modified +20 ms", ds)
	}
	if tb.Pending() != 0 {
		t.Fatalf("%d pending after a taken record, want 0", tb.Pending())
	}
	fresh := New(Config{})
	restoreAll(t, fresh, append(all, recs...), at(30))
	if got, want := snapshotOf(fresh, at(30)), snapshotOf(tb, at(30)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored:\ngot  %v\nwant %v", got, want)
	}
}

// TestChangesCutsLargeBatches: a batch larger than a record is cut into
// records of about maxRecordBytes; when the journal refuses one, it and the
// ones after it stay pending, and nothing is lost or doubled.
func TestChangesCutsLargeBatches(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	const n = 20_000
	for i := range n {
		tb.Apply(Request{ID: fmt.Sprint("client-", i), Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, at(0))
	}
	refuse := errors.New("refused")
	var took [][]byte
	err := tb.Changes(func(rec []byte) error {
		if len(rec) > maxRecordBytes+64 {
			t.Errorf("record of %d bytes, want about %d at most", len(rec), maxRecordBytes)
		}
		if len(took) == 2 {
			return refuse
		}
		took = append(took, bytes.Clone(rec))
		return nil
	})
	first := len(decodeAll(t, took...))
	if !errors.Is(err, refuse) || first == 0 || tb.Pending() != n-first {
		t.Fatalf("got %v, %d entries taken, %d pending; want the refusal, and the rest (%d) pending", err, first, tb.Pending(), n-first)
	}
	rest := collect(t, tb.Changes)
	if got := len(decodeAll(t, rest...)); got != n-first {
		t.Fatalf("after the refusal: %d entries, want %d", got, n-first)
	}
	fresh := New(Config{})
	restoreAll(t, fresh, append(took, rest...), at(1))
	if fresh.Len() != n {
		t.Fatalf("restored %d buckets, want %d", fresh.Len(), n)
	}
}

func TestSweptChangeIsNotReported(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	tb.Apply(Request{ID: "a", Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, at(0))
	tb.Apply(Request{ID: "b", Policy: Policy{Scale: time.Minute, Limit: 10}, Hits: 1}, at(0))
	if n := tb.DeleteExpired(at(1000), 10); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	// "c" reuses a's slot: its record must be c's, reported once.
	tb.Apply(Request{ID: "c", Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, at(1000))
	fresh := New(Config{})
	recs := collect(t, tb.Changes)
	if n := len(decodeAll(t, recs...)); n != 2 {
		t.Fatalf("got %d entries, want 2 (b and c)", n)
	}
	restoreAll(t, fresh, recs, at(1000))
	if got, want := snapshotOf(fresh, at(1000)), snapshotOf(tb, at(1000)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored:\ngot  %v\nwant %v", got, want)
	}
}

func TestRestore(t *testing.T) {
	t.Parallel()
	k := groupKey{alg: FixedWindow, scaleMs: 1000, widthMs: 1000, limit: 5}
	put := func(id string, window, count int64) []byte {
		s := slot{id: id, count: count, created: window * 1000, modified: window*1000 + 10}
		return appendRecord(nil, recordPut, &k, window, &s)
	}
	del := func(id string, window int64) []byte {
		return appendRecord(nil, recordDelete, &k, window, &slot{id: id})
	}
	w := t0.UnixMilli() / 1000
	cases := []struct {
		name string
		recs [][]byte
		want []string
	}{
		{"last write wins", [][]byte{put("a", w, 1), put("a", w, 4), put("a", w, 2)}, []string{fmt.Sprintf("a/1000/5/%d=2", w)}},
		{"delete removes", [][]byte{put("a", w, 3), put("b", w, 1), del("a", w)}, []string{fmt.Sprintf("b/1000/5/%d=1", w)}},
		{"delete of a missing bucket is a no-op", [][]byte{del("a", w)}, nil},
		{"expired windows are not resurrected", [][]byte{put("old", w-1, 5), put("a", w, 1)}, []string{fmt.Sprintf("a/1000/5/%d=1", w)}},
		{"replaying twice changes nothing", [][]byte{put("a", w, 1), put("b", w, 2), put("a", w, 3), put("a", w, 1), put("b", w, 2), put("a", w, 3)},
			[]string{fmt.Sprintf("a/1000/5/%d=3", w), fmt.Sprintf("b/1000/5/%d=2", w)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tb := New(Config{})
			restoreAll(t, tb, c.recs, at(500))
			var got []string
			for _, s := range snapshotOf(tb, at(500)) {
				got = append(got, s[:bytes.IndexByte([]byte(s), ' ')])
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestRestoreRejectsBadRecords(t *testing.T) {
	t.Parallel()
	good := appendRecord(nil, recordPut, &groupKey{scaleMs: 1000, widthMs: 1000, limit: 5}, t0.UnixMilli()/1000, &slot{id: "a", count: 1, created: t0.UnixMilli(), modified: t0.UnixMilli()})
	mutate := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"empty":           nil,
		"unknown kind":    mutate(func(b []byte) []byte { b[0] = 9; return b }),
		"unknown entry":   mutate(func(b []byte) []byte { b[1] = 0x7f; return b }),
		"unknown alg":     mutate(func(b []byte) []byte { b[2] = 200; return b }),
		"entry first":     mutate(func(b []byte) []byte { return append([]byte{0x10}, b[bytes.IndexByte(b[2:], recordPut)+2:]...) }),
		"no entry":        {0x10},
		"truncated":       good[:len(good)-1],
		"trailing byte":   append(bytes.Clone(good), 'x'),
		"scale 0":         appendRecord(nil, recordPut, &groupKey{scaleMs: 0, widthMs: 0, limit: 5}, 1, &slot{id: "a"}),
		"scale too large": appendRecord(nil, recordPut, &groupKey{scaleMs: int64(MaxScale/time.Millisecond) + 1, widthMs: int64(MaxScale/time.Millisecond) + 1, limit: 5}, 1, &slot{id: "a"}),
		"empty id":        appendRecord(nil, recordPut, &groupKey{scaleMs: 1000, widthMs: 1000, limit: 5}, 1, &slot{id: "", created: 1000, modified: 1000}),
		"created outside": appendRecord(nil, recordPut, &groupKey{scaleMs: 1000, widthMs: 1000, limit: 5}, 1, &slot{id: "a", created: 5000, modified: 5000}),
		"overlong varint": append([]byte{1, 0}, bytes.Repeat([]byte{0xff}, 11)...),
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tb := New(Config{})
			if err := tb.Restore(rec, t0); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("Restore(%x): got %v, want ErrBadRecord", rec, err)
			}
			if tb.Len() != 0 {
				t.Fatalf("a bad record left %d buckets", tb.Len())
			}
		})
	}
}

// TestFreezeIsConsistent writes a Frozen table out on another goroutine
// while the owner goes on hitting, creating and sweeping buckets: the records
// are exactly the table at the Freeze (run with -race).
func TestFreezeIsConsistent(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	const ids = 2*pageSize + 100 // three pages
	for i := range ids {
		tb.Apply(Request{ID: fmt.Sprint("id-", i), Policy: Policy{Scale: time.Duration(1+i%3) * time.Second, Limit: 100}, Hits: int64(1 + i%5)}, at(int64(i%500)))
	}
	tb.Apply(Request{ID: "expired", Policy: Policy{Scale: time.Millisecond, Limit: 1}, Hits: 1}, at(0))
	want := snapshotOf(tb, at(999))
	f := tb.Freeze(at(999))
	var got []string
	var wg sync.WaitGroup
	wg.Go(func() {
		fresh := New(Config{})
		recs := collect(t, f.Records)
		restoreAll(t, fresh, recs, at(999))
		got = snapshotOf(fresh, at(999))
	})
	for i := range ids {
		tb.Apply(Request{ID: fmt.Sprint("id-", i), Policy: Policy{Scale: time.Duration(1+i%3) * time.Second, Limit: 100}, Hits: 1}, at(999))
		tb.Apply(Request{ID: fmt.Sprint("new-", i), Policy: Policy{Scale: time.Second, Limit: 100}, Hits: 1}, at(999))
	}
	tb.DeleteExpired(at(2500), ids)
	wg.Wait()
	tb.Thaw(f)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frozen records differ from the table at the freeze: got %d buckets, want %d", len(got), len(want))
	}
	if tb.slots.frozen != 0 {
		t.Fatalf("after Thaw the slab still counts %d frozen views", tb.slots.frozen)
	}
}

// TestRecoveryAgainstTheLiveTable replays a journal — a snapshot taken at a
// random point plus the changes after it — after every batch of random
// traffic (every algorithm, rules and ad-hoc limits, refunds, resets, a
// bounded table that evicts or refuses, sweeps), and compares the result
// with the live table (seeded; the seed is printed).
// TestRecoveryAgainstTheLiveTable: a table restored from the snapshot and
// the records of a live one, after every batch of random work on it, holds
// what it holds; with ids in cells and ids in the arena.
func TestRecoveryAgainstTheLiveTable(t *testing.T) {
	t.Parallel()
	withEachIDPrefix(t, recoverLiveTable)
}

func recoverLiveTable(t *testing.T, prefix string) {
	rng, seed := seeded(t, 0)
	tb := New(Config{TrackChanges: true, BucketTTL: time.Duration(rng.IntN(3)) * time.Second, MaxBuckets: 40 + rng.IntN(100), Evict: rng.IntN(2) == 0})
	var snap, log [][]byte
	now := int64(0)
	for batch := range 300 {
		for range rng.IntN(50) {
			now += int64(rng.IntN(40))
			req := Request{
				ID:     fmt.Sprint(prefix, "k", rng.IntN(30)),
				Policy: Policy{Scale: time.Duration(1+rng.IntN(4)) * 500 * time.Millisecond, Limit: int64(rng.IntN(6)), Algorithm: Algorithm(rng.IntN(numAlgorithms)), Burst: int64(rng.IntN(3)) * 4},
				Hits:   int64(rng.IntN(3)),
			}
			if rng.IntN(3) == 0 {
				req.Namespace = "rule"
			}
			randomChange(rng, tb, req, now, false)
		}
		if rng.IntN(4) == 0 {
			tb.DeleteExpired(at(now), rng.IntN(20))
		}
		log = append(log, collect(t, tb.Changes)...)
		if rng.IntN(20) == 0 {
			f := tb.Freeze(at(now))
			snap, log = collect(t, f.Records), nil
			tb.Thaw(f)
		}
		fresh := New(Config{BucketTTL: tb.ttlMsDuration()})
		restoreAll(t, fresh, snap, at(now))
		restoreAll(t, fresh, log, at(now))
		if got, want := snapshotOf(fresh, at(now)), snapshotOf(tb, at(now)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("batch %d (seed %d): recovered\n%v\nwant\n%v", batch, seed, got, want)
		}
	}
}

func (t *Table) ttlMsDuration() time.Duration { return time.Duration(t.ttlMs) * time.Millisecond }

func FuzzRestore(f *testing.F) {
	f.Add(appendRecord(nil, recordPut, &groupKey{scaleMs: 1000, widthMs: 1000, limit: 5}, 1_700_000, &slot{id: "a", count: 3, created: 1_700_000_000, modified: 1_700_000_500}))
	f.Add(appendRecord(nil, recordDelete, &groupKey{scaleMs: 60_000, widthMs: 60_000, limit: 0}, -3, &slot{id: "bee"}))
	f.Add([]byte{0x10, 0x11, 0, 0x80})
	f.Add([]byte{0x20, 0x05, 0x01, 0x07, 0x02})
	f.Add([]byte{0x20, 0x04, 0x03, 0x06, 0x02, 0x01, 0x80, 0x10, 0x00})
	f.Fuzz(func(t *testing.T, rec []byte) {
		var ds []decoded
		err := decodeRecord(rec, func(d *decoded) error { ds = append(ds, *d); return nil })
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not match ErrBadRecord", err)
			}
			tb := New(Config{})
			if err := tb.Restore(rec, time.Unix(0, 0)); err == nil || tb.Len() != 0 {
				t.Fatalf("Restore of an undecodable record: %v, %d buckets", err, tb.Len())
			}
			return
		}
		// Whatever decodes re-encodes to a record that decodes to the same
		// entries: the same fields of each, as its kind has them (a drop,
		// count or tat names its bucket by reference: the group and
		// window the decoder carries from the put or delete before it are
		// not its own, and the writer puts no group before it).
		var w recordWriter
		w.reset(nil)
		if rec[0] == recordBatch2 {
			w.reset2(nil)
		}
		for i := range ds {
			w.entry(&ds[i])
		}
		again := decodeAll(t, w.b)
		if fmt.Sprint(ownFields(again)) != fmt.Sprint(ownFields(ds)) {
			t.Fatalf("re-encoded %+v decodes to %+v", ds, again)
		}
		tb := New(Config{})
		if err := tb.Restore(rec, time.UnixMilli(ds[0].window*ds[0].key.widthMs)); err != nil {
			t.Fatalf("Restore of a decodable record: %v", err)
		}
	})
}

// ownFields returns ds with only the fields each entry's kind has: no
// group or window for a drop, count or tat.
func ownFields(ds []decoded) []decoded {
	out := slices.Clone(ds)
	for i := range out {
		switch out[i].kind {
		case entryDrop, entryCount, entryTAT:
			out[i].key, out[i].window = groupKey{}, 0
		}
	}
	return out
}

// TestRefMapKeepsReferencesBoundBeyondItsSlice: a snapshot writes its
// buckets in key order, not slot order, so a large reference can be bound
// before the slice of references grows past it; it must stay bound.
func TestRefMapKeepsReferencesBoundBeyondItsSlice(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	tb.setRef(50_000, 7) // far beyond the empty slice: kept aside
	for ref := uint64(1); ref <= 60_000; ref += 997 {
		tb.setRef(ref, uint32(ref))
	}
	if len(tb.refs.dense) <= 50_000 {
		t.Fatalf("the slice holds %d references: the test does not grow it past 50,000", len(tb.refs.dense))
	}
	if slot, ok := tb.refSlot(50_000); !ok || slot != 6 {
		t.Fatalf("reference 50,000: got slot %d, %v; want 6, true", slot, ok)
	}
}

// TestSnapshotReferencesGoInTheSlice: a snapshot lists a window's buckets
// newest first, so its references come in descending order, the first near
// the largest; replaying one must bind them all in the slice of references
// (none in the map kept for the few far beyond it), and a count entry
// after it must reach the bucket its reference names.
func TestSnapshotReferencesGoInTheSlice(t *testing.T) {
	t.Parallel()
	const n = 20_000
	src := New(Config{TrackChanges: true})
	req := func(i int) Request {
		return Request{ID: fmt.Sprintf("user-%d", i), Policy: Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
	}
	for i := range n {
		src.Apply(req(i), at(0))
	}
	collect(t, src.Changes) // binds every bucket, so the next hit is a count entry
	f := src.Freeze(at(0))
	snap := collect(t, f.Records)
	src.Thaw(f)
	if first := decodeAll(t, snap[0])[0].ref; first < n/2 {
		t.Fatalf("the snapshot's first reference is %d: the test wants it near %d", first, n)
	}
	src.Apply(req(n-1), at(0))
	src.Apply(req(n-1), at(0))
	src.Apply(req(0), at(0))
	deltas := collect(t, src.Changes)
	dst := New(Config{})
	restoreAll(t, dst, snap, at(0))
	if len(dst.refs.sparse) != 0 || len(dst.refs.dense) < n+1 {
		t.Fatalf("after the snapshot: %d references in the map, %d in the slice; want 0 and at least %d", len(dst.refs.sparse), len(dst.refs.dense), n+1)
	}
	restoreAll(t, dst, deltas, at(0))
	dst.RestoreDone()
	for _, c := range []struct{ i, want int }{{n - 1, 3}, {0, 2}, {n / 2, 1}} {
		peek := req(c.i)
		peek.Hits = 0
		if got := dst.Apply(peek, at(0)).Count; got != int64(c.want) {
			t.Errorf("%s: count %d, want %d", peek.ID, got, c.want)
		}
	}
}
