package table

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRecordGolden2 pins the bytes of format 2: a put binding a reference,
// a count, a tat and a drop, and decodes them back.
func TestRecordGolden2(t *testing.T) {
	t.Parallel()
	k := groupKey{alg: FixedWindow, scaleMs: 60_000, widthMs: 60_000, limit: 500}
	window := int64(1_700_000_030_123 / 60_000)
	s := slot{id: "user-42", count: 7, created: 1_700_000_030_123, modified: 1_700_000_031_000}
	var w recordWriter
	w.reset2(nil)
	w.putRef(&k, window, 5, &s)
	w.delta(5, false, &slot{count: 300, created: s.created, modified: s.created + 1000})
	w.delta(6, true, &slot{count: 2, aux: 1_000_000, created: s.created, modified: s.created + 3})
	w.drop(70000)
	got := hex.EncodeToString(w.b)
	// record 20; group 11 as in format 1; put 03: ref 5 (05), then the
	// format-1 put's fields; count 05: ref 5, count 300 (ac02), modified
	// +1000 ms (zigzag: d00f); tat 06: ref 6, count 2, aux 1e6 ns (zigzag:
	// 80897a), modified +3 (06); drop 04: ref 70000 (f0a204).
	const want = "2011" + "0000e0d403e0d403f40300" +
		"0305aad4821b0700968f06da0d07757365722d3432" +
		"0505ac02d00f" + "0606028089" + "7a06" + "04f0a204"
	if got != want {
		t.Fatalf("record bytes changed:\ngot  %s\nwant %s\n(a format change needs a new kind byte and a decoder for the old one)", got, want)
	}
	ds := decodeAll(t, w.b)
	wantD := []decoded{
		{kind: recordPut, key: k, window: window, slot: s, ref: 5},
		{kind: entryCount, key: k, window: window, slot: slot{count: 300, modified: 1000}, ref: 5},
		{kind: entryTAT, key: k, window: window, slot: slot{count: 2, aux: 1_000_000, modified: 3}, ref: 6},
		{kind: entryDrop, key: k, window: window, ref: 70000},
	}
	if fmt.Sprint(ds) != fmt.Sprint(wantD) {
		t.Fatalf("decode:\ngot  %+v\nwant %+v", ds, wantD)
	}
}

