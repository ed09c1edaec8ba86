package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// orderedPair returns two ids whose shards are different, the first's
// lower: a batch of the two decides the first one first.
func orderedPair(shards int) (a, b string) {
	a = "batch-a"
	for i := 0; ; i++ {
		if b = fmt.Sprint("batch-b-", i); shardOf(b, shards) > shardOf(a, shards) {
			return a, b
		}
	}
}

// whileBatchDecides runs fn on its own goroutine when the batch reaches
// its check of id, and waits a moment for it: long enough for fn to finish
// if the shards it needs are free, not longer. It reports whether fn
// finished while the batch was being decided.
func whileBatchDecides(fn func()) (hook func(), done func() bool) {
	finished := make(chan struct{})
	var during atomic.Bool
	hook = func() {
		go func() {
			fn()
			close(finished)
		}()
		select {
		case <-finished:
			during.Store(true)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return hook, func() bool {
		<-finished
		return during.Load()
	}
}

// TestDeniedBatchGivesTheNextWindowNothing is the probe's finding: key A
// (20 ms windows, limit 5) and key B (full), batches [A, B] always denied.
// A batch whose check of A is decided in the last millisecond of a window
// and whose denial comes after the boundary must not credit the next
// window: that window still admits exactly 5 singles.
func TestDeniedBatchGivesTheNextWindowNothing(t *testing.T) {
	t.Parallel()
	for _, alg := range []table.Algorithm{table.FixedWindow, table.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			const shards = 4
			idA, idB := orderedPair(shards)
			start := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%20 + 19) // a window's last ms
			clock := clocktest.New(start)
			a := table.Request{ID: idA, Policy: table.Policy{Scale: 20 * time.Millisecond, Limit: 5, Algorithm: alg}, Hits: 1}
			b := table.Request{ID: idB, Policy: table.Policy{Scale: 24 * time.Hour, Limit: 1}, Hits: 1}
			var s *System // set before the hook can run
			var singles atomic.Int64
			hookB, finished := whileBatchDecides(func() {
				// In the next window, A's budget is spent by singles.
				for range 5 {
					if d, err := s.Check(context.Background(), a); err == nil && d.Allowed {
						singles.Add(1)
					}
				}
			})
			var armed atomic.Bool
			s = startSystem(t, Config{Shards: shards, Clock: clock, applyHook: func(r table.Request) {
				if r.ID == idB && armed.CompareAndSwap(true, false) {
					clock.Advance(time.Millisecond) // the boundary passes mid-batch
					hookB()
				}
			}})
			ctx := context.Background()
			if d, err := s.Check(ctx, b); err != nil || !d.Allowed {
				t.Fatalf("filling B: got %+v, %v", d, err)
			}
			armed.Store(true)
			decs, allowed, err := s.CheckAll(ctx, []table.Request{a, b})
			if err != nil || allowed {
				t.Fatalf("batch [A, B]: got allowed %v, %v, want denied", allowed, err)
			}
			if !decs[0].Allowed || decs[1].Allowed {
				t.Fatalf("batch decisions: got %+v, want A admitted alone and B denied", decs)
			}
			finished()
			d, err := s.Check(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				singles.Add(1)
			}
			if got := singles.Load(); got != 5 {
				t.Fatalf("the window after the denied batch admitted %d singles of A, want 5 (limit 5)", got)
			}
			if alg == table.SlidingWindow {
				// The rolling window that ends as the next window starts holds
				// those 5 singles: one more is denied (a refund credited to the
				// wrong window would have made room).
				clock.Advance(20 * time.Millisecond)
				if d, err := s.Check(ctx, a); err != nil || d.Allowed {
					t.Fatalf("a single at the start of the window after: got %+v, %v, want denied", d, err)
				}
			}
		})
	}
}

