package scaling

import (
	"context"
	"testing"
	"time"
)

func TestSweep(t *testing.T) {
	pts, err := Sweep(context.Background(), [][2]int{{100, 10}, {10, 1000}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Live != 100 || pts[0].Expired != 10 || pts[1].Expired != 1000 || pts[1].Reps != 2 {
		t.Fatalf("points %+v", pts)
	}
	for _, p := range pts {
		if p.Took <= 0 || p.NsPerDeleted() <= 0 {
			t.Errorf("point %+v", p)
		}
	}
}

func TestRatelimitdMemory(t *testing.T) {
	c, err := RatelimitdMemory(context.Background(), []int{1000, 20_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Points) != 2 || c.Stopped != "" {
		t.Fatalf("curve %+v", c)
	}
	// Per bucket it holds at least the id and the key, and falls as the
	// fixed cost spreads.
	if p := c.Points[1]; p.Buckets != 20_000 || p.PerBucket < 30 || p.PerBucket > 2000 || p.PerBucket >= c.Points[0].PerBucket {
		t.Errorf("points %+v", c.Points)
	}
}

func TestFits(t *testing.T) {
	if ok, why := fits(0, 1000, 100, 2); !ok {
		t.Errorf("1000 buckets do not fit: %s", why)
	}
	if ok, why := fits(0, 1<<40, 100, 2); ok || why == "" {
		t.Errorf("2^40 buckets fit (%q)", why)
	}
}

func TestMeasureJournal(t *testing.T) {
	pts, err := MeasureJournal(context.Background(), t.TempDir(), 8, 1, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != len(JournalModes) {
		t.Fatalf("%d points", len(pts))
	}
	for i, p := range pts {
		if p.Mode != JournalModes[i] || p.Checks == 0 || p.P99 < p.P50 {
			t.Errorf("point %+v", p)
		}
	}
}

func TestMeasureSweepLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few seconds")
	}
	sl, err := MeasureSweepLatency(context.Background(), t.TempDir(), 20_000, 8, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if sl.Deleted < 20_000 || sl.During.Checks == 0 || sl.Baseline.Checks == 0 || sl.SweepTook <= 0 {
		t.Errorf("%+v", sl)
	}
}

// TestSweepStartIsNotBeforeTheJump: a round that ran across the clock's
// jump reports a Duration with the jump in it; the sweep starts at the
// jump then, and at the round's start otherwise.
func TestSweepStartIsNotBeforeTheJump(t *testing.T) {
	jump := time.Unix(1_700_000_000, 0)
	at := jump.Add(300 * time.Millisecond)
	if got := sweepStart(at, 2*time.Hour+time.Second, jump); !got.Equal(jump) {
		t.Errorf("a round across the jump: start %v, want the jump %v", got, jump)
	}
	if got, want := sweepStart(at, 100*time.Millisecond, jump), jump.Add(200*time.Millisecond); !got.Equal(want) {
		t.Errorf("a round after the jump: start %v, want %v", got, want)
	}
}

func TestStatsOf(t *testing.T) {
	lat := []time.Duration{5, 1, 4, 2, 3}
	s := statsOf(lat, time.Second)
	if s.Checks != 5 || s.P50 != 3 || s.Max != 5 || s.PerSec() != 5 {
		t.Errorf("%+v", s)
	}
}
