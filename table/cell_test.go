package table

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestCellSize: a cell is 56 bytes, inlineID of them the id.
func TestCellSize(t *testing.T) {
	t.Parallel()
	if got := unsafe.Sizeof(cell{}); got != 56 {
		t.Fatalf("a cell is %d bytes, want 56", got)
	}
	if got := unsafe.Offsetof(cell{}.id) + inlineID; got != 56 {
		t.Fatalf("the id ends at byte %d of the cell, want 56", got)
	}
}

// TestIDsInCellsAndInTheArena: ids of every length around inlineID, and
// the longest, each beside ids that differ from it in its first byte only
// or in its last byte only, are counted apart and found again, listed by
// their windows, restored from their records and deleted by
// DeleteMatching; only the ids longer than inlineID take room in the
// arena.
func TestIDsInCellsAndInTheArena(t *testing.T) {
	t.Parallel()
	var short, long []string
	lengths := []int{1, 2, 7, 8, 9, 15, 16, inlineID - 1, inlineID, inlineID + 1, inlineID + 2, 24, 40, 255, MaxIDLen}
	slices.Sort(lengths)
	for _, n := range slices.Compact(lengths) {
		base := strings.Repeat("a", n)
		for _, id := range []string{base, "b" + base[1:], base[:n-1] + "c"} {
			if n <= inlineID {
				short = append(short, id)
			} else {
				long = append(long, id)
			}
		}
	}
	p := Policy{Scale: time.Minute, Limit: 1 << 20}
	tb := New(Config{TrackChanges: true})
	hit := func(ids []string, from int) {
		for i, id := range ids {
			if d := tb.Apply(Request{ID: id, Policy: p, Hits: int64(from + i)}, at(0)); !d.Allowed || d.Count != int64(from+i) {
				t.Fatalf("%d-byte id: %+v, want allowed with count %d", len(id), d, from+i)
			}
		}
	}
	counts := func(ids []string, from int, where string) {
		t.Helper()
		for i, id := range ids {
			if d := tb.Apply(Request{ID: id, Policy: p}, at(0)); d.Count != int64(from+i) {
				t.Fatalf("%s: %d-byte id %.20q…: count %d, want %d", where, len(id), id, d.Count, from+i)
			}
		}
	}
	hit(short, 1)
	if got := tb.Footprint().IDs; got != 0 {
		t.Fatalf("ids of at most %d bytes took %d bytes of the arena, want 0", inlineID, got)
	}
	hit(long, 1+len(short))
	if got, want := tb.Footprint().IDs, int64(0); got <= want {
		t.Fatalf("ids longer than %d bytes took %d bytes of the arena, want more than 0", inlineID, got)
	}
	counts(short, 1, "live")
	counts(long, 1+len(short), "live")
	checkWindows(t, tb, "live")

	fresh := New(Config{})
	restoreAll(t, fresh, collect(t, tb.Changes), at(0))
	if got, want := snapshotOf(fresh, at(0)), snapshotOf(tb, at(0)); !slices.Equal(got, want) {
		t.Fatalf("restored from the records: %d buckets, want %d", len(got), len(want))
	}
	f := tb.Freeze(at(0))
	snap := New(Config{})
	restoreAll(t, snap, collect(t, f.Records), at(0))
	tb.Thaw(f)
	if got, want := snapshotOf(snap, at(0)), snapshotOf(tb, at(0)); !slices.Equal(got, want) {
		t.Fatalf("restored from a snapshot: %d buckets, want %d", len(got), len(want))
	}

	if n, _ := tb.DeleteMatching(func(id string) bool { return len(id) > inlineID }, 0, 1<<20); n != len(long) {
		t.Fatalf("DeleteMatching deleted %d, want the %d long ids", n, len(long))
	}
	checkWindows(t, tb, "after deleting the long ids")
	counts(short, 1, "after deleting the long ids")
	for _, id := range long {
		if d := tb.Apply(Request{ID: id, Policy: p}, at(0)); d.Count != 0 {
			t.Fatalf("deleted %d-byte id: count %d, want 0", len(id), d.Count)
		}
	}
}

// TestCellIDs: a cell holds its id, and tells it from ids that differ in
// their first byte only, in their last byte only, or in their length,
// whether it holds the id itself or its handle in the arena; freeing the
// room of an id in the arena lets the next id of its length take it.
func TestCellIDs(t *testing.T) {
	t.Parallel()
	var a arena
	for n := 1; n <= MaxIDLen; n++ {
		if n > 48 && n != MaxIDLen {
			continue
		}
		id := strings.Repeat("a", n-1) + "z"
		var c cell
		c.setID(&a, id)
		if got := c.idIn(&a); got != id {
			t.Fatalf("%d bytes: idIn %q, want %q", n, got, id)
		}
		others := []string{"b" + id[1:], id[:n-1] + "y", id + "a", id[:n-1]}
		if n == 1 {
			others[0] = "b"
		}
		for _, o := range others {
			if c.hasID(&a, o) {
				t.Fatalf("%d bytes: the cell of %.30q… holds %.30q…", n, id, o)
			}
		}
		if !c.hasID(&a, strings.Clone(id)) {
			t.Fatalf("%d bytes: the cell does not hold its own id", n)
		}
		before := a.bytes
		c.freeID(&a)
		var d cell
		d.setID(&a, strings.Repeat("q", n))
		if got := d.idIn(&a); got != strings.Repeat("q", n) || a.bytes != before {
			t.Fatalf("%d bytes: the next id reads %.30q…, the arena went from %d to %d bytes", n, got, before, a.bytes)
		}
		if n <= inlineID && a.bytes != 0 {
			t.Fatalf("%d bytes: the arena holds %d bytes, want none", n, a.bytes)
		}
	}
}
