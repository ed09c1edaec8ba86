package topk

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// BenchmarkObserve measures Observe, with the time moving on by 1 s every
// 1024 calls, a tenth of the calls denied, on three
// mixes: a few keys that stay tracked; Zipf-skewed traffic over 100k ids
// (a shard's share of a skewed load); and 125 ids in turn, each new to a
// summary of 32 counters (a shard's share of BenchmarkCheck's 1000 keys in
// package actors), the worst case, every call replacing a counter; and
// the same with a front of 512 keys (churn+front), as package actors
// gives its sketches, which holds them all. 0 allocs/op.
func BenchmarkObserve(b *testing.B) {
	names := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = "user-" + strconv.Itoa(i*7919)
		}
		return s
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, 100_000-1)
	skewed := make([]uint32, 1<<16)
	for i := range skewed {
		skewed[i] = uint32(zipf.Uint64())
	}
	for _, c := range []struct {
		name  string
		ids   []string
		seq   func(i int) int
		front int
	}{
		{"tracked", names(16), func(i int) int { return i % 16 }, 0},
		{"zipf", names(100_000), func(i int) int { return int(skewed[i]) }, 0},
		{"churn", names(125), func(i int) int { return i % 125 }, 0},
		{"churn+front", names(125), func(i int) int { return i % 125 }, 512},
	} {
		seq := make([]string, 1<<16)
		for i := range seq {
			seq[i] = c.ids[c.seq(i)]
		}
		b.Run(c.name, func(b *testing.B) {
			s, err := New(Config{Front: c.front})
			if err != nil {
				b.Fatal(err)
			}
			now := t0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i&1023 == 0 {
					now = now.Add(time.Second) // the rings turn over every 20k calls
				}
				s.Observe(seq[i&(len(seq)-1)], "rule", 1, i%10 == 0, now)
			}
		})
	}
}
