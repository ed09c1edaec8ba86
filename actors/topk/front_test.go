package topk

import (
	"fmt"
	"slices"
	"strings"
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
	if got, want := s.Bytes(), newSketch(t, 8).Bytes()+int(unsafe.Sizeof(frontSet{}))+4*int(unsafe.Sizeof(frontKey{})); got != want {
		t.Errorf("Bytes %d, want %d (the front's set and its four keys more)", got, want)
	}
	if got := unsafe.Sizeof(frontSet{}); got != 64 {
		t.Errorf("a set of the front takes %d bytes, want one 64-byte line", got)
	}
	for i, w := range []int64{10, 20, 30, 40} {
		s.Observe(fmt.Sprint("k", i+1), "r", w, i == 3, t0)
	}
	s.Observe("k5", "r", 1, true, t0) // the front is full: k1 (10) leaves it
	s.Observe("k2", "r", 2, false, t0)
	if k := s.frontKeys[0]; k.key.n != 2 || string(k.key.id[:2]) != "k5" || s.front[0].hits[0] != 1 {
		t.Errorf("the lightest key's way: %+v with %d hits, want k5's with 1", k, s.front[0].hits[0])
	}
	want := []counted{{"k4", 40}, {"k3", 30}, {"k2", 22}, {"k1", 10}, {"k5", 1}}
	if got := counts(top(Hits, Minute, true, t0, s)); !slices.Equal(got, want) {
		t.Errorf("by hits: %+v, want %+v", got, want)
	}
	if got, want := counts(top(Denials, Minute, true, t0, s)), []counted{{"k4", 40}, {"k5", 1}}; !slices.Equal(got, want) {
		t.Errorf("by denials: %+v, want %+v", got, want)
	}
	for _, set := range s.front {
		if set.hits != [frontWays]uint32{} || set.denials != [frontWays]uint32{} {
			t.Errorf("after a Merge the front holds %+v", set)
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
		if err != nil || len(s.frontKeys) != c.size || len(s.front)*frontWays != c.size {
			t.Errorf("Front %d: %d keys in %d sets, %v; want %d keys", c.front, len(s.frontKeys), len(s.front), err, c.size)
		}
	}
	for _, f := range []int{-1, MaxFront + 1} {
		if _, err := New(Config{Front: f}); err == nil {
			t.Errorf("Front %d: no error", f)
		}
	}
}

// TestFrontLargeWeights: the front's 32-bit weights never wrap: a key
// about to pass 2^32-1 goes to the summaries first, and a weight above it
// goes there directly, so the counts stay exact.
func TestFrontLargeWeights(t *testing.T) {
	t.Parallel()
	s := newFronted(t, 8, 4)
	const big = 3_000_000_000 // below 2^32, twice above it
	s.Observe("a", "r", big, false, t0)
	s.Observe("a", "r", big, true, t0)
	s.Observe("b", "r", 1<<33, true, t0)
	s.Observe("b", "r", 5, false, t0)
	if got, want := counts(top(Hits, Minute, true, t0, s)), []counted{{"b", 1<<33 + 5}, {"a", 2 * big}}; !slices.Equal(got, want) {
		t.Errorf("by hits: %+v, want %+v", got, want)
	}
	if got, want := counts(top(Denials, Minute, true, t0, s)), []counted{{"b", 1 << 33}, {"a", big}}; !slices.Equal(got, want) {
		t.Errorf("by denials: %+v, want %+v", got, want)
	}
}

// TestFrontLabels: one id under two labels is two keys in the front, and
// one label's text at two addresses (a label decoded afresh for each
// check) is one key there.
func TestFrontLabels(t *testing.T) {
	t.Parallel()
	s := newFronted(t, 8, 8)
	r1, r2 := strings.Clone("rule"), strings.Clone("rule")
	s.Observe("id", r1, 3, false, t0)
	s.Observe("id", r2, 4, false, t0)
	s.Observe("id", "other", 5, false, t0)
	s.Observe("id", r2, 1, false, t0)
	used := 0
	for _, set := range s.front {
		for _, h := range set.hits {
			if h != 0 {
				used++
			}
		}
	}
	if used != 2 {
		t.Errorf("the front holds %d keys, want 2: id under rule, under other", used)
	}
	got := top(Hits, Minute, true, t0, s).Top(-1)
	if len(got) != 2 || got[0].Label != "rule" || got[0].Count != 8 || got[1].Label != "other" || got[1].Count != 5 {
		t.Errorf("got %+v, want id under rule with 8 hits, then under other with 5", got)
	}
}

// TestPrefetch: a Prefetch before each Observe leaves every count as it is
// without one, on a Sketch with a front and on one without; and one id's
// keys under several labels share its set, the set Prefetch asks for.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	for _, front := range []int{0, 64} {
		plain, hinted := newFronted(t, 8, front), newFronted(t, 8, front)
		hinted.Prefetch(0) // any tag: the extremes of a set's index too
		hinted.Prefetch(^uint64(0))
		for i := range 1000 {
			id, label := fmt.Sprint("id-", i%37), fmt.Sprint("rule-", i%3)
			tag := Hash(id) * 0x9e3779b97f4a7c15 // any 64-bit hash of id
			hinted.Prefetch(tag)
			plain.ObserveHashed(Hash(id), tag, id, label, int64(1+i%5), i%4 == 0, t0)
			hinted.ObserveHashed(Hash(id), tag, id, label, int64(1+i%5), i%4 == 0, t0)
		}
		for _, m := range []Metric{Hits, Denials} {
			want := top(m, Minute, true, t0, plain).Top(-1)
			if got := top(m, Minute, true, t0, hinted).Top(-1); !slices.Equal(got, want) || len(want) == 0 {
				t.Errorf("front %d, %v: with Prefetch %+v, without %+v", front, m, got, want)
			}
		}
	}

	s := newFronted(t, 8, 64) // 16 sets
	const tag = 0xabcd_0000_0000_0001
	for _, label := range []string{"a", "b", "c"} {
		s.ObserveHashed(Hash("id"), tag, "id", label, 1, false, t0)
	}
	for si, set := range s.front {
		used := 0
		for _, h := range set.hits {
			if h != 0 {
				used++
			}
		}
		if want := map[bool]int{true: 3, false: 0}[si == s.frontSetOf(tag)]; used != want {
			t.Errorf("set %d holds %d keys, want %d (the tag's set is %d)", si, used, want, s.frontSetOf(tag))
		}
	}
}

