package table

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"
)

// partOf is the partition of id among n: FNV-1a, as a cluster places ids.
func partOf(id string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

// mixedTable returns a tracked table holding n ids under every algorithm,
// one fixed window of which has expired at the time returned.
func mixedTable(n int) (*Table, time.Time) {
	tb := New(Config{TrackChanges: true})
	now := at(10_000)
	for i := range n {
		id := fmt.Sprint("id-", i)
		for a := range Algorithm(numAlgorithms) {
			tb.Apply(Request{ID: id, Policy: Policy{Algorithm: a, Scale: time.Minute, Limit: int64(50 + i%7)}, Hits: 1}, now)
		}
		tb.Apply(Request{ID: id, Policy: Policy{Scale: time.Minute, Limit: 9}, Hits: 1, Namespace: "rule"}, now)
		// A short window that is over at the time returned: never shipped.
		tb.Apply(Request{ID: id, Policy: Policy{Scale: time.Second, Limit: 5}, Hits: 1}, now)
	}
	_ = tb.Changes(func([]byte) error { return nil })
	return tb, now.Add(2 * time.Second)
}

// only keeps the lines of a snapshotOf whose id is in partition p of n.
func only(lines []string, p, n int) []string {
	var out []string
	for _, l := range lines {
		if id, _, _ := strings.Cut(l, "/"); partOf(id, n) == p {
			out = append(out, l)
		}
	}
	return out
}

func TestPartitionShipsEachBucketToItsPartitionOnly(t *testing.T) {
	t.Parallel()
	const parts = 5
	tb, now := mixedTable(10_000) // more than one record per partition
	f := tb.Freeze(now)
	recs := map[int][][]byte{}
	err := f.Partition(func(id string) int {
		if p := partOf(id, parts); p != 3 {
			return p
		}
		return -1 // partition 3 is left out
	}, func(p int, rec []byte) error {
		if len(rec) > MaxRecordBytes {
			t.Errorf("partition %d: a record of %d bytes, above %d", p, len(rec), MaxRecordBytes)
		}
		recs[p] = append(recs[p], slices.Clone(rec))
		return nil
	})
	tb.Thaw(f)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshotOf(tb, now)
	if len(want) != 10_000*5 {
		t.Fatalf("the table holds %d live buckets, want %d", len(want), 10_000*5)
	}
	for p := range parts {
		if p == 3 {
			if len(recs[p]) != 0 {
				t.Fatalf("partition 3 was left out, but got %d records", len(recs[p]))
			}
			continue
		}
		if len(recs[p]) < 2 {
			t.Fatalf("partition %d: got %d records, want several (10,000 ids)", p, len(recs[p]))
		}
		got := New(Config{})
		restoreAll(t, got, recs[p], now)
		if g, w := snapshotOf(got, now), only(want, p, parts); !slices.Equal(g, w) {
			t.Fatalf("partition %d: restored %d buckets, want %d (first got %q, want %q)", p, len(g), len(w), first3(g), first3(w))
		}
	}
}

func first3(s []string) []string { return s[:min(3, len(s))] }

func TestPartitionStopsAtTheFirstError(t *testing.T) {
	t.Parallel()
	tb, now := mixedTable(10)
	f := tb.Freeze(now)
	defer tb.Thaw(f)
	calls := 0
	boom := fmt.Errorf("boom")
	if err := f.Partition(func(id string) int { return partOf(id, 3) }, func(int, []byte) error {
		calls++
		return boom
	}); err != boom || calls != 1 {
		t.Fatalf("got err %v after %d calls, want boom after 1", err, calls)
	}
}

func TestDeleteMatchingDeletesThoseIDsAndJournalsIt(t *testing.T) {
	t.Parallel()
	tb, now := mixedTable(2000)
	// The journal so far: a full copy of the table, as a snapshot holds it.
	f := tb.Freeze(now)
	journal := collect(t, f.Records)
	tb.Thaw(f)
	before := snapshotOf(tb, now)
	gone := func(id string) bool { return partOf(id, 4) == 1 }

	deleted, from, turns := 0, 0, 0
	for {
		n, next := tb.DeleteMatching(gone, from, 1000)
		deleted += n
		turns++
		if next == 0 {
			break
		}
		if next != from+1000 {
			t.Fatalf("turn %d: next %d, want %d", turns, next, from+1000)
		}
		from = next
	}
	if turns < 10 {
		t.Fatalf("the scan took %d turns of 1000 slots, want at least 10 (over 10,000 slots)", turns)
	}
	var want []string
	for _, l := range before {
		if id, _, _ := strings.Cut(l, "/"); !gone(id) {
			want = append(want, l)
		}
	}
	if got := snapshotOf(tb, now); !slices.Equal(got, want) {
		t.Fatalf("after DeleteMatching the table holds %d live buckets, want %d", len(got), len(want))
	}
	// Expired buckets of those ids go too: six buckets an id, one expired.
	goneIDs := 0
	for i := range 2000 {
		if gone(fmt.Sprint("id-", i)) {
			goneIDs++
		}
	}
	if deleted != 6*goneIDs || len(before)-len(want) != 5*goneIDs {
		t.Fatalf("deleted %d buckets (%d live), want %d (%d live) for %d ids", deleted, len(before)-len(want), 6*goneIDs, 5*goneIDs, goneIDs)
	}
	for i := range 2000 {
		id := fmt.Sprint("id-", i)
		if bs := tb.Buckets(id, now); gone(id) != (len(bs) == 0) {
			t.Fatalf("%s: %d buckets left, gone=%v", id, len(bs), gone(id))
		}
	}
	// Replaying the journal, then the deletions Changes reports, gives the
	// table as it is now.
	journal = append(journal, collect(t, tb.Changes)...)
	replay := New(Config{})
	restoreAll(t, replay, journal, now)
	if got := snapshotOf(replay, now); !slices.Equal(got, want) {
		t.Fatalf("the journal replayed holds %d live buckets, want %d", len(got), len(want))
	}
}

func TestDeleteMatchingPastTheEndIsDone(t *testing.T) {
	t.Parallel()
	tb, _ := mixedTable(3)
	if n, next := tb.DeleteMatching(func(string) bool { return true }, 1<<20, 10); n != 0 || next != 0 {
		t.Fatalf("got %d deleted, next %d; want 0, 0", n, next)
	}
	if n, next := tb.DeleteMatching(func(string) bool { return true }, 0, 1<<20); n != 18 || next != 0 || tb.Len() != 0 {
		t.Fatalf("got %d deleted, next %d, %d left; want 18, 0, 0", n, next, tb.Len())
	}
}
