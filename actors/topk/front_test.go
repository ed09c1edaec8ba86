package topk

import (
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"
)

type counted struct {
	id    string
	count uint64
}

func counts(v *View) []counted {
	var out []counted
	for _, e := range v.Top(-1) {
		out = append(out, counted{e.ID, e.Count})
	}
	return out
}

// TestFront: with a front, every weight reaches the summaries of its
// interval: a key counted in the front leaves it for its set's next new
// key when it is the lightest, and the whole front leaves before the
// interval changes and before a View merges; the counts are then exact
// while the keys fit the summaries.
func TestFront(t *testing.T) {
	t.Parallel()
	s := newFronted(t, 8, 4) // one set of four keys
	if got, want := s.Bytes(), newSketch(t, 8).Bytes()+4*int(unsafe.Sizeof(frontEntry{})); got != want {
		t.Errorf("Bytes %d, want %d (the front's four entries of %d bytes more)", got, want, unsafe.Sizeof(frontEntry{}))
	}
	for i, w := range []int64{10, 20, 30, 40} {
		s.Observe(fmt.Sprint("k", i+1), "r", w, i == 3, t0)
	}
	s.Observe("k5", "r", 1, true, t0) // the front is full: k1 (10) leaves it
	s.Observe("k2", "r", 2, false, t0)
	if got := s.front; got[0].key.n != 2 || string(got[0].key.id[:2]) != "k5" || got[0].hits != 1 {
		t.Errorf("the lightest key's entry: %+v, want k5's", got[0])
	}
	want := []counted{{"k4", 40}, {"k3", 30}, {"k2", 22}, {"k1", 10}, {"k5", 1}}
	if got := counts(top(Hits, Minute, true, t0, s)); !slices.Equal(got, want) {
		t.Errorf("by hits: %+v, want %+v", got, want)
	}
	if got, want := counts(top(Denials, Minute, true, t0, s)), []counted{{"k4", 40}, {"k5", 1}}; !slices.Equal(got, want) {
		t.Errorf("by denials: %+v, want %+v", got, want)
	}
	for _, e := range s.front {
		if e.hits != 0 {
			t.Errorf("after a Merge the front holds %+v", e)
		}
	}

	// A key counted in the front at 30 s is that interval's: the next
	// interval's first Observe moves it there before it moves on.
	s.Observe("late", "r", 7, false, at(30*time.Second))
	s.Observe("later", "r", 1, false, at(45*time.Second))
	if got, want := counts(top(Hits, Minute, true, at(45*time.Second), s)), []counted{{"k4", 40}, {"k3", 30}, {"k2", 22}, {"k1", 10}, {"late", 7}, {"k5", 1}, {"later", 1}}; !slices.Equal(got, want) {
		t.Errorf("45 s in: %+v, want %+v", got, want)
	}
	// 90 s in, the minute covers the intervals from 40 s on: the first
	// interval's keys and late's (20–40 s) are out of it.
	if got, want := counts(top(Hits, Minute, true, at(90*time.Second), s)), []counted{{"later", 1}}; !slices.Equal(got, want) {
		t.Errorf("90 s in: %+v, want %+v", got, want)
	}
}

// TestFrontConfig: Front is rounded up to a power of two of at least one
// set, and out of range is ErrConfig.
func TestFrontConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ front, size int }{{0, 0}, {1, 4}, {4, 4}, {5, 8}, {512, 512}, {MaxFront, MaxFront}} {
		s, err := New(Config{Front: c.front})
		if err != nil || len(s.front) != c.size {
			t.Errorf("Front %d: %d entries, %v; want %d", c.front, len(s.front), err, c.size)
		}
	}
	for _, f := range []int{-1, MaxFront + 1} {
		if _, err := New(Config{Front: f}); err == nil {
			t.Errorf("Front %d: no error", f)
		}
	}
}
