package rules

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchRules returns n URL rules under a few hundred distinct prefixes of
// several depths, some with method or host filters, plus a catch-all.
func benchRules(n int) []Rule {
	rules := make([]Rule, 0, n)
	for i := 0; len(rules) < n-1; i++ {
		var r Rule
		switch i % 4 {
		case 0:
			r = urlRule(fmt.Sprintf("r%d", i), fmt.Sprintf("/svc%d", i%97), "", "")
		case 1:
			r = urlRule(fmt.Sprintf("r%d", i), fmt.Sprintf("/svc%d/v%d/res%d", i%97, i%3, i), "", "")
		case 2:
			r = urlRule(fmt.Sprintf("r%d", i), fmt.Sprintf("/svc%d/v%d/res%d", i%97, i%3, i-1), "POST", "")
		case 3:
			r = urlRule(fmt.Sprintf("r%d", i), fmt.Sprintf("/svc%d/v%d/res%d/items/", i%97, i%3, i-2), "", "api.example.com")
		}
		if i%4 == 0 && i >= 97*4 {
			continue // /svc<k> already taken
		}
		rules = append(rules, r)
	}
	return append(rules, urlRule("root", "/", "", ""))
}

// benchRequests returns m distinct requests that hit rules of benchRules.
func benchRequests(m int) [][3]string {
	reqs := make([][3]string, m)
	for j := range reqs {
		i := 4*j + 1
		reqs[j] = [3]string{"GET", "api.example.com:443", fmt.Sprintf("/svc%d/v%d/res%d/items/%d", i%97, i%3, i, j)}
	}
	return reqs
}

func BenchmarkMatchCached(b *testing.B) {
	st := mustStore(b, benchRules(1000)...)
	reqs := benchRequests(100)
	for _, q := range reqs { // warm the cache
		st.Match(q[0], q[1], q[2])
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			q := &reqs[i%len(reqs)]
			if _, ok := st.Match(q[0], q[1], q[2]); !ok {
				b.Fatal("no match")
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				q := &reqs[i%len(reqs)]
				if _, ok := st.Match(q[0], q[1], q[2]); !ok {
					b.Fatal("no match")
				}
				i++
			}
		})
	})
}

func BenchmarkMatchUncached(b *testing.B) {
	s, err := NewSet(benchRules(1000), 1)
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchRequests(100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := &reqs[i%len(reqs)]
		if _, ok := s.Match(q[0], q[1], q[2]); !ok {
			b.Fatal("no match")
		}
		i++
	}
}

// BenchmarkMatchMiss measures Store.Match on distinct paths, each a cache
// miss: an attacker's random paths.
func BenchmarkMatchMiss(b *testing.B) {
	st := mustStore(b, benchRules(1000)...)
	paths := make([]string, 1<<16)
	for i := range paths {
		paths[i] = fmt.Sprintf("/svc%d/v1/junk%d", i%97, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		st.Match("GET", "h", paths[i%len(paths)])
		i++
	}
}

// BenchmarkPutUnderLoad measures Store.Put with 1,000 URL rules, alone
// ("idle") and while GOMAXPROCS-1 goroutines (at least one) match 100 distinct
// requests ("readers"). For the readers it reports, over the Puts, the mean
// latency of a match (match-ns; each Put makes every cached entry outdated, so
// this includes one uncached match per request per Put), upper bounds of the
// 99th and 99.9th percentiles (match-p99-ns, match-p999-ns, to a power of
// two), the largest (match-max-ns, which includes any preemption by the
// scheduler), and matches/put. All latencies include two time.Now calls.
func BenchmarkPutUnderLoad(b *testing.B) {
	b.Run("idle", func(b *testing.B) {
		st := mustStore(b, benchRules(1000)...)
		r := urlRule("changing", "/changing", "", "")
		b.ReportAllocs()
		for b.Loop() {
			r.Limit++
			if _, err := st.Put(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("readers", func(b *testing.B) {
		st := mustStore(b, benchRules(1000)...)
		reqs := benchRequests(100)
		r := urlRule("changing", "/changing", "", "")
		var stop atomic.Bool
		var wg sync.WaitGroup
		readers := max(1, runtime.GOMAXPROCS(0)-1)
		hists := make([]latencies, readers)
		for g := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					q := &reqs[i%len(reqs)]
					start := time.Now()
					st.Match(q[0], q[1], q[2])
					hists[g].add(time.Since(start))
				}
			}()
		}
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			r.Limit++
			if _, err := st.Put(r); err != nil {
				b.Fatal(err)
			}
			n++
		}
		stop.Store(true)
		wg.Wait()
		var all latencies
		for _, h := range hists {
			all.merge(&h)
		}
		if all.count > 0 && n > 0 {
			b.ReportMetric(float64(all.total.Nanoseconds())/float64(all.count), "match-ns")
			b.ReportMetric(float64(all.quantile(0.99).Nanoseconds()), "match-p99-ns")
			b.ReportMetric(float64(all.quantile(0.999).Nanoseconds()), "match-p999-ns")
			b.ReportMetric(float64(all.max.Nanoseconds()), "match-max-ns")
			b.ReportMetric(float64(all.count)/float64(n), "matches/put")
		}
	})
}

// latencies is a histogram of durations in power-of-two buckets.
type latencies struct {
	buckets [64]int64 // buckets[i] counts durations d with bits.Len64(d) == i
	count   int64
	total   time.Duration
	max     time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.buckets[bits.Len64(uint64(max(d, 0)))]++
	l.count++
	l.total += d
	l.max = max(l.max, d)
}

func (l *latencies) merge(o *latencies) {
	for i, c := range o.buckets {
		l.buckets[i] += c
	}
	l.count += o.count
	l.total += o.total
	l.max = max(l.max, o.max)
}

// quantile returns an upper bound of the q-quantile: the top of its bucket.
func (l *latencies) quantile(q float64) time.Duration {
	want := int64(q * float64(l.count))
	var seen int64
	for i, c := range l.buckets {
		seen += c
		if seen > want {
			return time.Duration(uint64(1)<<i - 1)
		}
	}
	return l.max
}

func BenchmarkParse(b *testing.B) {
	data, err := Marshal(benchRules(1000))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
