package sweeper_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/sweeper"
)

// fakeOwner answers Sweeps from a fixed stock of expired buckets, recording
// the times it was asked to sweep at.
type fakeOwner struct {
	mu     sync.Mutex
	stock  int
	asked  []time.Time
	asks   chan struct{} // one value per Sweep received
	silent bool          // never answer, like an owner that crashed mid-round
	gate   chan struct{} // if set, each answer waits for a value: a slow owner
}

func newOwner(stock int, silent bool) *fakeOwner {
	return &fakeOwner{stock: stock, silent: silent, asks: make(chan struct{}, 100)}
}

func (o *fakeOwner) Receive(c actor.Context) {
	m, ok := c.Message().(*sweeper.Sweep)
	if !ok {
		return
	}
	o.mu.Lock()
	o.asked = append(o.asked, m.Now)
	n := min(o.stock, m.Max)
	o.stock -= n
	silent := o.silent
	o.mu.Unlock()
	o.asks <- struct{}{}
	if o.gate != nil {
		<-o.gate
	}
	if !silent {
		c.Respond(&sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max})
	}
}

type reports chan sweeper.Report

func (r reports) SweepDone(rep sweeper.Report) { r <- rep }

func (r reports) next(t *testing.T) sweeper.Report {
	t.Helper()
	select {
	case rep := <-r:
		return rep
	case <-time.After(10 * time.Second):
		t.Fatal("no sweep report within 10s")
		return sweeper.Report{}
	}
}

func start(t *testing.T, clock *clocktest.Manual, batch int, owners ...*fakeOwner) reports {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	var pids []*actor.PID
	for _, o := range owners {
		pids = append(pids, sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return o })))
	}
	rep := make(reports, 16)
	pid := sys.Root.Spawn(sweeper.Props(sweeper.Config{Targets: pids, Interval: 10 * time.Second, Batch: batch, Clock: clock, Observer: rep}))
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
	clock.BlockUntil(1) // the sweeper has started and armed its first tick
	return rep
}

func TestSweepsEveryIntervalInBoundedBatches(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	clock := clocktest.New(t0)
	a, b := newOwner(250, false), newOwner(40, false)
	rep := start(t, clock, 100, a, b)

	clock.Advance(9 * time.Second)
	select {
	case r := <-rep:
		t.Fatalf("got a sweep report %+v before the interval elapsed", r)
	default:
	}
	clock.Advance(time.Second)
	got := rep.next(t)
	// a answers 100 (More), 100 (More), 50: three asks; b answers 40: one ask.
	want := sweeper.Report{Deleted: 290, Batches: 4, Complete: true}
	if got != want {
		t.Fatalf("first round: got %+v, want %+v", got, want)
	}
	a.mu.Lock()
	for i, at := range a.asked {
		if !at.Equal(t0.Add(10 * time.Second)) {
			t.Errorf("ask %d of owner a at %v, want the tick's time %v", i, at, t0.Add(10*time.Second))
		}
	}
	a.mu.Unlock()

	clock.Advance(10 * time.Second)
	if got := rep.next(t); got != (sweeper.Report{Deleted: 0, Batches: 2, Complete: true}) {
		t.Fatalf("second round: got %+v, want an empty complete round of 2 batches", got)
	}
}

func TestASilentOwnerCannotStopTheSweeping(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Unix(1_700_000_000, 0))
	silent, ok := newOwner(0, true), newOwner(5, false)
	rep := start(t, clock, 100, silent, ok)
	clock.Advance(10 * time.Second)
	// Both owners see the first round before the next tick.
	waitAsked(t, silent)
	waitAsked(t, ok)
	clock.BlockUntil(1)
	clock.Advance(10 * time.Second)
	if got := rep.next(t); got.Complete || got.Deleted != 5 {
		t.Fatalf("round with a silent owner: got %+v, want incomplete with 5 deleted", got)
	}
	waitAsked(t, silent) // and it is asked again in the next round
}

func waitAsked(t *testing.T, o *fakeOwner) {
	t.Helper()
	select {
	case <-o.asks:
	case <-time.After(10 * time.Second):
		t.Fatal("owner not asked to sweep within 10s")
	}
}

// TestLateAnswersAreReported: an owner too slow to answer before the next
// tick still deleted what it says; the round is reported cut short, and the
// late deletions go in the next Report, so the Reports add up to every
// bucket swept.
func TestLateAnswersAreReported(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Unix(1_700_000_000, 0))
	slow, fast := newOwner(7, false), newOwner(5, false)
	slow.gate = make(chan struct{}, 2)
	rep := start(t, clock, 100, slow, fast)

	clock.Advance(10 * time.Second)
	waitAsked(t, slow)
	waitAsked(t, fast)
	clock.BlockUntil(1)
	clock.Advance(10 * time.Second) // slow has not answered round 1
	r1 := rep.next(t)
	if r1.Complete || r1.Batches != 2 {
		t.Fatalf("round 1: got %+v, want incomplete with 2 batches", r1)
	}
	slow.gate <- struct{}{} // the late answer to round 1: 7 deleted
	slow.gate <- struct{}{} // its answer to round 2: nothing left
	r2 := rep.next(t)
	// fast's 5 are in round 1, or, if its answer too came after the tick,
	// in round 2; slow's 7 are always in round 2. Nothing is lost.
	if !r2.Complete || r2.Batches != 2 || r2.Deleted < 7 || r1.Deleted+r2.Deleted != 12 {
		t.Fatalf("rounds: got %+v then %+v, want 12 deleted in all, the late 7 in round 2", r1, r2)
	}
}
