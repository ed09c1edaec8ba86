package table

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// mutexCounter is the baseline every limiter is measured against: a fixed
// window counter in a map behind a mutex, the smallest thing that works.
type mutexCounter struct {
	mu sync.Mutex
	m  map[mutexKey]int64
}

type mutexKey struct {
	window int64
	id     string
}

func (c *mutexCounter) allow(id string, scaleMs, limit int64, now time.Time) bool {
	k := mutexKey{window: now.UnixMilli() / scaleMs, id: id}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.m[k]
	if n >= limit {
		return false
	}
	c.m[k] = n + 1
	return true
}

func benchIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i*7919)
	}
	return ids
}

// BenchmarkApply compares Table.Apply with the map+mutex baseline at 1k and 1M
// keys, all in one run: ns/op of each and their ratio. The keys are hit in a
// seeded random order, so at 1M keys most hits miss the CPU caches.
func BenchmarkApply(b *testing.B) {
	for _, keys := range []int{1_000, 1_000_000} {
		if keys > 1000 && testing.Short() {
			continue
		}
		ids := benchIDs(keys)
		rng := rand.New(rand.NewPCG(1, 2))
		order := make([]string, 1<<20)
		for i := range order {
			order[i] = ids[rng.IntN(keys)]
		}
		now := time.UnixMilli(1_700_000_000_000)
		b.Run("keys="+strconv.Itoa(keys)+"/baseline=map+mutex", func(b *testing.B) {
			c := &mutexCounter{m: make(map[mutexKey]int64)}
			for _, id := range ids {
				c.allow(id, 3_600_000, 1<<40, now)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.allow(order[i&(len(order)-1)], 3_600_000, 1<<40, now)
			}
		})
		for _, tracked := range []bool{false, true} {
			name := "/table"
			if tracked {
				// As a journaled owner runs it: changes tracked, and
				// encoded every 64 checks (a batch).
				name = "/table+changes"
			}
			b.Run("keys="+strconv.Itoa(keys)+name, func(b *testing.B) {
				t := New(Config{TrackChanges: tracked})
				req := Request{Policy: Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1}
				for _, id := range ids {
					req.ID = id
					t.Apply(req, now)
				}
				encoded := 0
				sink := func(rec []byte) error { encoded += len(rec); return nil }
				_ = t.Changes(sink)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					req.ID = order[i&(len(order)-1)]
					if !t.Apply(req, now).Allowed {
						b.Fatal("denied")
					}
					if tracked && i%64 == 63 {
						_ = t.Changes(sink)
					}
				}
			})
		}
	}
}

// BenchmarkRestore measures recovery from records: a Frozen snapshot of 1M
// buckets (100k under -short) replayed into an empty table.
func BenchmarkRestore(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	now := time.UnixMilli(1_700_000_000_000)
	src := New(Config{})
	for _, id := range benchIDs(n) {
		src.Apply(Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 3}, now)
	}
	var recs [][]byte
	f := src.Freeze(now)
	_ = f.Records(func(rec []byte) error { recs = append(recs, append([]byte(nil), rec...)); return nil })
	src.Thaw(f)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := New(Config{})
		for _, rec := range recs {
			if err := t.Restore(rec, now); err != nil {
				b.Fatal(err)
			}
		}
		if t.Len() != n {
			b.Fatalf("restored %d buckets, want %d", t.Len(), n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "buckets/s")
}

