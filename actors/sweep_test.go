package actors

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/sweeper"
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

// steppingClock is a manual clock that moves on by step at every reading,
// as if each reading came step after the one before, so that a slice's
// time bound ends it after a known number of readings. Its timers fire
// only when the test fires them, one at a time (fireNext), so that time
// only goes forward, whoever reads it meanwhile.
type steppingClock struct {
	mu     sync.Mutex
	now    time.Time
	step   time.Duration
	timers []*stepTimer
}

type stepTimer struct {
	c  *steppingClock
	at time.Time
	f  func()
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *steppingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &stepTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *stepTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if i := slices.Index(t.c.timers, t); i >= 0 {
		t.c.timers = slices.Delete(t.c.timers, i, i+1)
		return true
	}
	return false
}

func (c *steppingClock) setStep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

func (c *steppingClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fireNext moves the clock to the earliest timer, if it is later, and
// fires it.
func (c *steppingClock) fireNext() {
	c.mu.Lock()
	i := 0
	for j, t := range c.timers {
		if t.at.Before(c.timers[i].at) {
			i = j
		}
	}
	t := c.timers[i]
	c.timers = slices.Delete(c.timers, i, i+1)
	if t.at.After(c.now) {
		c.now = t.at
	}
	c.mu.Unlock()
	t.f()
}

// TestSweepOfALargeBacklogHoldsTheShardBriefly is the structure of a mass
// expiry's sweep, on a clock that moves 10µs at every reading: each hold of
// the shard deletes at most what sweepSliceTime allows (SliceCheck
// deletions between two readings) and never more than sweepSlice; the
// sweeping pauses on a timer for sweepDuty-1 times the holds since its
// last pause as soon as that reaches sweepPauseMin, and no slice runs
// until the timer fires; a check queued during a slice is decided before
// the next slice;
// SweepStats counts the slices and the shard's backlog.
func TestSweepOfALargeBacklogHoldsTheShardBriefly(t *testing.T) {
	t.Parallel()
	expired := 1_000_000
	if testing.Short() {
		expired = 100_000
	}
	const step = 10 * time.Microsecond
	t0 := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
	clock := &steppingClock{now: t0}
	reports := make(sweepReports, 4)
	var (
		s         *System
		lens      []int // the shard's buckets at the start of each slice
		started   atomic.Int64
		decidedAt = -1 // slices started when the queued check was decided
		backlog   = -1 // SweepStats().Backlog at the start of slice 2
		queued    = table.Request{ID: "queued", Policy: table.Policy{Scale: 24 * time.Hour, Limit: 10}, Hits: 1}
	)
	answered := make(chan error, 1)
	s = startSystem(t, Config{Shards: 1, Clock: clock, SweepInterval: time.Hour, MaxBuckets: -1, SweepObserver: reports,
		applyHook: func(r table.Request) {
			if r.ID == queued.ID && decidedAt < 0 && len(lens) > 0 {
				decidedAt = len(lens)
			}
		},
		sweepHook: func() {
			started.Add(1)
			lens = append(lens, s.shards[0].table.Len())
			if len(lens) != 2 {
				return
			}
			backlog = s.SweepStats().Backlog
			// The shard is held: a check that may not wait queues.
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				defer cancel()
				_, err := s.Check(ctx, queued)
				answered <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); s.shards[0].q.queued.Load() != 1; runtime.Gosched() {
				if time.Now().After(deadline) {
					panic("the check did not reach the inbox within 10s")
				}
			}
		}})
	mustCheck(t, s, queued) // its bucket lives on: the sweep must not count it
	reqs, decs := make([]table.Request, 1000), make([]table.Decision, 1000)
	for i := 0; i < expired; i += len(reqs) {
		for j := range reqs {
			reqs[j] = table.Request{ID: "x-" + strconv.Itoa(i+j), Policy: table.Policy{Scale: time.Minute, Limit: 5}, Hits: 1}
		}
		if err := s.CheckEach(context.Background(), reqs, decs); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats().Buckets; got != int64(expired+1) {
		t.Fatalf("buckets before the sweep: %d, want %d", got, expired+1)
	}

	if got := clock.pending(); got != 1 {
		t.Fatalf("%d timers pending, want the tick's", got)
	}
	clock.setStep(step)
	clock.fireNext() // the tick, an hour on: every x- bucket has expired
	// The model: Sweeps of SweepBatch, each in slices of the bound, the
	// last of a Sweep of what is left of it.
	bound := min(sweepSlice, table.SliceCheck*int((sweepSliceTime+step-1)/step))
	var want []int
	for left := expired; left > 0; {
		for inSweep := 0; inSweep < sweeper.DefaultBatch && left > 0; {
			k := min(bound, sweeper.DefaultBatch-inSweep, left)
			want = append(want, k)
			inSweep, left = inSweep+k, left-k
		}
	}
	// The pauses: a slice of k deletions reads the clock at its start, at
	// each of its k/SliceCheck asks of its time bound, when it journals
	// and at its end, so it holds the shard (k/SliceCheck + 2) steps and
	// owes sweepDuty-1 times that; the debt is slept once it reaches
	// sweepPauseMin.
	var pauses []int // slices started at each pause
	var debt time.Duration
	for i, k := range want {
		if debt += (sweepDuty - 1) * time.Duration(k/table.SliceCheck+2) * step; debt >= sweepPauseMin {
			pauses, debt = append(pauses, i+1), 0
		}
	}
	if len(pauses) < 2 {
		t.Fatalf("the model has %d pauses, want several", len(pauses))
	}
	for _, p := range pauses {
		// Wait for the pause: its timer beside the next tick's.
		for deadline := time.Now().Add(30 * time.Second); clock.pending() < 2; runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatalf("no pause after slice %d within 30s (%d slices started)", p, started.Load())
			}
		}
		if got := started.Load(); got != int64(p) {
			t.Fatalf("a pause after %d slices, want after %d (no slice while it lasts)", got, p)
		}
		clock.fireNext() // the pause, the earlier: the next slice may go
	}
	var rep SweepReport
	select {
	case rep = <-reports:
	case <-time.After(30 * time.Second):
		t.Fatalf("no sweep report within 30s (%d slices started)", started.Load())
	}
	lens = append(lens, int(s.Stats().Buckets)) // after the last slice
	if len(lens)-1 != len(want) {
		t.Fatalf("%d slices, want %d (of at most %d deletions each)", len(lens)-1, len(want), bound)
	}
	for i, w := range want {
		if got := lens[i] - lens[i+1]; got != w {
			t.Fatalf("slice %d deleted %d buckets, want %d (bound %d: sweepSliceTime at %v per reading)", i+1, got, w, bound, step)
		}
	}
	if rep.Deleted != expired || !rep.Complete || rep.Batches != (expired+sweeper.DefaultBatch-1)/sweeper.DefaultBatch {
		t.Fatalf("report %+v, want %d deleted in %d batches, complete", rep, expired, (expired+sweeper.DefaultBatch-1)/sweeper.DefaultBatch)
	}
	if err := <-answered; err != nil || decidedAt != 2 {
		t.Fatalf("the check queued in slice 2: err %v, decided after %d slices had started, want 2 (before slice 3)", err, decidedAt)
	}
	peekQueued := queued
	peekQueued.Hits = 0
	if d := mustCheck(t, s, peekQueued); d.Count != 2 || s.Stats().Buckets != 1 {
		t.Fatalf("the live bucket: count %d, %d buckets; want count 2, the one bucket", d.Count, s.Stats().Buckets)
	}
	if st := s.SweepStats(); st != (SweepStats{Slices: int64(len(want))}) || backlog != 1 {
		t.Fatalf("sweep stats %+v (backlog %d during the sweep), want %d slices, backlog 0 (1 during)", st, backlog, len(want))
	}
}
