package table

import (
	"fmt"
	"testing"
	"time"
)

// TestRestoreAllocatesNothingPerBucket: replaying a record of 1,000 puts
// (ids of 40 bytes, in a namespace) onto the buckets they name allocates
// nothing, where taking each id and namespace out of the record allocated
// (twice: the check of the record, then its replay), and so does the replay
// of a one-entry record (a repeat hit's count); a replay into an empty
// table allocates per page of the slab and arena, not per bucket.
func TestRestoreAllocatesNothingPerBucket(t *testing.T) { // not parallel: AllocsPerRun refuses
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	src := New(Config{TrackChanges: true})
	const n = 1000
	for i := range n {
		src.Apply(Request{ID: fmt.Sprintf("client-%034d", i), Namespace: "api", Policy: Policy{Scale: time.Hour, Limit: 100}, Hits: 1}, now)
	}
	var recs [][]byte
	if err := src.Changes(func(rec []byte) error { recs = append(recs, append([]byte(nil), rec...)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	dst := New(Config{})
	fresh := testing.AllocsPerRun(1, func() {
		if err := dst.Restore(recs[0], now); err != nil {
			t.Fatal(err)
		}
	})
	if dst.Len() != n {
		t.Fatalf("restored %d buckets, want %d", dst.Len(), n)
	}
	if fresh > n/20 {
		t.Errorf("a replay of %d new buckets allocated %v times, want at most %d (per page, not per bucket)", n, fresh, n/20)
	}
	again := testing.AllocsPerRun(10, func() {
		if err := dst.Restore(recs[0], now); err != nil {
			t.Fatal(err)
		}
	})
	if again != 0 {
		t.Errorf("a replay of %d buckets the table holds allocated %v times, want 0", n, again)
	}
	// A repeat hit: a record of one count entry under a reference.
	req := Request{ID: fmt.Sprintf("client-%034d", 7), Namespace: "api", Policy: Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
	src.Apply(req, now)
	var count []byte
	if err := src.Changes(func(rec []byte) error { count = append([]byte(nil), rec...); return nil }); err != nil {
		t.Fatal(err)
	}
	if count[0] != recordBatch2 || count[1] != entryCount {
		t.Fatalf("the repeat hit's record is %x, want a count entry", count)
	}
	one := testing.AllocsPerRun(10, func() {
		if err := dst.Restore(count, now); err != nil {
			t.Fatal(err)
		}
	})
	req.Hits = 0
	if one != 0 || dst.Apply(req, now).Count != 2 {
		t.Errorf("a replay of a count entry allocated %v times and left count %d, want 0 and 2", one, dst.Apply(req, now).Count)
	}
}
