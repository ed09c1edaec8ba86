package topk

import (
	"strings"
	"testing"
	"time"
)

// fuzzIDs are the ids FuzzSketch draws from: short ones, and two longer
// than IDBytes with different first bytes.
var fuzzIDs = []string{"a", "b", "c", "d", "é", strings.Repeat("L", 80), strings.Repeat("M", 70) + "x"}

// observation is one Observe, and the interval it was counted in.
type observation struct {
	key      string // id + "\x00" + label
	sketch   int
	w        uint64
	denied   bool
	interval int64
}

// FuzzSketch checks the guarantees against exact weights on small
// streams: three bytes per Observe (id and label; hits and denied; a
// step of time, sometimes back), into two sketches with ids partitioned
// between them, and after every Observe, every window and metric, merged
// with and without Partitioned: Total is exact, Bound ≤ Total/Capacity,
// every candidate's Min ≤ weight ≤ Count ≤ weight+Bound, and every key
// weighing more than Bound is a candidate.
func FuzzSketch(f *testing.F) {
	f.Add([]byte{1, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 0})
	f.Add([]byte{0, 5, 3, 9, 6, 7, 0, 1, 1, 255, 2, 2, 60})
	f.Add([]byte{3, 0, 3, 39, 8, 3, 39, 16, 7, 39, 24, 3, 39, 32, 1, 39, 40, 5, 39, 48, 2, 39, 5, 1, 200})
	// The same with a front of one set (8) and of two (12).
	f.Add([]byte{9, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 0})
	f.Add([]byte{12, 5, 3, 9, 6, 7, 0, 1, 1, 255, 2, 2, 60})
	f.Add([]byte{11, 0, 3, 39, 8, 3, 39, 16, 7, 39, 24, 3, 39, 32, 1, 39, 40, 5, 39, 48, 2, 39, 5, 1, 200})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 1+3*100 {
			return
		}
		capacity := 1 + int(data[0]%4)
		front := []int{0, 0, 4, 8}[data[0]>>2%4] // one set, two sets
		sketches := []*Sketch{newFronted(t, capacity, front), newFronted(t, capacity, front)}
		latest := [2]int64{noStamp, noStamp}
		var obs []observation
		now := t0
		for ops := data[1:]; len(ops) >= 3; ops = ops[3:] {
			id := int(ops[0]) % len(fuzzIDs)
			label := []string{"r", "q"}[ops[0]>>7]
			hits, denied := int64(ops[1]%4), ops[1]&4 != 0
			if ops[2] >= 250 {
				now = now.Add(-30 * time.Second)
			} else {
				now = now.Add(time.Duration(ops[2]%40) * time.Second)
			}
			sk := id % 2
			sketches[sk].Observe(fuzzIDs[id], label, hits, denied, now)
			ns := now.UnixNano()
			if hits > 0 { // a peek touches nothing, not even the time
				latest[sk] = max(latest[sk], floorDiv(ns, int64(width)))
				obs = append(obs, observation{fuzzIDs[id] + "\x00" + label, sk, uint64(hits), denied, latest[sk]})
			}
			for _, w := range []Window{Minute, FifteenMinutes} {
				for _, m := range []Metric{Hits, Denials} {
					exact := map[string]uint64{}
					for _, o := range obs {
						cur := max(floorDiv(ns, int64(width)), latest[o.sketch])
						if o.interval > cur-w.span() && (m == Hits || o.denied) {
							exact[o.key] += o.w
						}
					}
					for _, part := range []bool{false, true} {
						checkExact(t, top(m, w, part, now, sketches...), exact, capacity)
					}
				}
			}
		}
	})
}

// checkExact asserts the guarantees of a View against exact weights by
// id + "\x00" + label.
func checkExact(t *testing.T, v *View, exact map[string]uint64, capacity int) {
	t.Helper()
	what := v.Metric.String() + " " + v.Window.String()
	if v.Partitioned {
		what += " partitioned"
	}
	var total uint64
	for _, f := range exact {
		total += f
	}
	bound := v.Bound()
	if v.Total() != total || bound*uint64(capacity) > total {
		t.Fatalf("%s: Total %d, Bound %d; want Total %d and Bound ≤ Total/%d", what, v.Total(), bound, total, capacity)
	}
	seen := map[string]bool{}
	for _, e := range v.Top(-1) {
		id := e.ID
		if e.Truncated {
			for _, full := range fuzzIDs {
				if strings.HasPrefix(full, e.ID) && len(full) > IDBytes {
					id = full
				}
			}
		}
		k := id + "\x00" + e.Label
		seen[k] = true
		f := exact[k]
		if e.Count < f || e.Count > f+bound || e.Min > f {
			t.Fatalf("%s: %q: Count %d Min %d, true weight %d, Bound %d", what, k, e.Count, e.Min, f, bound)
		}
	}
	for k, f := range exact {
		if f > bound && !seen[k] {
			t.Fatalf("%s: %q weighs %d > Bound %d but is not a candidate", what, k, f, bound)
		}
	}
}