// BenchmarkFreezeRecords measures writing a snapshot: Freeze 1M buckets
// (100k under -short) and encode every record.
func BenchmarkFreezeRecords(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	now := time.UnixMilli(1_700_000_000_000)
	t := New(Config{})
	for _, id := range benchIDs(n) {
		t.Apply(Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 3}, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	size := 0
	for i := 0; i < b.N; i++ {
		f := t.Freeze(now)
		size = 0
		_ = f.Records(func(rec []byte) error { size += len(rec); return nil })
		t.Thaw(f)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "buckets/s")
	b.ReportMetric(float64(size)/float64(n), "B/record")
}

// BenchmarkMemoryPerBucket reports the heap held per live bucket at 1M
// and 10M buckets (10M unless -short; all indexes included), after GC,
// with and without the id bytes, and Footprint's breakdown of it.
func BenchmarkMemoryPerBucket(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		if n > 1_000_000 && testing.Short() {
			continue
		}
		b.Run("buckets="+strconv.Itoa(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				t, perBucket, idLen := heapPerBucket(n)
				if t.Len() != n {
					b.Fatalf("got %d buckets, want %d", t.Len(), n)
				}
				b.ReportMetric(perBucket, "B/bucket")
				b.ReportMetric(perBucket-idLen, "B/bucket-excl-id")
				f, per := t.Footprint(), func(x int64) float64 { return float64(x) / float64(n) }
				b.ReportMetric(per(f.Slab), "B/bucket-slab")
				b.ReportMetric(per(f.Index), "B/bucket-index")
				b.ReportMetric(per(f.Windows), "B/bucket-windows")
				b.ReportMetric(per(f.IDs), "B/bucket-ids")
				b.ReportMetric(per(f.Other), "B/bucket-other")
				runtime.KeepAlive(t)
			}
		})
	}
}

// BenchmarkDeleteExpired measures the sweep of 10k expired buckets beside
// 10k, 100k, 1M or 10M live ones (10k only under -short). The sweep's work
// follows what expires, not the table; its cost per deleted bucket still
// grows with the table, whose index no longer fits the CPU caches. The
// heap is collected before each sweep, as a running server's would have
// been, so the expired buckets are not measured hot from their creation.
func BenchmarkDeleteExpired(b *testing.B) {
	const expired = 10_000
	for _, live := range []int{10_000, 100_000, 1_000_000, 10_000_000} {
		if live > 10_000 && testing.Short() {
			continue
		}
		b.Run("live="+strconv.Itoa(live), func(b *testing.B) {
			now := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
			t := New(Config{})
			for _, id := range benchIDs(live) {
				t.Apply(Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, now)
			}
			ids := benchIDs(expired)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				base := now.Add(time.Duration(i) * time.Second)
				for _, id := range ids {
					t.Apply(Request{ID: id, Policy: Policy{Scale: time.Second, Limit: 10}, Hits: 1}, base)
				}
				runtime.GC()
				b.StartTimer()
				if got := t.DeleteExpired(base.Add(time.Second), expired); got != expired {
					b.Fatalf("deleted %d, want %d", got, expired)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*expired), "ns/deleted")
		})
	}
}

// BenchmarkApplyAlgorithms compares every algorithm with fixed_window in
// one run, at 1k keys (and 1M unless -short), each hit allowed, the clock
// moving 1µs per check so that windows age as they would.
func BenchmarkApplyAlgorithms(b *testing.B) {
	for _, keys := range []int{1_000, 1_000_000} {
		if keys > 1000 && testing.Short() {
			continue
		}
		ids := benchIDs(keys)
		for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket} {
			b.Run("keys="+strconv.Itoa(keys)+"/"+alg.String(), func(b *testing.B) {
				t := New(Config{})
				now := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
				req := Request{Policy: Policy{Scale: time.Hour, Limit: 1 << 40, Algorithm: alg}, Hits: 1}
				for _, id := range ids {
					req.ID = id
					t.Apply(req, now)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					req.ID = ids[i%keys]
					if !t.Apply(req, now.Add(time.Millisecond+time.Duration(i)*time.Microsecond)).Allowed {
						b.Fatal("denied")
					}
				}
			})
		}
	}
}

// BenchmarkHash compares the id hashes a check may pay, in one run, on a
// 12-byte id: the table's maphash, its keyed SipHash-1-3 (HashKey), and the
// FNV-1a that package actors picks a shard with.
func BenchmarkHash(b *testing.B) {
	id := "user-7919000"
	key := NewHashKey()
	keyed := New(Config{HashKey: &key})
	plain := New(Config{})
	var sink uint64
	b.Run("maphash", func(b *testing.B) {
		for range b.N {
			sink += plain.Hash(id)
		}
	})
	b.Run("siphash13", func(b *testing.B) {
		for range b.N {
			sink += keyed.Hash(id)
		}
	})
	b.Run("fnv1a", func(b *testing.B) {
		for range b.N {
			h := uint64(14695981039346656037)
			for i := 0; i < len(id); i++ {
				h ^= uint64(id[i])
				h *= 1099511628211
			}
			sink += h
		}
	})
	if sink == 1 {
		b.Log(sink)
	}
}