// TestRestoreRejectsBadRecords2: format-2 entries out of place or out of
// range are refused, and nothing changes.
func TestRestoreRejectsBadRecords2(t *testing.T) {
	t.Parallel()
	cases := map[string][]byte{
		"count in a format-1 record":   {0x10, 0x05, 0x01, 0x07, 0x02},
		"put-ref in a format-1 record": mustHex(t, "1011"+"0000e0d403e0d403f40300"+"0305aad4821b0700968f06da0d07757365722d3432"),
		"format-1 put in format 2":     mustHex(t, "2011"+"0000e0d403e0d403f40300"+"01aad4821b0700968f06da0d07757365722d3432"),
		"ref 0":                        {0x20, 0x05, 0x00, 0x07, 0x02},
		"ref too large":                {0x20, 0x04, 0x81, 0x80, 0x80, 0x80, 0x10},
		"truncated count":              {0x20, 0x05, 0x01, 0x07},
		"negative modified":            {0x20, 0x05, 0x01, 0x07, 0x01},
		"tat aux too large":            append([]byte{0x20, 0x06, 0x01, 0x01}, append(varint(2*int64(MaxScale)+1), 0)...),
		"put-ref before a group":       {0x20, 0x03, 0x01, 0x00},
		"no entry":                     {0x20},
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

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func varint(v int64) []byte { return binary.AppendVarint(nil, v) }

// TestChangesWriteCountsForJournaledBuckets: a bucket's first record is a
// put binding its reference; a later hit on it (same window) is a count
// entry of a few bytes (a tat for token and leaky buckets), a token bucket
// moving to a new window is a drop and a put, and replaying every record
// rebuilds the table exactly, stamps included.
func TestChangesWriteCountsForJournaledBuckets(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	fixed := Request{ID: "user-1", Policy: Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 3}
	gcra := Request{ID: "user-2", Policy: Policy{Algorithm: TokenBucket, Scale: time.Second, Limit: 10}, Hits: 1}
	var all [][]byte
	step := func(ms int64, reqs ...Request) [][]byte {
		for _, r := range reqs {
			if d := tb.Apply(r, at(ms)); !d.Allowed {
				t.Fatalf("%+v at %d: denied", r, ms)
			}
		}
		recs := collect(t, tb.Changes)
		all = append(all, recs...)
		return recs
	}
	first := step(0, fixed, gcra)
	if ds := decodeAll(t, first...); len(ds) != 2 || ds[0].kind != recordPut || ds[0].ref == 0 || ds[1].kind != recordPut || ds[1].ref == 0 {
		t.Fatalf("first records: %+v, want two puts with references", ds)
	}
	refFixed, refGCRA := decodeAll(t, first...)[0].ref, decodeAll(t, first...)[1].ref
	recs := step(1500, fixed)
	// 20 05 <ref> 06 (count 6) dc17 (modified +1500 ms, zigzag)
	want := []byte{recordBatch2, entryCount, byte(refFixed), 6, 0xb8, 0x17}
	if len(recs) != 1 || !bytes.Equal(recs[0], want) {
		t.Fatalf("a repeat hit: got %x, want %x", recs, want)
	}
	recs = step(1600, fixed, gcra) // the token bucket moves to the window of 1600 ms
	if ds := decodeAll(t, recs...); len(ds) != 3 || ds[0].kind != entryDrop || ds[0].ref != refGCRA || ds[2].kind != recordPut || ds[2].ref != refGCRA {
		t.Fatalf("a token bucket moving windows: %+v, want a drop and a put of ref %d after the count", ds, refGCRA)
	}
	recs = step(1700, gcra)
	if ds := decodeAll(t, recs...); len(ds) != 1 || ds[0].kind != entryTAT || ds[0].ref != refGCRA || ds[0].slot.count != 1 {
		t.Fatalf("a repeat hit on a token bucket (same window): %+v, want one tat entry for ref %d", ds, refGCRA)
	}
	recs = step(1800, fixed)
	if ds := decodeAll(t, recs...); len(ds) != 1 || ds[0].kind != entryCount || ds[0].slot.count != 12 {
		t.Fatalf("another repeat hit: %+v, want one count of 12", ds)
	}
	step(2200, gcra, fixed)
	fresh := New(Config{})
	restoreAll(t, fresh, all, at(2200))
	if got, want := snapshotOf(fresh, at(2200)), snapshotOf(tb, at(2200)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed:\ngot  %v\nwant %v", got, want)
	}
}

// TestRestoredTableWritesPutsFirst: the references in a journal are the
// writer's; a table rebuilt from it binds its own, so its first record of
// each bucket is a put, never a count naming a reference the journal holds
// for another bucket. Replaying the old records and the new ones together
// gives the new table's state.
func TestRestoredTableWritesPutsFirst(t *testing.T) {
	t.Parallel()
	old := New(Config{TrackChanges: true})
	req := func(id string) Request {
		return Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
	}
	for _, id := range []string{"a", "b", "c"} {
		old.Apply(req(id), at(0))
	}
	journal := collect(t, old.Changes)
	old.Apply(req("b"), at(10))
	journal = append(journal, collect(t, old.Changes)...)
	// A rebuilt table whose slots differ from the writer's: "c" first.
	rebuilt := New(Config{TrackChanges: true})
	rebuilt.Apply(req("zzz"), at(0))
	rebuilt.Reset(req("zzz"), at(0))
	_ = collect(t, rebuilt.Changes)
	restoreAll(t, rebuilt, journal, at(20))
	rebuilt.RestoreDone()
	for _, id := range []string{"c", "a"} {
		rebuilt.Apply(req(id), at(30))
	}
	recs := collect(t, rebuilt.Changes)
	for _, d := range decodeAll(t, recs...) {
		if d.kind != recordPut {
			t.Fatalf("a rebuilt table's first record of a bucket: %+v, want a put", d)
		}
	}
	rebuilt.Apply(req("c"), at(40))
	recs = append(recs, collect(t, rebuilt.Changes)...)
	fresh := New(Config{})
	restoreAll(t, fresh, append(journal, recs...), at(40))
	if got, want := snapshotOf(fresh, at(40)), snapshotOf(rebuilt, at(40)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("old and new records replayed:\ngot  %v\nwant %v", got, want)
	}
}

// TestReferenceOfAReusedSlot: a bucket swept (nothing journaled) leaves its
// slot, and so its reference, to the next bucket; the put of the new
// bucket rebinds the reference, and counts after it go to the new bucket,
// whether or not the old one is still live at the replay.
func TestReferenceOfAReusedSlot(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	short := Request{ID: "old", Policy: Policy{Scale: time.Second, Limit: 100}, Hits: 1}
	long := Request{ID: "new", Policy: Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
	tb.Apply(short, at(0))
	tb.Apply(short, at(10))
	recs := collect(t, tb.Changes)
	recs = append(recs, collect(t, tb.Changes)...)
	if n := tb.DeleteExpired(at(1000), 10); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	tb.Apply(long, at(1000))
	recs = append(recs, collect(t, tb.Changes)...)
	tb.Apply(long, at(1001))
	recs = append(recs, collect(t, tb.Changes)...)
	ds := decodeAll(t, recs...)
	if last := ds[len(ds)-1]; last.kind != entryCount || last.ref != ds[0].ref {
		t.Fatalf("entries %+v: want the last a count of the first's reference %d (the slot reused)", ds, ds[0].ref)
	}
	for _, now := range []int64{500, 1001} { // the old bucket live, and expired
		fresh := New(Config{})
		restoreAll(t, fresh, recs, at(now))
		if want := map[int64]int{500: 2, 1001: 1}[now]; fresh.Len() != want {
			t.Fatalf("replayed at %d: %d buckets, want %d (the old one only while live)", now, fresh.Len(), want)
		}
		if b, ok := fresh.Get(long, at(1001)); !ok || b.Count != 2 {
			t.Fatalf("replayed at %d: the new bucket %+v (%v), want count 2", now, b, ok)
		}
	}
}