// TestObserveFront: ObserveFront, then ObserveHashed when it declines,
// leaves the same views as ObserveHashed alone, with a front and without,
// through labels that change, peeks, weights past a front's 32 bits, and
// intervals that turn over; and it takes a repeat of a key the front holds
// under the label observed last.
func TestObserveFront(t *testing.T) {
	t.Parallel()
	for _, front := range []int{0, 64} {
		plain, fast := newFronted(t, 8, front), newFronted(t, 8, front)
		now, took := t0, 0
		for i := range 3000 {
			if i%500 == 0 {
				now = now.Add(20 * time.Second) // a new interval, now and then
			}
			id, label := fmt.Sprint("id-", i%37), fmt.Sprint("rule-", (i/1000)%3)
			tag := splitmix(uint64(i % 37)) // well mixed, as package actors' seeded hash
			hits := int64(1 + i%5)
			switch i % 97 {
			case 0:
				hits = 0 // a peek
			case 1:
				hits = 1 << 33 // past a front way's weight
			}
			denied := i%4 == 0
			plain.ObserveHashed(Hash(id), tag, id, label, hits, denied, now)
			if fast.ObserveFront(tag, label, hits, denied, now) {
				took++
			} else {
				fast.ObserveHashed(Hash(id), tag, id, label, hits, denied, now)
			}
		}
		for _, m := range []Metric{Hits, Denials} {
			for _, w := range []Window{Minute, FifteenMinutes} {
				want := top(m, w, true, now, plain).Top(-1)
				if got := top(m, w, true, now, fast).Top(-1); !slices.Equal(got, want) || len(want) == 0 {
					t.Errorf("front %d, %v, %v: ObserveFront first %+v, ObserveHashed alone %+v", front, m, w, got, want)
				}
			}
		}
		switch {
		case front == 0 && took != 0:
			t.Errorf("without a front, ObserveFront took %d observations", took)
		case front > 0 && took < 2500:
			t.Errorf("with a front of 64 keys holding the 37 ids, ObserveFront took %d of 3000 observations, want all but the first of each key in an interval, the peeks and the heavy weights", took)
		}
	}
}

// splitmix is SplitMix64's finalizer: a fixed, well-mixed 64-bit hash.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
