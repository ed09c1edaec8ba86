package actors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// benchSystem starts a System without sweeps, in memory for mode
// "memory", else journaling to a temporary directory with mode as its
// JournalSync, and returns it with its Config.
func benchSystem(b *testing.B, mode string) (*System, Config) {
	cfg := Config{SweepInterval: -1}
	if mode != "memory" {
		m, err := ParseSyncMode(mode)
		if err != nil {
			b.Fatal(err)
		}
		cfg.DataDir, cfg.JournalSync = b.TempDir(), m
	}
	return startSystem(b, cfg), cfg
}

// BenchmarkCheckJournal measures System.Check at 1k keys, 64 goroutines per
// proc, without a journal (the baseline) and with each sync mode, in one
// run; each reports checks/s, its ratio to the baseline, the latency p99
// and the journal bytes written per check.
func BenchmarkCheckJournal(b *testing.B) {
	reqs := benchRequests()
	var baseline float64
	for _, mode := range []string{"memory", "none", "interval", "always"} {
		b.Run("sync="+mode, func(b *testing.B) {
			s, cfg := benchSystem(b, mode)
			ctx := context.Background()
			var next atomic.Uint64
			var lat [][]time.Duration
			latMu := make(chan struct{}, 1)
			latMu <- struct{}{}
			b.SetParallelism(64)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(7)
				var mine []time.Duration
				for pb.Next() {
					i++
					start := time.Now()
					if d, err := s.Check(ctx, reqs[i%benchKeys]); err != nil || !d.Allowed {
						b.Errorf("Check: %+v, %v", d, err)
					}
					mine = append(mine, time.Since(start))
				}
				<-latMu
				lat = append(lat, mine)
				latMu <- struct{}{}
			})
			b.StopTimer()
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "checks/s")
			if mode == "memory" {
				baseline = rate
			} else if baseline > 0 {
				b.ReportMetric(rate/baseline, "x-memory")
			}
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
			if cfg.DataDir != "" {
				var bytes int64
				for _, sh := range s.shards {
					bytes += sh.j.Size()
				}
				// Size counts records since the last snapshot: none was
				// taken if the threshold was not reached.
				if s.Stats().Snapshots == 0 {
					b.ReportMetric(float64(bytes)/float64(b.N), "journal-B/check")
				}
			}
		})
	}
}

// BenchmarkBatchJournal measures CheckEach of batches of 10 requests (an
// HTTP batch, a pipeline's) over 1k keys from 64 goroutines per proc with
// a journal (sync=interval), each key hit again and again: checks/s and
// the journal bytes written per check.
func BenchmarkBatchJournal(b *testing.B) {
	reqs := benchRequests()
	s, _ := benchSystem(b, "interval")
	ctx := context.Background()
	var next atomic.Uint64
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		decs := make([]table.Decision, 10)
		for pb.Next() {
			i := int(next.Add(10) % benchKeys)
			batch := reqs[i:min(i+10, benchKeys)]
			if err := s.CheckEach(ctx, batch, decs[:len(batch)]); err != nil {
				b.Errorf("CheckEach: %v", err)
			}
		}
	})
	b.StopTimer()
	checks := float64(b.N) * 10
	b.ReportMetric(checks/b.Elapsed().Seconds(), "checks/s")
	if s.Stats().Snapshots == 0 { // else Size counts from the last one
		var bytes int64
		for _, sh := range s.shards {
			sh.mu.Lock()
			bytes += sh.j.Size()
			sh.mu.Unlock()
		}
		b.ReportMetric(float64(bytes)/checks, "journal-B/check")
	}
}