// TestDoomedBatchDeniesNoConcurrentCheck: while a batch that will be
// denied is decided, a single check of one of its buckets waits for it and
// is then decided as if the batch never happened.
func TestDoomedBatchDeniesNoConcurrentCheck(t *testing.T) {
	t.Parallel()
	const shards = 4
	idA, idB := orderedPair(shards)
	a := table.Request{ID: idA, Policy: table.Policy{Scale: time.Hour, Limit: 1}, Hits: 1}
	b := table.Request{ID: idB, Policy: table.Policy{Scale: time.Hour, Limit: 1}, Hits: 1}
	var s *System
	var single table.Decision
	var singleErr error
	hookB, finished := whileBatchDecides(func() { single, singleErr = s.Check(context.Background(), a) })
	var armed atomic.Bool
	s = startSystem(t, Config{Shards: shards, Clock: clocktest.New(time.Unix(1_700_000_000, 0)), applyHook: func(r table.Request) {
		if r.ID == idB && armed.CompareAndSwap(true, false) {
			hookB()
		}
	}})
	ctx := context.Background()
	if _, err := s.Check(ctx, b); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if _, allowed, err := s.CheckAll(ctx, []table.Request{a, b}); err != nil || allowed {
		t.Fatalf("batch: got allowed %v, %v, want denied", allowed, err)
	}
	if finished() {
		t.Errorf("the single check was decided while the batch held its shard")
	}
	if singleErr != nil || !single.Allowed || single.Count != 1 {
		t.Fatalf("single check of A beside the doomed batch: got %+v, %v, want its one hit allowed", single, singleErr)
	}
}

// TestRefusedBatchLeavesNoBucket: a batch refused because a shard is full
// (or denied by its limits) creates no bucket anywhere, in memory or in the
// journal.
func TestRefusedBatchLeavesNoBucket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Start(context.Background(), Config{Shards: 1, MaxBuckets: 2, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Check(ctx, hit("resident", 10)); err != nil {
		t.Fatal(err)
	}
	decs, allowed, err := s.CheckAll(ctx, []table.Request{hit("new-1", 10), hit("new-2", 10)})
	if err != nil || allowed || !decs[1].Full {
		t.Fatalf("batch into a full table: got %+v, allowed %v, %v, want refused (Full)", decs, allowed, err)
	}
	if got := s.Stats().Buckets; got != 1 {
		t.Fatalf("after the refused batch: got %d buckets, want 1", got)
	}
	if b, err := s.Buckets(ctx, "new-1"); err != nil || len(b) != 0 {
		t.Fatalf("buckets of new-1: got %+v, %v, want none", b, err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s = startSystem(t, Config{Shards: 1, MaxBuckets: 2, DataDir: dir})
	if got := s.Stats().Buckets; got != 1 {
		t.Fatalf("after a restart: got %d buckets, want 1", got)
	}
	// Room for one more: the batch's first check alone fits.
	if d, err := s.Check(ctx, hit("new-1", 10)); err != nil || !d.Allowed || d.Count != 1 {
		t.Fatalf("new-1 alone: got %+v, %v, want its first hit allowed", d, err)
	}
}

// TestBatchCrashRollsBackTheOtherShards: a panic while one shard decides
// its part of a batch answers ErrUnavailable, leaves the other shards as
// they were, and the crashed shard is rebuilt and serves again.
func TestBatchCrashRollsBackTheOtherShards(t *testing.T) {
	t.Parallel()
	const shards = 4
	idA, idB := orderedPair(shards)
	s := startSystem(t, Config{Shards: shards, applyHook: func(r table.Request) {
		if r.ID == idB && r.Hits == 7 {
			panic("poisoned request")
		}
	}})
	ctx := context.Background()
	poisoned := hit(idB, 10)
	poisoned.Hits = 7
	if _, _, err := s.CheckAll(ctx, []table.Request{hit(idA, 10), poisoned}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("poisoned batch: got %v, want ErrUnavailable", err)
	}
	if d, err := s.Check(ctx, hit(idA, 10)); err != nil || d.Count != 1 {
		t.Fatalf("A after the crashed batch: got %+v, %v, want count 1 (the batch's hit undone)", d, err)
	}
	if d, err := s.Check(ctx, hit(idB, 10)); err != nil || d.Count != 1 {
		t.Fatalf("B after the crash: got %+v, %v, want its first hit on a rebuilt table", d, err)
	}
	decs, ok, err := s.CheckAll(ctx, []table.Request{hit(idA, 10), hit(idB, 10)})
	if err != nil || !ok || decs[0].Count != 2 || decs[1].Count != 2 {
		t.Fatalf("a batch after the rebuild: got %+v, %v, %v, want both counted", decs, ok, err)
	}
	if got := s.Stats().Restarts; got != 1 {
		t.Fatalf("got %d restarts, want 1", got)
	}
}

// TestBatchesAndSinglesStayExactAtBoundaries races denied batches [A, B]
// against single checks of A across many 20 ms windows on the real clock:
// no window of A ever admits more than its limit (counted by the window
// each single says it was counted in).
func TestBatchesAndSinglesStayExactAtBoundaries(t *testing.T) {
	t.Parallel()
	for _, alg := range []table.Algorithm{table.FixedWindow, table.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			idA, idB := orderedPair(4)
			s := startSystem(t, Config{Shards: 4})
			ctx := context.Background()
			a := table.Request{ID: idA, Policy: table.Policy{Scale: 20 * time.Millisecond, Limit: 5, Algorithm: alg}, Hits: 1}
			b := table.Request{ID: idB, Policy: table.Policy{Scale: 24 * time.Hour, Limit: 1}, Hits: 1}
			if _, err := s.Check(ctx, b); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Second)
			if testing.Short() {
				deadline = time.Now().Add(200 * time.Millisecond)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for n := 0; n < 1_000_000; n++ {
						select {
						case <-stop:
							return
						default:
						}
						if _, ok, err := s.CheckAll(ctx, []table.Request{a, b}); err != nil || ok {
							t.Errorf("batch: got allowed %v, %v, want denied", ok, err)
							return
						}
					}
				})
			}
			perWindow := map[int64]int64{}
			for n := 0; n < 1_000_000 && time.Now().Before(deadline); n++ {
				r, err := s.Reserve(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					perWindow[r.Window]++
				}
			}
			close(stop)
			wg.Wait()
			if len(perWindow) < 5 {
				t.Fatalf("only %d windows admitted anything: the test tests nothing", len(perWindow))
			}
			for w, n := range perWindow {
				if n > 5 {
					t.Errorf("window %d admitted %d singles, want at most 5", w, n)
				}
			}
		})
	}
}

