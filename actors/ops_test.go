package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestRefundResetBuckets(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 2})
	ctx := context.Background()
	req := table.Request{ID: "dora", Policy: table.Policy{Scale: time.Hour, Limit: 5}, Hits: 4}
	mustCheck(t, s, req)
	req.Hits = 3
	if d, err := s.Refund(ctx, req); err != nil || d.Count != 1 || d.Remaining != 4 {
		t.Fatalf("Refund 3: got %+v, %v; want count 1", d, err)
	}
	req.Hits = 0
	if _, err := s.Refund(ctx, req); !errors.Is(err, table.ErrInvalid) {
		t.Fatalf("Refund of 0 hits: got %v, want ErrInvalid", err)
	}
	other := table.Request{ID: "dora", Policy: table.Policy{Scale: time.Minute, Limit: 9, Algorithm: table.TokenBucket}, Hits: 2}
	mustCheck(t, s, other)
	bs, err := s.Buckets(ctx, "dora")
	if err != nil || len(bs) != 2 || bs[0].Algorithm != table.FixedWindow || bs[0].Count != 1 || bs[1].Algorithm != table.TokenBucket || bs[1].Count != 2 {
		t.Fatalf("Buckets: got %+v, %v; want the fixed window at 1 and the token bucket at 2", bs, err)
	}
	if n, err := s.Reset(ctx, req); err != nil || n != 1 {
		t.Fatalf("Reset: got %d, %v; want 1", n, err)
	}
	if bs, _ := s.Buckets(ctx, "dora"); len(bs) != 1 {
		t.Fatalf("after Reset: %d buckets, want 1 (the other limit's)", len(bs))
	}
	if _, err := s.Buckets(ctx, ""); !errors.Is(err, table.ErrInvalid) {
		t.Fatalf("Buckets(\"\"): got %v, want ErrInvalid", err)
	}
	// ResetID: each limit of the id in one namespace, no other.
	cell := table.Request{ID: "dora", Policy: table.Policy{Scale: time.Minute, Limit: 9, Algorithm: table.TokenBucket}, Hits: 2, Namespace: "cell"}
	mustCheck(t, s, cell)
	cell.Burst = 20
	mustCheck(t, s, cell)
	if n, err := s.ResetID(ctx, "cell", "dora"); err != nil || n != 2 {
		t.Fatalf("ResetID: got %d, %v; want 2", n, err)
	}
	if bs, _ := s.Buckets(ctx, "dora"); len(bs) != 1 || bs[0].Namespace != "" {
		t.Fatalf("after ResetID: %+v, want the ad-hoc token bucket alone", bs)
	}
	if _, err := s.ResetID(ctx, "cell", ""); !errors.Is(err, table.ErrInvalid) {
		t.Fatalf("ResetID of \"\": got %v, want ErrInvalid", err)
	}
}

// TestCheckAllIsAllOrNothing: a multi-limit check consumes nothing unless
// every limit admits it, reports each decision, and under concurrency never
// lets any limit admit more than its limit.
func TestCheckAllIsAllOrNothing(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 4})
	ctx := context.Background()
	perUser := table.Request{ID: "user-1", Policy: table.Policy{Scale: time.Hour, Limit: 3}, Hits: 1}
	global := table.Request{ID: "global", Policy: table.Policy{Scale: time.Hour, Limit: 5}, Hits: 1}
	for i := range 3 {
		if _, ok, err := s.CheckAll(ctx, []table.Request{perUser, global}); !ok || err != nil {
			t.Fatalf("multi-check %d: got %v, %v; want allowed", i, ok, err)
		}
	}
	decs, ok, err := s.CheckAll(ctx, []table.Request{perUser, global})
	if ok || err != nil || decs[0].Allowed || !decs[1].Allowed || decs[0].RetryAfter <= 0 {
		t.Fatalf("4th multi-check: got %+v, %v, %v; want denied by the per-user limit", decs, ok, err)
	}
	peek := global
	peek.Hits = 0
	if d := mustCheck(t, s, peek); d.Count != 3 {
		t.Fatalf("global after a denied multi-check: count %d, want 3 (the denied check was refunded)", d.Count)
	}
	if _, _, err := s.CheckAll(ctx, nil); !errors.Is(err, table.ErrInvalid) {
		t.Fatalf("empty CheckAll: got %v, want ErrInvalid", err)
	}
	if _, _, err := s.CheckAll(ctx, []table.Request{perUser, {ID: "", Policy: table.Policy{Scale: time.Second, Limit: 1}}}); err == nil || err.Error() != "checks[1].id: is required" {
		t.Fatalf("CheckAll with a bad request: got %v, want checks[1].id named", err)
	}

	// Concurrency: 200 multi-checks over 20 users sharing one global limit
	// of 50; each user's own limit is 4. Admitted multi-checks never exceed
	// either limit, and the counts match what was admitted.
	const users, tries = 20, 200
	var admitted atomic.Int64
	perUserAdmitted := make([]atomic.Int64, users)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			u := i % users
			reqs := []table.Request{
				{ID: fmt.Sprint("u-", u), Policy: table.Policy{Scale: time.Hour, Limit: 4}, Hits: 1},
				{ID: "shared", Policy: table.Policy{Scale: time.Hour, Limit: 50}, Hits: 1},
			}
			_, ok, err := s.CheckAll(ctx, reqs)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				admitted.Add(1)
				perUserAdmitted[u].Add(1)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 50 {
		t.Fatalf("admitted %d multi-checks, want exactly 50 (the shared limit; 20 users × 4 = 80 would allow more)", n)
	}
	shared := mustCheck(t, s, table.Request{ID: "shared", Policy: table.Policy{Scale: time.Hour, Limit: 50}})
	if shared.Count != 50 {
		t.Fatalf("shared count %d, want 50", shared.Count)
	}
	for u := range users {
		d := mustCheck(t, s, table.Request{ID: fmt.Sprint("u-", u), Policy: table.Policy{Scale: time.Hour, Limit: 4}})
		if d.Count != perUserAdmitted[u].Load() {
			t.Fatalf("u-%d: count %d, but %d admitted (a refund was lost or doubled)", u, d.Count, perUserAdmitted[u].Load())
		}
	}
}

