package table

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkWindows fails unless every bucket of tb is in exactly one window
// list, the lists and the groups agree, and the index finds every bucket.
func checkWindows(t *testing.T, tb *Table, where string) {
	t.Helper()
	total, listed, usedWins := 0, 0, 0
	for _, g := range tb.byID {
		if g == nil {
			continue
		}
		total += g.n
		inGroup := 0
		for k, gw := range g.wins {
			if k > 0 && g.wins[k-1].bucket >= gw.bucket {
				t.Fatalf("%s: group %d: windows out of order: %+v", where, g.id, g.wins)
			}
			w := &tb.wins[gw.id]
			if w.gid != g.id || w.bucket != gw.bucket || w.n == 0 {
				t.Fatalf("%s: group %d window %d: %+v (an empty or foreign window)", where, g.id, gw.bucket, *w)
			}
			usedWins++
			n, prev := uint32(0), uint32(0)
			for s := w.head; s != 0; s = tb.slots.cell(s - 1).next {
				c := tb.slots.cell(s - 1)
				if c.win != gw.id || c.prev != prev || c.idLen == 0 {
					t.Fatalf("%s: slot %d: window %d prev %d id length %d; want window %d prev %d", where, s-1, c.win, c.prev, c.idLen, gw.id, prev)
				}
				id := c.idIn(&tb.ids)
				if it, ok := tb.find(g, gw.bucket, hashOf(tb, id), id); !ok || it != mkItem(g.id, gw.bucket, s-1) {
					t.Fatalf("%s: bucket %q in window %d: the index finds %+v, %v", where, id, gw.bucket, it, ok)
				}
				prev = s
				n++
			}
			if n != w.n {
				t.Fatalf("%s: window %d lists %d cells, counts %d", where, gw.bucket, n, w.n)
			}
			inGroup += int(n)
		}
		if inGroup != g.n {
			t.Fatalf("%s: group %d counts %d buckets, its windows hold %d", where, g.id, g.n, inGroup)
		}
		listed += inGroup
	}
	live := 0
	for i := uint32(0); i < tb.slots.used; i++ {
		if tb.slots.cell(i).idLen != 0 {
			live++
		}
	}
	if total != tb.Len() || listed != tb.Len() || live != tb.Len() || tb.ix.n != tb.Len() {
		t.Fatalf("%s: Len %d, groups count %d, lists hold %d, slab holds %d, index %d", where, tb.Len(), total, listed, live, tb.ix.n)
	}
	if usedWins+len(tb.freeWins) != len(tb.wins) {
		t.Fatalf("%s: %d windows in use and %d free, of %d", where, usedWins, len(tb.freeWins), len(tb.wins))
	}
}

// TestWindowsUnderChurn drives a bounded table through every algorithm,
// rules and ad-hoc limits, resets, refunds, all-or-nothing units rolled
// back and committed, evictions, partial sweeps and snapshots taken
// meanwhile (seeded), and checks the windows after every batch: with ids
// a cell holds itself and with ids in the arena (longer than inlineID).
func TestWindowsUnderChurn(t *testing.T) {
	t.Parallel()
	withEachIDPrefix(t, churnWindows)
}

// idPrefixes are prefixes of the ids of tests that run with both kinds of
// id: none, so that the ids fit in a cell, and one that makes each id
// longer than inlineID, so that it lives in the arena.
var idPrefixes = map[string]string{
	"ids in cells":    "",
	"ids in an arena": strings.Repeat("p", inlineID),
}

// randomChange makes a random change of req's bucket on tb at ms: in a
// unit (unit true) an Apply, as a unit holds only those; else a Reset one
// time in 20, a Refund of one hit more one time in 20, and an Apply.
func randomChange(rng *rand.Rand, tb *Table, req Request, ms int64, unit bool) {
	switch op := rng.IntN(20); {
	case unit:
		tb.Apply(req, at(ms))
	case op == 0:
		tb.Reset(req, at(ms))
	case op == 1:
		req.Hits++
		tb.Refund(req, at(ms))
	default:
		tb.Apply(req, at(ms))
	}
}

