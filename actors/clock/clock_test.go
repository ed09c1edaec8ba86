package clock

import (
	"testing"
	"time"
)

// TestSystemClockFollowsTheWallClock: System's readings stay between two
// time.Now readings taken around them (within a millisecond of drift), and
// never go back, across re-anchoring.
func TestSystemClockFollowsTheWallClock(t *testing.T) {
	t.Parallel()
	c := System()
	last := c.Now()
	for i := range 200_000 {
		if i%50_000 == 0 {
			// An anchor past its age, as a second later: re-anchored.
			sc := c.(*systemClock)
			sc.anchor.Store(&anchor{at: time.Now().Add(-2 * anchorAge).Round(0), mono: sc.monotonic() - 2*anchorAge})
		}
		before := time.Now()
		got := c.Now()
		after := time.Now()
		// Round(0) strips the monotonic readings: compare wall times.
		if w := got.Round(0); w.Before(before.Round(0).Add(-time.Millisecond)) || w.After(after.Round(0).Add(time.Millisecond)) {
			t.Fatalf("reading %d: got %v, want between %v and %v", i, w, before.Round(0), after.Round(0))
		}
		if got.Before(last) {
			t.Fatalf("reading %d: got %v, before the previous %v", i, got, last)
		}
		last = got
	}
}

func BenchmarkSystemClock(b *testing.B) {
	c := System()
	b.Run("baseline=time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	b.Run("SystemClock", func(b *testing.B) {
		for b.Loop() {
			_ = c.Now()
		}
	})
	b.Run("SystemClock.Now.UnixNano", func(b *testing.B) {
		for b.Loop() {
			_ = c.Now().UnixNano()
		}
	})
	b.Run("SystemClock.UnixNano", func(b *testing.B) {
		n := c.(UnixNanoer)
		for b.Loop() {
			_ = n.UnixNano()
		}
	})
}
