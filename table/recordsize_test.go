package table

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestMaxEntryBytes: the largest entries the writer can produce (every
// varint at its longest, the longest namespace and id) fit in the bound
// Changes and Records reserve before each entry.
func TestMaxEntryBytes(t *testing.T) {
	t.Parallel()
	k := groupKey{alg: SlidingWindow, ns: strings.Repeat("n", MaxNamespaceLen),
		scaleMs: math.MaxInt64, widthMs: math.MaxInt64, limit: math.MaxInt64, burst: math.MaxInt64}
	s := slot{id: strings.Repeat("i", MaxIDLen), count: math.MaxInt64, aux: math.MinInt64,
		created: math.MinInt64, modified: math.MaxInt64}
	var w recordWriter
	w.reset(nil)
	w.put(&k, math.MinInt64, &s)
	if got := len(w.b) - 1; got > maxEntryBytes {
		t.Errorf("a group and a put: %d bytes, above maxEntryBytes %d", got, maxEntryBytes)
	}
	w.reset(nil)
	w.del(&k, math.MinInt64, s.id)
	if got := len(w.b) - 1; got > maxEntryBytes {
		t.Errorf("a group and a delete: %d bytes, above maxEntryBytes %d", got, maxEntryBytes)
	}
}

// TestRecordsNeverExceedMaxRecordBytes: batches of the largest entries a
// request can make (ids of MaxIDLen bytes, the longest namespace, every
// algorithm, deletions too) are cut into records of at most MaxRecordBytes,
// by Changes and by Frozen.Records, and nothing is lost in the cut.
func TestRecordsNeverExceedMaxRecordBytes(t *testing.T) {
	t.Parallel()
	if MaxRecordBytes > 64<<10-56 {
		t.Fatalf("MaxRecordBytes %d: above the payload of the smallest journal segment (%d)", MaxRecordBytes, 64<<10-56)
	}
	for _, idLen := range []int{400, 1000, MaxIDLen} {
		t.Run(fmt.Sprint("id length ", idLen), func(t *testing.T) {
			t.Parallel()
			tb := New(Config{TrackChanges: true})
			const n = 1000
			ids := make([]string, n)
			for i := range ids {
				p := fmt.Sprintf("%d-", i)
				ids[i] = p + strings.Repeat("x", idLen-len(p))
			}
			ns := strings.Repeat("r", MaxNamespaceLen)
			reqs := make([]Request, n)
			for i, id := range ids {
				req := Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 1 << 62, Algorithm: Algorithm(i % numAlgorithms), Burst: 1 << 20}, Hits: 1 << 40}
				if i%2 == 0 {
					req.Namespace = ns
				}
				if req.Algorithm.gcra() {
					req.Scale, req.Limit, req.Hits = time.Hour, 1<<20, 1
				}
				if d := tb.Apply(req, at(int64(i))); !d.Allowed {
					t.Fatalf("%+v: denied", req)
				}
				reqs[i] = req
			}
			check := func(what string) func([]byte) error {
				return func(rec []byte) error {
					if len(rec) > MaxRecordBytes {
						t.Errorf("%s: a record of %d bytes, above MaxRecordBytes %d", what, len(rec), MaxRecordBytes)
					}
					return nil
				}
			}
			recs := collect(t, tb.Changes)
			for _, rec := range recs {
				_ = check("Changes")(rec)
			}
			if got := len(decodeAll(t, recs...)); got != n {
				t.Fatalf("Changes: %d entries, want %d", got, n)
			}
			if len(recs) < 2 {
				t.Fatalf("Changes: %d records, want the batch cut", len(recs))
			}
			f := tb.Freeze(at(n))
			if err := f.Records(check("Records")); err != nil {
				t.Fatal(err)
			}
			snap := collect(t, f.Records)
			tb.Thaw(f)
			if got := len(decodeAll(t, snap...)); got != n {
				t.Fatalf("Records: %d entries, want %d", got, n)
			}
			// Deletions of the same buckets, all in one batch.
			for _, req := range reqs {
				tb.Reset(req, at(n))
			}
			if tb.Len() != 0 {
				t.Fatalf("%d buckets after a Reset of each, want 0", tb.Len())
			}
			dels := collect(t, tb.Changes)
			for _, rec := range dels {
				_ = check("Changes of deletions")(rec)
			}
			if got := len(decodeAll(t, dels...)); got != n {
				t.Fatalf("Changes of deletions: %d entries, want %d", got, n)
			}
		})
	}
}