// TestMaxBucketsAcrossShards: a flood of distinct ids stays within the
// System's bound; the refusals are counted exactly.
func TestMaxBucketsAcrossShards(t *testing.T) {
	t.Parallel()
	const shards, limit, flood = 4, 400, 3000
	s := startSystem(t, Config{Shards: shards, MaxBuckets: limit, SweepInterval: -1})
	full := 0
	for i := range flood {
		d := mustCheck(t, s, table.Request{ID: fmt.Sprint("flood-", i), Policy: table.Policy{Scale: time.Hour, Limit: 1}, Hits: 1})
		if d.Full {
			full++
		}
	}
	st := s.Stats()
	if st.Buckets != limit || int(st.Rejections) != full || full != flood-limit {
		t.Fatalf("got %d buckets, %d refused (stats %d); want %d buckets and %d refused", st.Buckets, full, st.Rejections, limit, flood-limit)
	}
	e := startSystem(t, Config{Shards: shards, MaxBuckets: limit, EvictOldest: true, SweepInterval: -1})
	for i := range flood {
		if d := mustCheck(t, e, table.Request{ID: fmt.Sprint("flood-", i), Policy: table.Policy{Scale: time.Hour, Limit: 1}, Hits: 1}); !d.Allowed {
			t.Fatalf("evict-oldest refused check %d: %+v", i, d)
		}
	}
	if st := e.Stats(); st.Buckets != limit || st.Evictions != flood-limit {
		t.Fatalf("evict-oldest: got %d buckets, %d evictions; want %d and %d", st.Buckets, st.Evictions, limit, flood-limit)
	}
}

// TestCardinalityFlood: 400k distinct ids through the System against
// MaxBuckets 40,000 (in each policy): the buckets never exceed the bound,
// the heap stays flat (measured after GC at 10% and at 100% of the flood),
// and the policy's counts are exact. table's TestCardinality floods one
// table with 2M ids.
//
// Not parallel: the heap it measures is the whole process's.
func TestCardinalityFlood(t *testing.T) {
	const flood, bound, workers = 400_000, 40_000, 16
	for _, evict := range []bool{false, true} {
		t.Run(fmt.Sprint("evict=", evict), func(t *testing.T) {
			// A stopped clock: no window ends during the flood, so no bucket expires
			// and every one beyond the bound is refused or evicted.
			s := startSystem(t, Config{Shards: 4, MaxBuckets: bound, EvictOldest: evict, SweepInterval: -1, Clock: clocktest.New(time.Unix(1_700_000_000, 0))})
			ctx := context.Background()
			var full atomic.Int64
			run := func(from, to int) {
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for i := from + w; i < to; i += workers {
							d, err := s.Check(ctx, table.Request{ID: fmt.Sprint("flood-", i), Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1})
							if err != nil {
								t.Error(err)
								return
							}
							if d.Full {
								full.Add(1)
							}
						}
					})
				}
				wg.Wait()
			}
			run(0, flood/10)
			early := heapAfterGC()
			run(flood/10, flood)
			late := heapAfterGC()
			st := s.Stats()
			if st.Buckets > bound {
				t.Fatalf("%d buckets, bound %d", st.Buckets, bound)
			}
			// Each shard fills to its share; the ids spread unevenly, so a
			// shard may refuse or evict before the total reaches the bound.
			if st.Buckets < bound*9/10 {
				t.Fatalf("only %d buckets held, want near %d", st.Buckets, bound)
			}
			if evict {
				if full.Load() != 0 || st.Evictions != int64(flood)-st.Buckets || st.Rejections != 0 {
					t.Fatalf("evict-oldest: %d refused, stats %+v; want 0 refused and %d evictions", full.Load(), st, int64(flood)-st.Buckets)
				}
			} else if full.Load() != int64(flood)-st.Buckets || st.Rejections != full.Load() || st.Evictions != 0 {
				t.Fatalf("deny-new: %d refused, stats %+v; want %d refused, all counted", full.Load(), st, int64(flood)-st.Buckets)
			}
			if growth := float64(late) / float64(early); growth > 1.25 {
				t.Fatalf("heap grew from %d to %d bytes (%.2f×) between 10%% and 100%% of the flood", early, late, growth)
			}
			t.Logf("heap after GC: %d MB at 10%%, %d MB at 100%% of %d ids", early>>20, late>>20, flood)
		})
	}
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