// TestAppendCheckAll: the decisions go after what dst holds, into its
// memory when it has room, and are CheckAll's; an invalid batch leaves
// dst as it was and counts nothing.
func TestAppendCheckAll(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{})
	ctx := context.Background()
	reqs := []table.Request{
		{ID: "append-a", Policy: table.Policy{Scale: time.Minute, Limit: 2}, Hits: 1},
		{ID: "append-b", Policy: table.Policy{Scale: time.Minute, Limit: 2}, Hits: 2},
	}
	marker := table.Decision{Count: -7}
	dst := append(make([]table.Decision, 0, 8), marker)
	got, allowed, err := s.AppendCheckAll(ctx, dst, reqs)
	if err != nil || !allowed || len(got) != 3 || got[0] != marker || &got[0] != &dst[0] {
		t.Fatalf("got %+v, %v, %v; want the marker then two decisions, in dst's memory", got, allowed, err)
	}
	if got[1].Count != 1 || got[1].Remaining != 1 || got[2].Count != 2 || got[2].Remaining != 0 {
		t.Errorf("decisions %+v, want counts 1 and 2", got[1:])
	}
	// Denied: b is full; nothing is counted, the decisions still come.
	got, allowed, err = s.AppendCheckAll(ctx, got[:1], reqs)
	if err != nil || allowed || len(got) != 3 || got[2].Allowed {
		t.Fatalf("a denied batch: %+v, %v, %v", got, allowed, err)
	}
	bad := append(slices.Clone(reqs), table.Request{ID: "", Policy: table.Policy{Scale: time.Minute, Limit: 2}, Hits: 1})
	got, allowed, err = s.AppendCheckAll(ctx, dst, bad)
	var ie *table.IndexError
	if !errors.As(err, &ie) || ie.Index != 2 || allowed || len(got) != 1 || got[0] != marker {
		t.Fatalf("an invalid batch: %+v, %v, %v; want dst as it was and an IndexError of check 2", got, allowed, err)
	}
	d, err := s.Check(ctx, table.Request{ID: "append-a", Policy: reqs[0].Policy})
	if err != nil || d.Count != 1 {
		t.Errorf("a peek of append-a after: %+v, %v; want count 1 (the first batch's hit only)", d, err)
	}
}
