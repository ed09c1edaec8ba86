package actors

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// A check whose caller serves its own shard travels in the shard's own
// call: the pool of calls is never asked for one, and the answers are
// those of the limit.
func TestCallerServedCheckTakesNoPooledCall(t *testing.T) {
	t.Parallel()
	for _, top := range []bool{false, true} {
		t.Run(fmt.Sprint("topkeys=", top), func(t *testing.T) {
			t.Parallel()
			s := startSystem(t, Config{Clock: clocktest.New(time.Unix(1_700_000_000, 0)), TopKeys: top})
			var made atomic.Int64
			s.calls.New = func() any { made.Add(1); return &call{done: make(chan struct{}, 1)} }
			ctx := context.Background()
			for i := range 50 {
				for k := range 4 {
					d, err := s.Check(ctx, hit(fmt.Sprint("own-", k), 30))
					if err != nil {
						t.Fatalf("check %d of own-%d: %v", i, k, err)
					}
					if want := i < 30; d.Allowed != want || d.Count != min(int64(i+1), 30) {
						t.Fatalf("check %d of own-%d: allowed %v count %d, want %v and %d", i, k, d.Allowed, d.Count, want, min(i+1, 30))
					}
				}
			}
			if got := made.Load(); got != 0 {
				t.Errorf("the pool made %d calls for checks their callers served, want 0", got)
			}
			// Other operations still take pooled calls.
			if _, err := s.Refund(ctx, hit("own-0", 30)); err != nil {
				t.Fatal(err)
			}
			if got := made.Load(); got != 1 {
				t.Errorf("the pool made %d calls after a Refund, want 1", got)
			}
		})
	}
}

// A check decided on its caller's goroutine journals its change before it
// answers: a System restarted on the directory finds every admitted hit.
func TestCallerServedChecksAreJournaled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	ctx := context.Background()
	s, err := Start(ctx, Config{DataDir: dir, Clock: clk, Shards: 2, JournalSync: SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if d, err := s.Check(ctx, hit("durable-own", 10)); err != nil || !d.Allowed || d.Count != int64(i+1) {
			t.Fatalf("check %d: %+v, %v", i, d, err)
		}
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s, err = Start(ctx, Config{DataDir: dir, Clock: clk, Shards: 2, JournalSync: SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(ctx) }()
	d, err := s.Check(ctx, table.Request{ID: "durable-own", Policy: table.Policy{Scale: time.Hour, Limit: 10}})
	if err != nil || d.Count != 7 || d.Remaining != 3 {
		t.Errorf("peek after restart: count %d remaining %d (%v), want 7 and 3", d.Count, d.Remaining, err)
	}
}

// TestCheckAllAllocatesOnlyItsDecisions: a CheckAll of up to allStack
// requests keeps its bookkeeping (the order by shard, the shards held,
// the checks per shard) on the stack: its one allocation is the
// decisions it returns. (AllocsPerRun refuses to run in parallel.)
func TestCheckAllAllocatesOnlyItsDecisions(t *testing.T) {
	s := startSystem(t, Config{Shards: 8, SweepInterval: -1})
	ctx := context.Background()
	reqs := make([]table.Request, 100)
	for i := range reqs {
		reqs[i] = hit(fmt.Sprint("all-", i), 1<<40)
	}
	if _, ok, err := s.CheckAll(ctx, reqs); err != nil || !ok {
		t.Fatalf("CheckAll: allowed %v, %v", ok, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = s.CheckAll(ctx, reqs) }); n != 1 {
		t.Errorf("CheckAll of %d requests over 8 shards: %v allocations, want 1", len(reqs), n)
	}
}

// TestShardOfHashIsShardOf: the shard a check goes to, by a mask or a
// division, is shardOf's, the FNV-1a of its id modulo the shards, which
// the journals' layout depends on.
func TestShardOfHashIsShardOf(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 7, 8, 12, 64, 1000, MaxShards} {
		s := &System{shards: make([]*shard, n), mask: shardMask(n)}
		for i := range s.shards {
			s.shards[i] = &shard{index: i}
		}
		for i := range 2000 {
			id := fmt.Sprint("spread-", i*7919)
			if got, want := s.shardOfHash(idHash(id)).index, shardOf(id, n); got != want {
				t.Fatalf("%d shards, id %q: shard %d, want %d", n, id, got, want)
			}
		}
	}
}

// doneCounter is a context that counts the calls of its Done.
type doneCounter struct {
	context.Context
	n *atomic.Int64
}

func (c doneCounter) Done() <-chan struct{} {
	c.n.Add(1)
	return c.Context.Done()
}

// TestFreeShardLeavesDoneUnasked: a caller that finds its shard free
// decides there and never asks its context for Done, whose first call
// makes the channel of a cancelable context (an HTTP request's): Check,
// Reserve, CheckEach of one and of several, and Refund. A caller that
// finds its shard busy asks it, to know whether it may wait, and is
// answered once the shard is free again.
func TestFreeShardLeavesDoneUnasked(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Clock: clocktest.New(time.Unix(1_700_000_000, 0))})
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	var asked atomic.Int64
	ctx := doneCounter{parent, &asked}
	decs := make([]table.Decision, 3)
	for name, op := range map[string]func() error{
		"Check":   func() error { _, err := s.Check(ctx, hit("done-a", 100)); return err },
		"Reserve": func() error { _, err := s.Reserve(ctx, hit("done-a", 100)); return err },
		"CheckEach of one": func() error {
			return s.CheckEach(ctx, []table.Request{hit("done-b", 100)}, decs[:1])
		},
		"CheckEach": func() error {
			return s.CheckEach(ctx, []table.Request{hit("done-c", 100), hit("done-d", 100), hit("done-e", 100)}, decs)
		},
		"Refund": func() error { _, err := s.Refund(ctx, hit("done-a", 100)); return err },
	} {
		asked.Store(0)
		if err := op(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := asked.Load(); n != 0 {
			t.Errorf("%s on free shards asked Done %d times, want 0", name, n)
		}
	}

	asked.Store(0)
	sh := s.shards[s.shardIndexOf("done-busy")]
	sh.mu.Lock()
	got := make(chan error, 1)
	go func() {
		d, err := s.Check(ctx, hit("done-busy", 100))
		if err == nil && (!d.Allowed || d.Count != 1) {
			err = fmt.Errorf("allowed %v count %d, want allowed with count 1", d.Allowed, d.Count)
		}
		got <- err
	}()
	for asked.Load() == 0 {
		runtime.Gosched() // until the caller has found the shard busy
	}
	sh.mu.Unlock()
	if err := <-got; err != nil {
		t.Fatalf("Check of a busy shard: %v", err)
	}
}
