package table

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// memoryBuckets is the table size of the memory tests: large enough that
// the fixed costs vanish, at a point of the index's growth (2^20 entries,
// two thirds full) that is neither its best nor its worst.
const memoryBuckets = 700_000

// heapPerBucket fills a table with n one-hour fixed-window buckets of ids
// "user-<i*7919>" and returns it, the heap it holds per bucket (measured
// after a collection) and the mean id length.
func heapPerBucket(n int) (*Table, float64, float64) {
	ids := benchIDs(n)
	idBytes := 0
	for _, id := range ids {
		idBytes += len(id)
	}
	now := time.UnixMilli(1_700_000_000_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t := New(Config{})
	for _, id := range ids {
		t.Apply(Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ids) // the ids were there before: they are not the table's
	return t, float64(after.HeapAlloc-before.HeapAlloc) / float64(n), float64(idBytes) / float64(n)
}

// TestMemoryPerBucket: a live bucket costs at most 64 bytes plus its id's
// length, every index included. It measures the heap, so it does not run
// in parallel with the package's other tests.
func TestMemoryPerBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a table of 700k buckets")
	}
	tb, per, idLen := heapPerBucket(memoryBuckets)
	if tb.Len() != memoryBuckets {
		t.Fatalf("%d buckets, want %d", tb.Len(), memoryBuckets)
	}
	t.Logf("%.1f B per bucket, ids of %.1f bytes", per, idLen)
	if per > 64+idLen {
		t.Fatalf("%.1f B per bucket, above 64 + the id's %.1f bytes", per, idLen)
	}
	runtime.KeepAlive(tb)
}

// TestFootprintMatchesTheHeap: Footprint accounts for the heap a table
// holds, to within 2%, and its parts add up; the breakdown is logged.
func TestFootprintMatchesTheHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a table of 700k buckets")
	}
	tb, per, _ := heapPerBucket(memoryBuckets)
	f := tb.Footprint()
	if f.Buckets != memoryBuckets {
		t.Fatalf("Footprint counts %d buckets, want %d", f.Buckets, memoryBuckets)
	}
	if sum := f.Slab + f.Index + f.Windows + f.IDs + f.Other; sum != f.Total() {
		t.Fatalf("the parts add up to %d, Total says %d", sum, f.Total())
	}
	got := float64(f.Total()) / memoryBuckets
	if got < per*0.98 || got > per*1.02 {
		t.Fatalf("Footprint says %.1f B per bucket, the heap %.1f", got, per)
	}
	n := float64(memoryBuckets)
	t.Logf("per bucket: slab %.1f, hash index %.1f, windows %.2f, ids %.1f, other %.2f; total %.1f (heap %.1f)",
		float64(f.Slab)/n, float64(f.Index)/n, float64(f.Windows)/n, float64(f.IDs)/n, float64(f.Other)/n, got, per)
	runtime.KeepAlive(tb)
}

// TestFootprintOfChurn: ids deleted give their room back to ids of the
// same length, so a table whose buckets are replaced many times over holds
// no more than it did at its largest.
func TestFootprintOfChurn(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	const n = 20_000
	var peak Footprint
	for round := range 8 {
		now := at(int64(round) * 10_000)
		for i := range n {
			id := "r" + strconv.Itoa(round%2) + "-" + strconv.Itoa(100_000+i)
			tb.Apply(Request{ID: id, Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, now)
		}
		if round == 1 {
			peak = tb.Footprint()
		}
		if round > 1 {
			if f := tb.Footprint(); f.Total() > peak.Total() || f.IDs > peak.IDs {
				t.Fatalf("round %d: %+v, above the peak of round 1, %+v", round, f, peak)
			}
		}
		if got := tb.DeleteExpired(now.Add(time.Second), n); got != n {
			t.Fatalf("round %d: swept %d, want %d", round, got, n)
		}
	}
}
