package topk

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// t0 is a time on a 15-minute boundary, so that both rings' intervals start there.
var t0 = time.Unix(1_700_000_100, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newSketch(t testing.TB, capacity int) *Sketch {
	t.Helper()
	return newFronted(t, capacity, 0)
}

// newFronted returns a Sketch of capacity counters with a front of front keys.
func newFronted(t testing.TB, capacity, front int) *Sketch {
	t.Helper()
	s, err := New(Config{Capacity: capacity, Front: front})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// top merges sketches for m over w at now.
func top(m Metric, w Window, partitioned bool, now time.Time, sketches ...*Sketch) *View {
	v := &View{Metric: m, Window: w, Partitioned: partitioned}
	for _, s := range sketches {
		v.Merge(s, now)
	}
	return v
}

// TestZipfAccuracy: 1M hits over 1M ids, Zipf-skewed (s = 1.1), over 14
// minutes, through 8 sketches of the default capacity with ids hashed to
// them as shards do. The true top 10 by hits and by denials are all among
// the 20 reported, each Count within Bound of the truth, and Bound is at
// most Total/Capacity.
func TestZipfAccuracy(t *testing.T) {
	t.Parallel()
	for _, front := range []int{0, 512} {
		t.Run(fmt.Sprint("front=", front), func(t *testing.T) {
			t.Parallel()
			zipfAccuracy(t, front)
		})
	}
}

// zipfTraffic is the traffic of the Zipf tests: samples draws (fewer
// with -short) of zipfIDs ids, Zipf-skewed (s = 1.1), from a random seed
// it logs, over the span of 14 minutes; names are the ids' strings.
type zipfTraffic struct {
	seed    uint64
	samples int
	span    time.Duration
	zipf    *rand.Zipf
	names   []string
}

const zipfIDs = 1_000_000

func newZipfTraffic(t *testing.T) *zipfTraffic {
	z := &zipfTraffic{seed: rand.Uint64(), samples: 1_000_000, span: 14 * time.Minute, names: make([]string, zipfIDs)}
	if testing.Short() {
		z.samples = 300_000
	}
	t.Logf("seed %d", z.seed)
	z.zipf = rand.NewZipf(rand.New(rand.NewPCG(z.seed, 1)), 1.1, 1, zipfIDs-1)
	return z
}

// next draws the i-th id: its rank, its name and its time.
func (z *zipfTraffic) next(i int) (r uint64, name string, at time.Time) {
	r = z.zipf.Uint64()
	if z.names[r] == "" {
		z.names[r] = "user-" + strconv.FormatUint(r*2654435761%zipfIDs, 10)
	}
	return r, z.names[r], t0.Add(z.span * time.Duration(i) / time.Duration(z.samples))
}

func zipfAccuracy(t *testing.T, front int) {
	const ids, shards = zipfIDs, 8
	z := newZipfTraffic(t)
	sketches := make([]*Sketch, shards)
	for i := range sketches {
		sketches[i] = newFronted(t, 0, front)
	}
	hits, denials := make([]uint64, ids), make([]uint64, ids)
	names := z.names
	for i := range z.samples {
		r, name, when := z.next(i)
		// A per-id limit, so that the ranking by denials is not the one by hits.
		limit := 5 * (1 + (r*7)%13)
		hits[r]++
		denied := hits[r] > limit
		if denied {
			denials[r]++
		}
		sketches[Hash(name)%shards].Observe(name, "r", 1, denied, when)
	}
	now := at(z.span)
	for _, c := range []struct {
		m     Metric
		exact []uint64
	}{{Hits, hits}, {Denials, denials}} {
		v := top(c.m, FifteenMinutes, true, now, sketches...)
		exact := map[string]uint64{}
		for r, f := range c.exact {
			if f > 0 {
				exact[names[r]] = f
			}
		}
		keyed := make(map[string]uint64, len(exact))
		for id, f := range exact {
			keyed[id+"\x00r"] = f
		}
		checkExact(t, v, keyed, DefaultCapacity)
		want := make([]string, 0, len(exact))
		for id := range exact {
			want = append(want, id)
		}
		slices.SortFunc(want, func(a, b string) int { return cmp.Or(cmp.Compare(exact[b], exact[a]), cmp.Compare(a, b)) })
		got := map[string]Entry{}
		for _, e := range v.Top(20) {
			got[e.ID] = e
		}
		for rank, id := range want[:10] {
			e, ok := got[id]
			if !ok {
				t.Errorf("%v: true #%d %q (%d) is not in the top 20: %+v", c.m, rank+1, id, exact[id], v.Top(20))
				continue
			}
			if e.Count < exact[id] || e.Count > exact[id]+v.Bound() {
				t.Errorf("%v: #%d %q: Count %d, want %d..%d", c.m, rank+1, id, e.Count, exact[id], exact[id]+v.Bound())
			}
		}
		t.Logf("%v: total %d, bound %d (%.3f%% of total), #1 %q %d, #10 %q %d", c.m, v.Total(), v.Bound(),
			100*float64(v.Bound())/float64(v.Total()), want[0], exact[want[0]], want[9], exact[want[9]])
	}
}

// TestWindowExpiry: a burst at 5 s is in both windows until 60 s, gone from
// the minute's at 60 s (three 20-second intervals later) but still in the
// 15 minutes', which drop it at 15 min.
func TestWindowExpiry(t *testing.T) {
	t.Parallel()
	s := newSketch(t, 4)
	s.Observe("burst", "r", 500, true, at(5*time.Second))
	for _, c := range []struct {
		at          time.Duration
		minute, qtr uint64 // want the burst's count in each window (0: gone)
	}{
		{5 * time.Second, 500, 500},
		{59*time.Second + 999*time.Millisecond, 500, 500},
		{60 * time.Second, 0, 500},
		{14*time.Minute + 59*time.Second, 0, 500},
		{15 * time.Minute, 0, 0},
	} {
		// Other traffic moves the rings on; it must not disturb the burst's count.
		s.Observe("steady", "r", 1, false, at(c.at))
		for _, w := range []struct {
			w    Window
			want uint64
		}{{Minute, c.minute}, {FifteenMinutes, c.qtr}} {
			for _, m := range []Metric{Hits, Denials} {
				var got uint64
				for _, e := range top(m, w.w, false, at(c.at), s).Top(-1) {
					if e.ID == "burst" {
						got = e.Count
					}
				}
				if got != w.want {
					t.Errorf("at %v, %v %v: burst counts %d, want %d", c.at, w.w, m, got, w.want)
				}
			}
		}
	}
}

// TestClockStepsBack: a now earlier than one seen counts in the latest
// interval, so it never lands in (and empties) a slot of the past.
func TestClockStepsBack(t *testing.T) {
	t.Parallel()
	s := newSketch(t, 4)
	s.Observe("a", "r", 3, false, at(95*time.Second))
	s.Observe("a", "r", 2, false, at(5*time.Second)) // far behind: counted at 95 s
	for _, w := range []Window{Minute, FifteenMinutes} {
		got := top(Hits, w, false, at(95*time.Second), s).Top(-1)
		if want := []Entry{{ID: "a", Label: "r", Count: 5, Min: 5}}; !slices.Equal(got, want) {
			t.Errorf("%v: got %+v, want %+v", w, got, want)
		}
	}
}

// TestSpaceSaving pins the algorithm on a small stream: with two
// counters, c takes over b's (count 5+1, error 5); Bound is the smallest
// count; b, left out, weighs no more than it.
func TestSpaceSaving(t *testing.T) {
	t.Parallel()
	s := newSketch(t, 2)
	for _, o := range []struct {
		id   string
		hits int64
	}{{"a", 10}, {"b", 5}, {"c", 1}, {"a", 0}, {"b", -3}} {
		s.Observe(o.id, "r", o.hits, false, t0)
	}
	v := top(Hits, Minute, false, t0, s)
	want := []Entry{{ID: "a", Label: "r", Count: 10, Min: 10}, {ID: "c", Label: "r", Count: 6, Min: 1}}
	if got := v.Top(-1); !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if v.Total() != 16 || v.Bound() != 6 {
		t.Errorf("Total %d Bound %d, want 16 and 6", v.Total(), v.Bound())
	}
	if got := v.Top(1); !slices.Equal(got, want[:1]) {
		t.Errorf("Top(1): got %+v, want %+v", got, want[:1])
	}
}

// TestMerge merges two shards' sketches: without Partitioned a key's Count
// takes every shard's smallest count where it has no counter; with it, only
// its own shard's; a key in both shards adds up.
func TestMerge(t *testing.T) {
	t.Parallel()
	a, b := newSketch(t, 2), newSketch(t, 2)
	for _, o := range []struct {
		s    *Sketch
		id   string
		hits int64
	}{{a, "a", 10}, {a, "b", 5}, {a, "c", 1}, {b, "x", 7}, {b, "y", 3}} {
		o.s.Observe(o.id, "r", o.hits, false, t0)
	}
	// a: {a 10, c 6 err 5}, smallest 6; b: {x 7, y 3}, smallest 3.
	for _, c := range []struct {
		partitioned bool
		bound       uint64
		want        []Entry
	}{
		{false, 9, []Entry{{ID: "a", Label: "r", Count: 13, Min: 10}, {ID: "x", Label: "r", Count: 13, Min: 7}, {ID: "y", Label: "r", Count: 9, Min: 3}, {ID: "c", Label: "r", Count: 9, Min: 1}}},
		{true, 6, []Entry{{ID: "a", Label: "r", Count: 10, Min: 10}, {ID: "x", Label: "r", Count: 7, Min: 7}, {ID: "c", Label: "r", Count: 6, Min: 1}, {ID: "y", Label: "r", Count: 3, Min: 3}}},
	} {
		v := top(Hits, Minute, c.partitioned, t0, a, b)
		if got := v.Top(-1); !slices.Equal(got, c.want) {
			t.Errorf("partitioned=%v: got %+v, want %+v", c.partitioned, got, c.want)
		}
		if v.Total() != 26 || v.Bound() != c.bound {
			t.Errorf("partitioned=%v: Total %d Bound %d, want 26 and %d", c.partitioned, v.Total(), v.Bound(), c.bound)
		}
	}
	// One key in both shards (not partitioned): its counters add up.
	b.Observe("a", "r", 4, false, t0) // b: {x 7, a 3+4 err 3}, smallest 7
	v := top(Hits, Minute, false, t0, a, b)
	if got, want := v.Top(1), []Entry{{ID: "a", Label: "r", Count: 10 + 7, Min: 10 + 4}}; !slices.Equal(got, want) {
		t.Errorf("a in both: got %+v, want %+v (bound %d)", got, want, v.Bound())
	}
	// Reset keeps the settings and forgets what was merged.
	v.Reset()
	if v.Total() != 0 || v.Bound() != 0 || len(v.Top(-1)) != 0 || v.Metric != Hits {
		t.Errorf("after Reset: Total %d Bound %d Top %+v", v.Total(), v.Bound(), v.Top(-1))
	}
}

// TestLabels: the same id under two labels is two keys; each entry reports
// its label.
func TestLabels(t *testing.T) {
	t.Parallel()
	s := newSketch(t, 4)
	s.Observe("alice", "login", 3, true, t0)
	s.Observe("alice", "api", 5, false, t0)
	s.Observe("alice", "login", 1, true, t0)
	want := []Entry{{ID: "alice", Label: "api", Count: 5, Min: 5}, {ID: "alice", Label: "login", Count: 4, Min: 4}}
	if got := top(Hits, Minute, false, t0, s).Top(-1); !slices.Equal(got, want) {
		t.Errorf("hits: got %+v, want %+v", got, want)
	}
	if got := top(Denials, FifteenMinutes, false, t0, s).Top(-1); !slices.Equal(got, want[1:]) {
		t.Errorf("denials: got %+v, want %+v", got, want[1:])
	}
}

// TestLongIDs: an id longer than IDBytes is counted whole (two that share
// their first bytes stay apart) and reported cut on a UTF-8 boundary,
// Truncated; an id of exactly IDBytes is whole.
func TestLongIDs(t *testing.T) {
	t.Parallel()
	s := newSketch(t, 8)
	// 55 ASCII bytes then "é" (2 bytes) straddles the 56-byte prefix.
	prefix := strings.Repeat("x", 55) + "é"
	long1, long2 := prefix+strings.Repeat("1", 40), prefix+strings.Repeat("2", 40)
	exact := strings.Repeat("e", IDBytes)
	s.Observe(long1, "r", 3, false, t0)
	s.Observe(long2, "r", 2, false, t0)
	s.Observe(long1, "r", 1, false, t0)
	s.Observe(exact, "r", 1, false, t0)
	s.Observe(exact[:IDBytes-1], "r", 1, false, t0)
	got := top(Hits, Minute, false, t0, s).Top(-1)
	cut := strings.Repeat("x", 55)
	want := []Entry{
		{ID: cut, Truncated: true, Label: "r", Count: 4, Min: 4},
		{ID: cut, Truncated: true, Label: "r", Count: 2, Min: 2},
		{ID: exact[:IDBytes-1], Label: "r", Count: 1, Min: 1},
		{ID: exact, Label: "r", Count: 1, Min: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v,\nwant %+v", got, want)
	}
}

// TestSaturates: counts and totals stop at 2^64−1 rather than wrap.
func TestSaturates(t *testing.T) {
	t.Parallel()
	s := newSketch(t, 1)
	const big = 1<<63 - 1
	for range 3 {
		s.Observe("a", "r", big, false, t0)
	}
	v := top(Hits, Minute, false, t0, s)
	if got := v.Top(-1); len(got) != 1 || got[0].Count != 1<<64-1 || v.Total() != 1<<64-1 {
		t.Errorf("got %+v, Total %d; want 2^64−1", got, v.Total())
	}
}

func TestNewConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		capacity, want int
		ok             bool
	}{{0, DefaultCapacity, true}, {1, 1, true}, {MaxCapacity, MaxCapacity, true}, {-1, 0, false}, {MaxCapacity + 1, 0, false}} {
		s, err := New(Config{Capacity: c.capacity})
		switch {
		case c.ok && (err != nil || s.Capacity() != c.want):
			t.Errorf("Capacity %d: got %v, %v; want capacity %d", c.capacity, s, err, c.want)
		case !c.ok && !errors.Is(err, ErrConfig):
			t.Errorf("Capacity %d: got %v, want ErrConfig", c.capacity, err)
		}
	}
}

// TestMemoryFixed: Bytes is what the package documents, and observing a
// million distinct ids allocates nothing, so the memory cannot grow.
// (AllocsPerRun refuses to run in parallel.)
func TestMemoryFixed(t *testing.T) {
	for _, c := range []struct{ capacity, bytes int }{
		{0, 356_984}, {1, 10_664 + 90*(104+8*2+8)}, {64, 10_664 + 90*(104*64+8*128+8)}, {100, 10_664 + 90*(104*100+8*256+8*2)},
	} {
		if got := newSketch(t, c.capacity).Bytes(); got != c.bytes {
			t.Errorf("Capacity %d: Bytes %d, want %d", c.capacity, got, c.bytes)
		}
	}
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "id-" + strconv.Itoa(i)
	}
	s := newSketch(t, 0)
	i := 0
	allocs := testing.AllocsPerRun(n-1, func() {
		s.Observe(ids[i], "r", 1, i%2 == 0, at(time.Duration(i)*time.Millisecond))
		i++
	})
	if allocs != 0 {
		t.Errorf("Observe of new ids: %v allocations each, want 0", allocs)
	}
	if got := len(top(Hits, FifteenMinutes, false, at(time.Duration(n)*time.Millisecond), s).Top(-1)); got > 45*DefaultCapacity {
		t.Errorf("%d candidates, want at most 45 intervals × %d", got, DefaultCapacity)
	}
}

// TestObserveTrackedAllocs: a tracked key, a peek and a denial allocate
// nothing. (AllocsPerRun refuses to run in parallel.)
func TestObserveTrackedAllocs(t *testing.T) {
	s := newSketch(t, 0)
	id := strings.Repeat("k", 100) // a long id too
	allocs := testing.AllocsPerRun(1000, func() {
		s.Observe("alice", "r", 1, false, t0)
		s.Observe(id, "r", 2, true, t0)
		s.Observe("bob", "r", 0, true, t0)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ got, want string }{
		{Minute.String(), "1m"}, {FifteenMinutes.String(), "15m"}, {Window(7).String(), "window(7)"},
		{Hits.String(), "hits"}, {Denials.String(), "denials"}, {Metric(9).String(), "metric(9)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
