package table

import (
	"slices"
	"testing"
	"time"
)

// TestRollbackUndoesEveryChange applies a mix of checks in a unit (new
// buckets, existing ones, the same bucket twice, a token bucket moving to
// a later window) and rolls it back: the table, and what a journal of it
// replays to, is as before, and no bucket of count 0 is left behind.
func TestRollbackUndoesEveryChange(t *testing.T) {
	t.Parallel()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			tb := New(Config{TrackChanges: true})
			journal := New(Config{})
			sync := func(now time.Time) {
				t.Helper()
				restoreAll(t, journal, collect(t, tb.Changes), now)
			}
			req := func(id string, hits int64) Request {
				return Request{ID: id, Policy: Policy{Scale: time.Second, Limit: 10, Burst: 10, Algorithm: alg}, Hits: hits}
			}
			// Existing buckets: "old" from the previous window (a GCRA bucket
			// moves to the current one when it changes), "cur" in this one.
			tb.Apply(req("old", 3), at(900))
			tb.Apply(req("cur", 2), at(1_100))
			sync(at(1_100))
			now := at(1_500)
			before := snapshotOf(tb, now)
			n := tb.Len()

			tb.Begin()
			for _, r := range []Request{req("old", 2), req("cur", 1), req("new", 4), req("new", 1), req("cur", 0), req("cur", 50)} {
				tb.Apply(r, now)
			}
			if tb.Len() == n {
				t.Fatalf("the unit created no bucket: the test tests nothing")
			}
			tb.Rollback()

			if got := snapshotOf(tb, now); !slices.Equal(got, before) {
				t.Errorf("after Rollback got\n%q\nwant\n%q", got, before)
			}
			if tb.Len() != n {
				t.Errorf("after Rollback got %d buckets, want %d", tb.Len(), n)
			}
			if _, ok := tb.Get(req("new", 1), now); ok {
				t.Errorf("a bucket created in the rolled-back unit is still there")
			}
			sync(now)
			if got := snapshotOf(journal, now); !slices.Equal(got, before) {
				t.Errorf("replayed journal after Rollback got\n%q\nwant\n%q", got, before)
			}
			// The table works on: the same checks now count.
			if d := tb.Apply(req("new", 4), now); !d.Allowed || d.Count != 4 {
				t.Errorf("after Rollback, 4 hits on a new id: got %+v, want allowed with count 4", d)
			}
		})
	}
}

func TestCommitKeepsTheChanges(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	req := Request{ID: "a", Policy: Policy{Scale: time.Second, Limit: 3}, Hits: 2}
	tb.Begin()
	tb.Apply(req, at(0))
	tb.Commit()
	if d := tb.Apply(req, at(0)); d.Allowed || d.Count != 2 {
		t.Fatalf("after Commit of 2 hits, 2 more: got %+v, want denied with count 2", d)
	}
	// A unit after a committed one starts afresh: its Rollback undoes only its own changes.
	tb.Begin()
	tb.Apply(Request{ID: "a", Policy: Policy{Scale: time.Second, Limit: 3}, Hits: 1}, at(0))
	tb.Rollback()
	if b, _ := tb.Get(req, at(0)); b.Count != 2 {
		t.Fatalf("after a rolled-back hit: got count %d, want 2", b.Count)
	}
}

// TestRollbackBringsBackAnEvictedBucket: in a full table that evicts, a
// unit whose new bucket evicted a live one puts it back on Rollback.
func TestRollbackBringsBackAnEvictedBucket(t *testing.T) {
	t.Parallel()
	tb := New(Config{MaxBuckets: 2, Evict: true, TrackChanges: true})
	req := func(id string) Request { return Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 5}, Hits: 2} }
	tb.Apply(req("a"), at(0))
	tb.Apply(req("b"), at(1))
	_ = tb.Changes(func([]byte) error { return nil })
	before := snapshotOf(tb, at(2))
	tb.Begin()
	tb.Apply(req("c"), at(2))
	if tb.Stats().Evictions != 1 {
		t.Fatalf("got %d evictions, want 1: the test tests nothing", tb.Stats().Evictions)
	}
	tb.Rollback()
	if got := snapshotOf(tb, at(2)); !slices.Equal(got, before) {
		t.Errorf("after Rollback got %q, want %q", got, before)
	}
	if tb.Stats().Evictions != 0 {
		t.Errorf("after Rollback got %d evictions, want 0", tb.Stats().Evictions)
	}
	// The journal is told the evicted bucket is there (again), not deleted.
	for _, d := range decodeAll(t, collect(t, tb.Changes)...) {
		if d.kind == recordDelete {
			t.Errorf("after Rollback the journal is told to delete %q", d.slot.id)
		}
	}
}

// TestRollbackLeavesNoBucketOfARefusedCheck: a unit in a full table that
// denies new buckets leaves nothing behind.
func TestRollbackLeavesNoBucketOfARefusedCheck(t *testing.T) {
	t.Parallel()
	tb := New(Config{MaxBuckets: 2})
	req := func(id string) Request { return Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 5}, Hits: 1} }
	tb.Apply(req("full"), at(0))
	tb.Begin()
	if d := tb.Apply(req("a"), at(0)); !d.Allowed {
		t.Fatalf("a: got %+v, want allowed", d)
	}
	if d := tb.Apply(req("b"), at(0)); !d.Full {
		t.Fatalf("b: got %+v, want refused by a full table", d)
	}
	tb.Rollback()
	if tb.Len() != 1 {
		t.Fatalf("after Rollback got %d buckets, want 1", tb.Len())
	}
}

