package sweeper_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/sweeper"
)

// fakeTarget answers Sweeps from a fixed stock of expired buckets,
// recording the times it was asked to sweep at.
type fakeTarget struct {
	stock  int
	asked  []time.Time
	silent bool // never answers, like a target that crashed mid-round
}

// answer deletes what m asks of the target's stock.
func (o *fakeTarget) answer(m sweeper.Sweep) sweeper.Swept {
	o.asked = append(o.asked, m.Now)
	n := min(o.stock, m.Max)
	o.stock -= n
	return sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max}
}

// drive carries out every pending Sweep of p on targets, at now, answering
// those of the targets that answer, and returns the Report of the round if
// it ended.
func drive(p *sweeper.Policy, now time.Time, targets ...*fakeTarget) (sweeper.Report, bool) {
	for {
		m, ok := p.Next()
		if !ok {
			return sweeper.Report{}, false
		}
		o := targets[m.Target]
		a := o.answer(m)
		if o.silent {
			continue
		}
		if r, done := p.Swept(a, now); done {
			return r, true
		}
	}
}

func TestSweepsInBoundedBatches(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	a, b := &fakeTarget{stock: 250}, &fakeTarget{stock: 40}
	p := sweeper.New(2, 100)
	tick := t0.Add(10 * time.Second)
	if r, ok := p.Tick(tick); ok {
		t.Fatalf("first tick: got a report %+v, want none (no round was running)", r)
	}
	got, ok := drive(p, tick, a, b)
	// a answers 100 (More), 100 (More), 50: three asks; b answers 40: one ask.
	want := sweeper.Report{Deleted: 290, Batches: 4, Complete: true}
	if !ok || got != want {
		t.Fatalf("first round: got %+v (reported %v), want %+v", got, ok, want)
	}
	for i, at := range a.asked {
		if !at.Equal(tick) {
			t.Errorf("ask %d of target a at %v, want the tick's time %v", i, at, tick)
		}
	}

	tick = tick.Add(10 * time.Second)
	p.Tick(tick)
	if got, ok := drive(p, tick, a, b); !ok || got != (sweeper.Report{Deleted: 0, Batches: 2, Complete: true}) {
		t.Fatalf("second round: got %+v (reported %v), want an empty complete round of 2 batches", got, ok)
	}
}

func TestASilentTargetCannotStopTheSweeping(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	silent, ok := &fakeTarget{silent: true}, &fakeTarget{stock: 5}
	p := sweeper.New(2, 100)
	p.Tick(t0.Add(10 * time.Second))
	if r, done := drive(p, t0.Add(10*time.Second), silent, ok); done {
		t.Fatalf("round with a silent target: reported %+v before the next tick", r)
	}
	// Both targets saw the first round before the next tick.
	if len(silent.asked) != 1 || len(ok.asked) != 1 {
		t.Fatalf("asks in the first round: silent %d, ok %d; want 1 and 1", len(silent.asked), len(ok.asked))
	}
	got, cut := p.Tick(t0.Add(20 * time.Second))
	if !cut || got.Complete || got.Deleted != 5 {
		t.Fatalf("round with a silent target: got %+v (reported %v), want incomplete with 5 deleted", got, cut)
	}
	drive(p, t0.Add(20*time.Second), silent, ok)
	if len(silent.asked) != 2 {
		t.Fatalf("the silent target was asked %d times, want 2 (again in the next round)", len(silent.asked))
	}
}

// TestLateAnswersAreReported: a target too slow to answer before the next
// tick still deleted what it says; the round is reported cut short, and the
// late deletions go in the next Report, so the Reports add up to every
// bucket swept.
func TestLateAnswersAreReported(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	slow, fast := &fakeTarget{stock: 7}, &fakeTarget{stock: 5}
	p := sweeper.New(2, 100)
	p.Tick(t0.Add(10 * time.Second))
	first, _ := p.Next() // slow's: answered only after the next tick
	m, _ := p.Next()
	if _, done := p.Swept(fast.answer(m), t0.Add(10*time.Second)); done {
		t.Fatal("the round ended before the slow target answered")
	}
	r1, cut := p.Tick(t0.Add(20 * time.Second)) // slow has not answered round 1
	if !cut || r1.Complete || r1.Batches != 2 {
		t.Fatalf("round 1: got %+v (reported %v), want incomplete with 2 batches", r1, cut)
	}
	if _, done := p.Swept(slow.answer(first), t0.Add(20*time.Second)); done { // the late answer to round 1: 7 deleted
		t.Fatal("a late answer ended round 2")
	}
	r2, done := drive(p, t0.Add(20*time.Second), slow, fast) // round 2: nothing left
	if !done || !r2.Complete || r2.Batches != 2 || r2.Deleted < 7 || r1.Deleted+r2.Deleted != 12 {
		t.Fatalf("rounds: got %+v then %+v, want 12 deleted in all, the late 7 in round 2", r1, r2)
	}
}

// TestStopReportsWhatWasNotReported: Stop reports a round still running,
// with what it deleted, and nothing once everything was reported.
func TestStopReportsWhatWasNotReported(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	a := &fakeTarget{stock: 3}
	p := sweeper.New(2, 100)
	p.Tick(t0)
	m, _ := p.Next()
	p.Swept(a.answer(m), t0)
	got, ok := p.Stop(t0.Add(time.Second))
	want := sweeper.Report{Deleted: 3, Batches: 2, Duration: time.Second}
	if !ok || got != want {
		t.Fatalf("Stop during a round: got %+v (reported %v), want %+v", got, ok, want)
	}
	if got, ok := p.Stop(t0.Add(2 * time.Second)); ok {
		t.Fatalf("a second Stop: got %+v, want no report", got)
	}
	if _, ok := p.Next(); ok {
		t.Fatal("a Sweep still pending after Stop")
	}
}
