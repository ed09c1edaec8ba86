package table

import (
	"fmt"
	"testing"
	"time"
)

// fillExpired adds n fixed-window buckets of one limit (1 s windows) at t0,
// all expired from at(1000) on.
func fillExpired(tb *Table, n int) {
	for i := range n {
		tb.Apply(Request{ID: fmt.Sprint("x-", i), Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, at(0))
	}
}

// TestDeleteExpiredSliceStopsWhenOver: a slice asks Over after every
// SliceCheck deletions and ends where it says so, reporting More; the next
// slice goes on from there, and a slice that empties the backlog reports
// no More. Time is the caller's: here a counter of Over calls.
func TestDeleteExpiredSliceStopsWhenOver(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	fillExpired(tb, 1000)
	tb.Apply(Request{ID: "live", Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, at(0))
	calls := 0
	got := tb.DeleteExpiredSlice(at(1000), Slice{Max: 1 << 30, Over: func() bool { calls++; return calls == 3 }})
	if want := (Swept{Deleted: 3 * SliceCheck, Groups: 1, More: true}); got != want || calls != 3 {
		t.Fatalf("a slice over at the third ask: got %+v after %d asks, want %+v after 3", got, calls, want)
	}
	if n := tb.Len(); n != 1001-3*SliceCheck {
		t.Fatalf("after the slice: %d buckets, want %d", n, 1001-3*SliceCheck)
	}
	got = tb.DeleteExpiredSlice(at(1000), Slice{Max: 500})
	if want := (Swept{Deleted: 500, Groups: 1, More: true}); got != want {
		t.Fatalf("a slice of 500: got %+v, want %+v", got, want)
	}
	got = tb.DeleteExpiredSlice(at(1000), Slice{Max: 1 << 30, Over: func() bool { return false }})
	if want := (Swept{Deleted: 1000 - 3*SliceCheck - 500, Groups: 1}); got != want {
		t.Fatalf("the rest: got %+v, want %+v", got, want)
	}
	if n := tb.Len(); n != 1 {
		t.Fatalf("after the backlog: %d buckets, want the live one", n)
	}
	if got := tb.DeleteExpiredSlice(at(1000), Slice{Max: 10}); got != (Swept{}) {
		t.Fatalf("nothing expired: got %+v, want nothing", got)
	}
}

// TestDeleteExpiredSliceAsksOverOften: whatever the backlog, no more than
// SliceCheck deletions happen between two asks of Over (and before the
// first one), so a caller's deadline is checked that often.
func TestDeleteExpiredSliceAsksOverOften(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	fillExpired(tb, 5000)
	for i := range 50 { // more limits, each with one expired bucket
		tb.Apply(Request{ID: "y", Policy: Policy{Scale: time.Second, Limit: int64(100 + i)}, Hits: 1}, at(0))
	}
	last, worst, asks := tb.Len(), 0, 0
	got := tb.DeleteExpiredSlice(at(1000), Slice{Max: 1 << 30, Over: func() bool {
		asks++
		worst = max(worst, last-tb.Len())
		last = tb.Len()
		return false
	}})
	if got.Deleted != 5050 || got.More || tb.Len() != 0 {
		t.Fatalf("got %+v, %d left; want 5050 deleted, none left", got, tb.Len())
	}
	if worst > SliceCheck || asks < 5050/SliceCheck {
		t.Fatalf("%d asks, at most %d deletions between two; want at least %d asks, at most %d between", asks, worst, 5050/SliceCheck, SliceCheck)
	}
}

// TestMakeRoomLooksAtFewLimits: in a full table, the reclaim of expired
// buckets on the check path looks at makeRoomGroups limits at most per
// check. Here 100 limits are due but hold no expired bucket (their oldest
// window was emptied by a reset), ahead of the one expired bucket: each
// check moves makeRoomGroups of them to their real due time and is refused
// (deny-new), and the check that reaches the expired bucket reclaims it.
func TestMakeRoomLooksAtFewLimits(t *testing.T) {
	t.Parallel()
	const stale = 100
	tb := New(Config{MaxBuckets: stale + 1})
	limit := func(i int) Policy { return Policy{Scale: time.Second, Limit: int64(10 + i)} }
	for i := range stale {
		tb.Apply(Request{ID: "a", Policy: limit(i), Hits: 1}, at(0))
	}
	for i := range stale {
		tb.Apply(Request{ID: "b", Policy: limit(i), Hits: 1}, at(1000))
		tb.Reset(Request{ID: "a", Policy: limit(i)}, at(1000)) // expired: deleted, not counted
	}
	// Due (expired) at 1500, after the stale limits, due at 1000.
	tb.Apply(Request{ID: "old", Policy: Policy{Scale: 500 * time.Millisecond, Limit: 1}, Hits: 1}, at(1000))
	if tb.Len() != stale+1 {
		t.Fatalf("%d buckets, want a full table of %d", tb.Len(), stale+1)
	}
	fresh := Request{ID: "new", Policy: Policy{Scale: time.Hour, Limit: 1}, Hits: 1}
	looks := (stale + 1 + makeRoomGroups - 1) / makeRoomGroups
	for i := range looks - 1 {
		if d := tb.Apply(fresh, at(1999)); !d.Full {
			t.Fatalf("check %d: got %+v, want Full: %d of the %d stale limits looked at so far", i, d, (i+1)*makeRoomGroups, stale)
		}
	}
	if d := tb.Apply(fresh, at(1999)); d.Full || !d.Allowed {
		t.Fatalf("check %d, reaching the expired bucket: got %+v, want allowed", looks, d)
	}
	if _, ok := tb.Get(Request{ID: "old", Policy: Policy{Scale: 500 * time.Millisecond, Limit: 1}}, at(1999)); ok || tb.Len() != stale+1 {
		t.Fatalf("the expired bucket is still there (%v), or %d buckets; want it reclaimed, %d", ok, tb.Len(), stale+1)
	}
	if st := tb.Stats(); st != (Stats{Rejections: int64(looks - 1)}) {
		t.Fatalf("stats %+v, want %d rejections", st, looks-1)
	}
}