// TestReserveSaysWhereTheHitsWereCounted: Window is the window's start
// for the windows, the TAT after the hits for token and leaky buckets, and 0
// when nothing was counted.
func TestReserveSaysWhereTheHitsWereCounted(t *testing.T) {
	t.Parallel()
	start := at(0).UnixMilli()
	cases := []struct {
		req  Request
		now  int64 // ms after t0
		want int64
	}{
		{Request{ID: "f", Policy: Policy{Scale: time.Second, Limit: 2}, Hits: 1}, 1_250, start + 1_000},
		{Request{ID: "s", Policy: Policy{Scale: time.Second, Limit: 2, Algorithm: SlidingWindow}, Hits: 1}, 2_999, start + 2_000},
		// 10 per second: 100 ms per token, 3 tokens from an empty bucket at 500.
		{Request{ID: "t", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 3}, 500, start + 800},
		{Request{ID: "l", Policy: Policy{Scale: time.Second, Limit: 4, Algorithm: LeakyBucket}, Hits: 1}, 10, start + 260},
		{Request{ID: "p", Policy: Policy{Scale: time.Second, Limit: 2}, Hits: 0}, 0, 0},
		{Request{ID: "d", Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 2}, 0, 0},
	}
	for _, c := range cases {
		tb := New(Config{})
		if got := tb.Reserve(c.req, at(c.now)); got.Window != c.want {
			t.Errorf("%s %v at %d ms: got window %d, want %d (%+v)", c.req.ID, c.req.Algorithm, c.now, got.Window-start, c.want-start, got)
		}
	}
	// A check that would count but finds the table full counts nothing:
	// window 0, whatever the previous check of the table counted.
	for a := range Algorithm(numAlgorithms) {
		tb := New(Config{MaxBuckets: 1})
		p := Policy{Algorithm: a, Scale: time.Second, Limit: 5}
		if got := tb.Reserve(Request{ID: "first", Policy: p, Hits: 1}, at(100)); got.Window == 0 || !got.Allowed {
			t.Fatalf("%v: the first bucket: %+v, want it counted", a, got)
		}
		if got := tb.Reserve(Request{ID: "second", Policy: p, Hits: 1}, at(200)); got.Window != 0 || !got.Full {
			t.Errorf("%v: a check refused by a full table: %+v, want Full and window 0", a, got)
		}
	}
}

// TestRefundCreditsOnlyTheWindowOfItsHits is the probe's finding in the
// table: a refund that lands after a boundary must not credit the new window.
func TestRefundCreditsOnlyTheWindowOfItsHits(t *testing.T) {
	t.Parallel()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			tb := New(Config{})
			req := Request{ID: "a", Policy: Policy{Scale: 20 * time.Millisecond, Limit: 5, Algorithm: alg}, Hits: 1}
			r := tb.Reserve(req, at(19)) // the last ms of window 0
			if !r.Allowed || r.Window != at(0).UnixMilli() {
				t.Fatalf("hit: got %+v, want allowed in the window at 0", r)
			}
			// Window 1 fills up; then the refund of the hit in window 0 arrives.
			for range 5 {
				tb.Apply(Request{ID: "a", Policy: Policy{Scale: 20 * time.Millisecond, Limit: 5, Algorithm: alg}, Hits: 1}, at(20))
			}
			ref := req
			ref.Window = r.Window
			if d := tb.Refund(ref, at(21)); d.Allowed {
				t.Errorf("after a refund for window 0 in window 1: a peek got %+v, want denied (window 1 is full)", d)
			}
			if d := tb.Apply(req, at(21)); d.Allowed {
				t.Errorf("a sixth hit in window 1 after the late refund: got %+v, want denied", d)
			}
			// In its own window a refund credits.
			r = tb.Reserve(req, at(41))
			ref.Window = r.Window
			tb.Refund(ref, at(42))
			if b, ok := tb.Get(req, at(42)); !ok || b.Count != 0 {
				t.Errorf("refund in the window of its hit: got %+v, want its bucket at count 0", b)
			}
		})
	}
}

func TestRefundOfAGCRABucketGivesBackOnlyWhatHasNotDrained(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	// 10 per second: a token every 100 ms; a bucket of 10.
	req := Request{ID: "t", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 4}
	r := tb.Reserve(req, at(0)) // tokens in use until 400
	if !r.Allowed || r.Window != at(400).UnixMilli() {
		t.Fatalf("4 hits: got %+v, want allowed, full again at 400 ms", r)
	}
	ref := req
	ref.Window = r.Window
	ref.Hits = 4
	// At 250 ms, 2.5 tokens have come back; only 1.5 of the 4 hits are still in the bucket.
	d := tb.Refund(ref, at(250))
	if d.ResetAfter != 0 || d.Count != 0 {
		t.Errorf("refund at 250 ms: got %+v, want an empty bucket", d)
	}
	// Later hits stacked after the reserved ones: a refund gives back the reserved part only.
	tb.Apply(Request{ID: "u", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 2}, at(1_000))
	r = tb.Reserve(Request{ID: "u", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 3}, at(1_000))
	tb.Apply(Request{ID: "u", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 1}, at(1_000))
	ref = Request{ID: "u", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 3, Window: r.Window}
	if d := tb.Refund(ref, at(1_000)); d.Count != 3 || d.ResetAfter != 300*time.Millisecond {
		t.Errorf("refund of 3 of 6 tokens: got %+v, want 3 in use, full in 300 ms", d)
	}
	// Once the reserved hits have drained there is nothing to give back.
	r = tb.Reserve(Request{ID: "v", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 2}, at(2_000))
	tb.Apply(Request{ID: "v", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 5}, at(2_300))
	ref = Request{ID: "v", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 2, Window: r.Window}
	if d := tb.Refund(ref, at(2_300)); d.Count != 5 {
		t.Errorf("refund of drained hits: got %+v, want the 5 later tokens still in use", d)
	}
}
