package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestSweepsEveryIntervalInBoundedBatches: the sweeping loop sweeps at
// every interval of its clock, not before, each shard in Sweeps of at most
// SweepBatch buckets, asked again while a shard has more.
func TestSweepsEveryIntervalInBoundedBatches(t *testing.T) {
	t.Parallel()
	const shards = 2
	t0 := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
	clock := clocktest.New(t0)
	reports := make(sweepReports, 4)
	s := startSystem(t, Config{Shards: shards, Clock: clock, SweepInterval: 10 * time.Second, SweepBatch: 100, SweepObserver: reports})
	stock := [shards]int{250, 40}
	for i := 0; stock[0]+stock[1] > 0; i++ {
		id := fmt.Sprint("short-", i)
		if sh := shardOf(id, shards); stock[sh] > 0 {
			stock[sh]--
			mustCheck(t, s, table.Request{ID: id, Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1})
		}
	}
	next := func() SweepReport {
		t.Helper()
		select {
		case r := <-reports:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no sweep report within 10s")
			return SweepReport{}
		}
	}
	clock.BlockUntil(1)
	clock.Advance(9 * time.Second)
	select {
	case r := <-reports:
		t.Fatalf("got a sweep report %+v before the interval elapsed", r)
	default:
	}
	clock.Advance(time.Second)
	// Shard 0 answers 100 (more), 100 (more), 50: three Sweeps; shard 1
	// answers 40: one.
	if got, want := next(), (SweepReport{Deleted: 290, Batches: 4, Complete: true}); got != want {
		t.Fatalf("first round: got %+v, want %+v", got, want)
	}
	if got := s.Stats().Buckets; got != 0 {
		t.Fatalf("buckets after the first round: got %d, want 0", got)
	}
	clock.Advance(10 * time.Second)
	if got := next(); got != (SweepReport{Deleted: 0, Batches: 2, Complete: true}) {
		t.Fatalf("second round: got %+v, want an empty complete round of 2 batches", got)
	}
}

// TestRebuildThatPanicsServesWithoutTheJournal: a crashed shard whose
// rebuild panics too serves from a temporary table, as when its journal
// cannot be read, instead of taking its caller down; a second later it
// reads the journal and counts the hits made meanwhile on top.
func TestRebuildThatPanicsServesWithoutTheJournal(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000))
	rebuilds := 0
	cfg := Config{Shards: 1, DataDir: t.TempDir(), Clock: clock, OnJournalError: FailOpen, SweepInterval: -1,
		applyHook: func(r table.Request) {
			if r.ID == "boom" {
				panic("injected crash")
			}
		},
		rebuildHook: func() {
			if rebuilds++; rebuilds == 1 {
				panic("injected rebuild crash")
			}
		}}
	s := startSystem(t, cfg)
	for range 5 {
		mustCheck(t, s, hit("a", 100))
	}
	if _, err := s.Check(context.Background(), hit("boom", 100)); err == nil {
		t.Fatal("the crashing check: got no error, want ErrUnavailable")
	}
	if d := mustCheck(t, s, hit("a", 100)); !d.Allowed || d.Count != 1 {
		t.Fatalf("a without the journal: got %+v, want allowed at count 1 (a temporary table)", d)
	}
	if st := s.Stats(); st.Restarts != 1 || st.FailedOpen != 1 {
		t.Fatalf("stats: %+v; want 1 restart and 1 batch answered without the journal", st)
	}
	clock.Advance(rebuildRetry)
	// 5 journaled, 1 made meanwhile, and this one.
	if d := mustCheck(t, s, hit("a", 100)); d.Count != 7 {
		t.Fatalf("a once the journal is read again: count %d, want 7", d.Count)
	}
	s = restart(t, s, cfg)
	if got := peek(t, s, "a", 100); got != 7 {
		t.Fatalf("a after the restart: count %d, want 7", got)
	}
	if rebuilds != 1 {
		t.Fatalf("rebuilds: %d, want 1 (the retry reads the journal without one)", rebuilds)
	}
}