// BenchmarkRecovery measures Start on a data directory holding n live
// buckets in 8 shards: a snapshot of most of them plus segments holding
// the rest (one record per bucket, as after a compaction), replayed in
// parallel. n is 1M, and 10M with RATELIMITD_BENCH_10M=1 (it needs ~3 GiB).
func BenchmarkRecovery(b *testing.B) {
	sizes := []int{1_000_000}
	if testing.Short() {
		sizes = []int{100_000}
	}
	if os.Getenv("RATELIMITD_BENCH_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	for _, n := range sizes {
		b.Run("buckets="+strconv.Itoa(n), func(b *testing.B) {
			const shards = 8
			dir := b.TempDir()
			now := time.Now()
			writeRecoveryData(b, dir, shards, n, 64<<20, now)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				s, err := Start(context.Background(), Config{DataDir: dir, Shards: shards, SweepInterval: -1, MaxBuckets: -1})
				if err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				if got := s.Stats().Buckets; got != int64(n) {
					b.Fatalf("recovered %d buckets, want %d", got, n)
				}
				b.ReportMetric(float64(n)/took.Seconds(), "buckets/s")
				b.StopTimer()
				if err := s.Stop(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// writeRecoveryData writes, for each shard, a snapshot of its buckets
// ("user-0" to "user-<n-1>", one hit each in an hour's window at now) and,
// in segments of segSize bytes, a second hit on the first tenth of the
// shard's ids, as System would. It returns the ids of each shard.
func writeRecoveryData(b testing.TB, dir string, shards, n int, segSize int64, now time.Time) [][]string {
	b.Helper()
	if err := writeMeta(dir, meta{Format: metaFormat, Shards: shards}); err != nil {
		b.Fatal(err)
	}
	tables := make([]*table.Table, shards)
	ids := make([][]string, shards)
	for i := range tables {
		tables[i] = table.New(table.Config{TrackChanges: true})
	}
	hit := func(t *table.Table, id string) {
		t.Apply(table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 100}, Hits: 1}, now)
	}
	for i := range n {
		id := fmt.Sprintf("user-%d", i)
		sh := shardOf(id, shards)
		ids[sh] = append(ids[sh], id)
		hit(tables[sh], id)
	}
	for i, t := range tables {
		j, _, err := journal.Open(filepath.Join(dir, fmt.Sprintf("shard-%03d", i)), journal.Options{Sync: journal.SyncNone, SegmentSize: segSize}, nil)
		if err != nil {
			b.Fatal(err)
		}
		// Every change goes to the segments; a snapshot of the table then
		// covers them, and the last 10% are changed again after it.
		if err := t.Changes(j.Append); err != nil {
			b.Fatal(err)
		}
		w, err := j.StartSnapshot()
		if err != nil {
			b.Fatal(err)
		}
		f := t.Freeze(now)
		if err := f.Records(w.Append); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		t.Thaw(f)
		for _, id := range ids[i][:len(ids[i])/10] {
			hit(t, id)
		}
		if err := t.Changes(j.Append); err != nil {
			b.Fatal(err)
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// BenchmarkJournalGrowth drives a steady 10k checks/s (100k keys, one hit
// each in turn, 1h windows) for 10 s, or RATELIMITD_GROWTH_SECONDS, with
// the default journal settings, and reports the journal bytes per check,
// the data directory's size on disk and the growth per hour that rate
// makes until compaction (snapshots) bounds it.
func BenchmarkJournalGrowth(b *testing.B) {
	seconds := 10
	if s := os.Getenv("RATELIMITD_GROWTH_SECONDS"); s != "" {
		seconds, _ = strconv.Atoi(s)
	}
	const rate, keys = 10_000, 100_000
	for range b.N {
		dir := b.TempDir()
		s, err := Start(context.Background(), Config{DataDir: dir, SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		start := time.Now()
		sent := 0
		tick := time.NewTicker(10 * time.Millisecond)
		for time.Since(start) < time.Duration(seconds)*time.Second {
			<-tick.C
			due := int(time.Since(start).Seconds()*rate) - sent
			for range due {
				if _, err := s.Check(ctx, table.Request{ID: "client-" + strconv.Itoa(sent%keys), Policy: table.Policy{Scale: time.Hour, Limit: 1 << 30}, Hits: 1}); err != nil {
					b.Fatal(err)
				}
				sent++
			}
		}
		tick.Stop()
		var journal int64
		for _, sh := range s.shards {
			journal += sh.j.Size()
		}
		if err := s.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		disk := dirBytes(b, dir)
		b.ReportMetric(float64(journal)/float64(sent), "journal-B/check")
		b.ReportMetric(float64(journal)/float64(sent)*rate*3600/(1<<30), "GiB/h-before-compaction")
		b.ReportMetric(float64(disk)/(1<<20), "MiB-on-disk")
	}
}

// dirBytes is the disk space of the files under dir (allocated blocks).
func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !fi.IsDir() {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