// endUnit ends the unit begun on tb: rolled back half the time, else
// committed.
func endUnit(rng *rand.Rand, tb *Table) {
	if rng.IntN(2) == 0 {
		tb.Rollback()
	} else {
		tb.Commit()
	}
}

// withEachIDPrefix runs fn in a parallel subtest for each of idPrefixes.
func withEachIDPrefix(t *testing.T, fn func(t *testing.T, prefix string)) {
	for name, prefix := range idPrefixes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, prefix)
		})
	}
}

func churnWindows(t *testing.T, prefix string) {
	rng, seed := seeded(t, 3)
	tb := New(Config{TrackChanges: true, MaxBuckets: 300, Evict: true})
	now := int64(0)
	var frozen *Frozen
	for batch := range 400 {
		tx := rng.IntN(5) == 0
		if tx {
			tb.Begin()
		}
		for range rng.IntN(60) {
			if !tx {
				now += int64(rng.IntN(30))
			}
			req := Request{
				ID:     fmt.Sprint(prefix, "k", rng.IntN(200), strings.Repeat("x", rng.IntN(3))),
				Policy: Policy{Scale: time.Duration(1+rng.IntN(4)) * 250 * time.Millisecond, Limit: int64(1 + rng.IntN(6)), Algorithm: Algorithm(rng.IntN(numAlgorithms))},
				Hits:   int64(rng.IntN(3)),
			}
			if rng.IntN(3) == 0 {
				req.Namespace = "rule"
			}
			randomChange(rng, tb, req, now, tx)
		}
		if tx {
			endUnit(rng, tb)
		}
		if rng.IntN(3) == 0 {
			tb.DeleteExpired(at(now), rng.IntN(40))
		}
		_ = tb.Changes(func([]byte) error { return nil })
		switch {
		case frozen == nil && rng.IntN(10) == 0:
			frozen = tb.Freeze(at(now))
		case frozen != nil && rng.IntN(5) == 0:
			tb.Thaw(frozen)
			frozen = nil
		}
		checkWindows(t, tb, fmt.Sprintf("batch %d (seed %d)", batch, seed))
	}
	if frozen != nil {
		tb.Thaw(frozen)
	}
	tb.DeleteExpired(at(now+10_000), 1<<30)
	checkWindows(t, tb, "after the last sweep")
	if tb.Len() != 0 || len(tb.freeWins) != len(tb.wins) {
		t.Fatalf("after the last sweep: %d buckets, %d of %d windows free", tb.Len(), len(tb.freeWins), len(tb.wins))
	}
}

// TestFrozenIDsOutliveTheirBuckets: a snapshot being written still reads
// the ids of buckets the owner deleted after the freeze, though new ids of
// the same length arrive meanwhile; after the thaw, the new ids take the
// room of the deleted ones instead of growing the arena. Ids a cell holds
// are read from the frozen copy of their page; ids in the arena from the
// arena, whose room is held back until the thaw.
func TestFrozenIDsOutliveTheirBuckets(t *testing.T) {
	t.Parallel()
	withEachIDPrefix(t, frozenIDsOutliveTheirBuckets)
}

