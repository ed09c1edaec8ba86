package dashboard

import (
	"sync"
	"testing"
	"time"
	"unsafe"
)

func lastSecond(r *TrafficRing, now time.Time) Second {
	s := r.AppendSeconds(nil, now)
	return s[len(s)-1]
}

// TestTrafficRing: each result counts in its second; AppendSeconds gives
// the 900 whole seconds before now, oldest first; a second 15 minutes old
// is gone, and its slot starts over when reused.
func TestTrafficRing(t *testing.T) {
	t.Parallel()
	var r TrafficRing
	if got := unsafe.Sizeof(r); got != SeriesSeconds*4*8 {
		t.Errorf("TrafficRing is %d bytes, want 900 × 4 × 8", got)
	}
	base := time.Unix(1_740_000_000, 0)
	for i, res := range []Result{Allowed, Allowed, Allowed, Denied, Denied, ShadowDenied, Error, Result(9)} {
		r.Record(res, base.Add(time.Duration(i)*100*time.Millisecond))
	}
	now := base.Add(time.Second)
	secs := r.AppendSeconds(nil, now)
	if len(secs) != SeriesSeconds || secs[0].Unix != now.Unix()-900 || secs[899].Unix != base.Unix() {
		t.Fatalf("%d seconds from %d to %d, want 900 ending at %d", len(secs), secs[0].Unix, secs[len(secs)-1].Unix, base.Unix())
	}
	if want := (Second{Unix: base.Unix(), Allowed: 3, Denied: 2, ShadowDenied: 1, Errors: 2}); secs[899] != want {
		t.Errorf("got %+v, want %+v", secs[899], want)
	}
	for _, s := range secs[:899] {
		if s != (Second{Unix: s.Unix}) {
			t.Errorf("second %d: %+v, want nothing", s.Unix, s)
		}
	}
	// 900 s later the slot is reused: the old counts are gone, the new ones start at 1.
	later := base.Add(SeriesSeconds * time.Second)
	r.Record(Denied, later)
	if got, want := lastSecond(&r, later.Add(time.Second)), (Second{Unix: later.Unix(), Denied: 1}); got != want {
		t.Errorf("reused slot: %+v, want %+v", got, want)
	}
	if got := r.AppendSeconds(nil, later.Add(time.Second))[0]; got != (Second{Unix: later.Unix() - 899}) {
		t.Errorf("first second after reuse: %+v", got)
	}
	// A clock stepped back 15 minutes does not wipe the newer second.
	r.Record(Denied, base)
	if got := lastSecond(&r, later.Add(time.Second)); got.Denied != 1 {
		t.Errorf("after a step back: %+v, want Denied 1", got)
	}
	// A counter untouched for longer than an hour starts over, whatever it held.
	longAfter := base.Add(100 * 24 * time.Hour)
	r.Record(Allowed, longAfter)
	if got, want := lastSecond(&r, longAfter.Add(time.Second)), (Second{Unix: longAfter.Unix(), Allowed: 1}); got != want {
		t.Errorf("100 days on: %+v, want %+v", got, want)
	}
}

// TestTrafficTotals sums the last n whole seconds, for rates.
func TestTrafficTotals(t *testing.T) {
	t.Parallel()
	var r TrafficRing
	base := time.Unix(1_740_000_000, 0)
	for s := range 120 {
		for range s % 3 {
			r.Record(Allowed, base.Add(time.Duration(s)*time.Second))
		}
		r.Record(Denied, base.Add(time.Duration(s)*time.Second))
	}
	now := base.Add(120 * time.Second)
	// Seconds 60..119: s%3 is 0, 1, 2 twenty times each: 60 allowed, 60 denied.
	if got, want := r.Totals(now, 60), (Second{Unix: now.Unix() - 60, Allowed: 60, Denied: 60}); got != want {
		t.Errorf("Totals(60): %+v, want %+v", got, want)
	}
	if got := r.Totals(now, 0); got != (Second{Unix: now.Unix() - 1, Allowed: 119 % 3, Denied: 1}) {
		t.Errorf("Totals(0), as 1: %+v", got)
	}
	if got := r.Totals(now, 5000); got.Unix != now.Unix()-900 || got.Denied != 120 || got.Allowed != 120 {
		t.Errorf("Totals(5000), as 900: %+v", got)
	}
}

// TestTrafficConcurrent: Records from many goroutines, across a second's
// boundary, are all counted (run with -race).
func TestTrafficConcurrent(t *testing.T) {
	t.Parallel()
	var r TrafficRing
	base := time.Unix(1_740_000_000, 0)
	const goroutines, each = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r.Record(Result(i%4), base.Add(time.Duration((g+i)%2)*time.Second))
			}
		})
	}
	wg.Wait()
	secs := r.AppendSeconds(nil, base.Add(2*time.Second))
	var total uint64
	for _, s := range secs[898:] {
		total += s.Allowed + s.Denied + s.ShadowDenied + s.Errors
	}
	if total != goroutines*each {
		t.Errorf("counted %d, want %d", total, goroutines*each)
	}
	if s := secs[898]; s.Allowed != s.Denied || s.Denied != s.ShadowDenied || s.ShadowDenied != s.Errors || s.Allowed != goroutines*each/8 {
		t.Errorf("first second %+v, want %d of each", s, goroutines*each/8)
	}
}