func frozenIDsOutliveTheirBuckets(t *testing.T, prefix string) {
	tb := New(Config{})
	const n = 3000
	old := Policy{Scale: time.Second, Limit: 9}
	for i := range n {
		tb.Apply(Request{ID: fmt.Sprintf("%sold-%05d", prefix, i), Policy: old, Hits: 1}, at(0))
	}
	f := tb.Freeze(at(0))
	want := snapshotOf(tb, at(0))
	if got := tb.DeleteExpired(at(1000), n); got != n {
		t.Fatalf("swept %d, want %d", got, n)
	}
	for i := range n {
		tb.Apply(Request{ID: fmt.Sprintf("%snew-%05d", prefix, i), Policy: old, Hits: 2}, at(1000))
	}
	fresh := New(Config{})
	restoreAll(t, fresh, collect(t, f.Records), at(0))
	if got := snapshotOf(fresh, at(0)); !slices.Equal(got, want) {
		t.Fatalf("the frozen copy holds %d buckets (first %q), want %d (first %q)", len(got), first(got), len(want), first(want))
	}
	tb.Thaw(f)
	ids := tb.Footprint().IDs
	if got := tb.DeleteExpired(at(2000), n); got != n {
		t.Fatalf("swept %d, want %d", got, n)
	}
	for i := range n {
		tb.Apply(Request{ID: fmt.Sprintf("%snxt-%05d", prefix, i), Policy: old, Hits: 1}, at(2000))
	}
	if got := tb.Footprint().IDs; got != ids {
		t.Fatalf("after the thaw the arena went from %d to %d bytes: freed room was not reused", ids, got)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestStampsOfLongWindows: the created and modified stamps of a bucket are
// exact to the millisecond in windows longer than 2^32 ms, the longest
// window (MaxScale) and a token bucket that refills in that long, read
// back from the table and from its records.
func TestStampsOfLongWindows(t *testing.T) {
	t.Parallel()
	width := MaxScale.Milliseconds()
	start := time.UnixMilli(1_700_000_000_000 / width * width)
	for _, p := range []Policy{
		{Scale: MaxScale, Limit: 1000},
		{Scale: MaxScale, Limit: 1000, Algorithm: SlidingWindow},
		{Scale: time.Hour, Limit: 1, Burst: 8784, Algorithm: TokenBucket},
	} {
		tb := New(Config{})
		created := start.Add(300*24*time.Hour + 1234567*time.Millisecond) // 2.6e10 ms into the window
		modified := created.Add(40*24*time.Hour + 89*time.Millisecond)
		tb.Apply(Request{ID: "long", Policy: p, Hits: 1}, created)
		tb.Apply(Request{ID: "long", Policy: p, Hits: 1}, modified)
		check := func(what string, tb *Table) {
			t.Helper()
			bs := tb.Buckets("long", modified)
			if len(bs) != 1 {
				t.Fatalf("%v, %s: %d buckets, want 1", p, what, len(bs))
			}
			b := bs[0]
			if !b.CreatedAt.Equal(created) || !b.ModifiedAt.Equal(modified) || b.Count != 2 && p.Algorithm != TokenBucket {
				t.Fatalf("%v, %s: created %v modified %v count %d; want %v, %v, 2", p, what, b.CreatedAt, b.ModifiedAt, b.Count, created, modified)
			}
		}
		check("in the table", tb)
		f := tb.Freeze(modified)
		again := New(Config{})
		restoreAll(t, again, collect(t, f.Records), modified)
		tb.Thaw(f)
		check("restored", again)
	}
}

// TestWindowAtIsFloorDiv: a group's shortcut to the window of a time
// answers floorDiv for times in its latest window, before it, after it and
// on both edges, for a group with no window and for no group.
func TestWindowAtIsFloorDiv(t *testing.T) {
	t.Parallel()
	for _, width := range []int64{1, 7, 1000, 3_600_000, int64(MaxScale / time.Millisecond)} {
		for _, latest := range []int64{0, 1, 5, 482_000} {
			g := &group{wins: []gwin{{bucket: latest - 3}, {bucket: latest}}}
			for _, ms := range []int64{0, 1, latest*width - 1, latest * width, latest*width + 1, (latest+1)*width - 1, (latest + 1) * width, (latest+5)*width + 3, 1_764_000_000_000} {
				if ms < 0 {
					continue
				}
				want := floorDiv(ms, width)
				if got := g.windowAt(ms, width); got != want {
					t.Errorf("width %d, latest window %d, ms %d: windowAt %d, want %d", width, latest, ms, got, want)
				}
				if got := (&group{}).windowAt(ms, width); got != want {
					t.Errorf("width %d, no window, ms %d: windowAt %d, want %d", width, ms, got, want)
				}
				if got := (*group)(nil).windowAt(ms, width); got != want {
					t.Errorf("width %d, no group, ms %d: windowAt %d, want %d", width, ms, got, want)
				}
			}
		}
	}
}
