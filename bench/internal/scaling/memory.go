// Package scaling measures how ratelimitd's costs grow: memory per live
// bucket against Redis's memory per key, the sweep's cost against the
// number of expired and of live buckets, the latency of checks while a
// large sweep runs, and check throughput in each journal sync mode.
package scaling

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
	"github.com/ratelimitd/ratelimitd/bench/internal/serve"
	"github.com/ratelimitd/ratelimitd/table"
)

// MemPoint is the memory held at one number of live buckets.
type MemPoint struct {
	Buckets   int
	Bytes     int64   // held by the buckets: heap (or used_memory) minus the empty store's
	PerBucket float64 // Bytes / Buckets
	FillTime  time.Duration
}

// MemCurve is a memory curve and, if it stopped short, why.
type MemCurve struct {
	Points  []MemPoint
	Stopped string
}

// MemWindow is the window of the buckets of the memory curves: one hour,
// so none expires while the curve is drawn.
const MemWindow = time.Hour

// reserve is the memory left to the rest of the machine when deciding
// whether the next point fits.
const reserve = 2 << 30

// MemAvailable returns MemAvailable from /proc/meminfo, in bytes.
func MemAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("meminfo: no MemAvailable")
}

// fits decides whether growing a store from n to next buckets at about
// perBucket bytes each (times factor, for the allocator's and the GC's
// headroom) leaves the reserve free; if not it says why.
func fits(n, next int, perBucket, factor float64) (bool, string) {
	if perBucket <= 0 {
		perBucket = 1024
	}
	avail, err := MemAvailable()
	if err != nil {
		return true, ""
	}
	need := int64(float64(next-n) * perBucket * factor)
	if need > avail-reserve {
		return false, fmt.Sprintf("stopped before %d buckets: about %.1f GiB more would be needed and %.1f GiB is available (keeping %.0f GiB free)",
			next, float64(need)/(1<<30), float64(avail)/(1<<30), float64(reserve)/(1<<30))
	}
	return true, ""
}

// heapAfterGC returns the live heap after two collections.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// RatelimitdMemory fills an embedded System (no journal, no sweeps, no
// bound) with buckets "user-<i>", one per id, up to each number of points
// in turn, and measures the live heap after GC at each: everything the
// buckets hold (ids, tree, slab, indexes), less the empty System's heap.
func RatelimitdMemory(ctx context.Context, points []int) (MemCurve, error) {
	var c MemCurve
	debug.FreeOSMemory()
	s, err := actors.Start(ctx, actors.Config{MaxBuckets: -1, SweepInterval: -1})
	if err != nil {
		return c, err
	}
	defer func() { _ = s.Stop(context.Background()) }()
	base := heapAfterGC()
	filled, per := 0, 0.0
	for _, n := range points {
		if ok, why := fits(filled, n, per, 3); !ok {
			c.Stopped = why
			break
		}
		t0 := time.Now()
		if err := fillSystem(ctx, s, filled, n); err != nil {
			return c, err
		}
		took := time.Since(t0)
		filled = n
		if got := s.Stats().Buckets; got != int64(n) {
			return c, fmt.Errorf("ratelimitd memory: %d buckets live, want %d", got, n)
		}
		held := heapAfterGC() - base
		per = float64(held) / float64(n)
		c.Points = append(c.Points, MemPoint{Buckets: n, Bytes: held, PerBucket: per, FillTime: took})
	}
	return c, nil
}

// fillSystem checks ids from to to-1 once each, in batches of 1000 from
// 2×GOMAXPROCS goroutines.
func fillSystem(ctx context.Context, s *actors.System, from, to int) error {
	const batch = 1000
	var next atomic.Int64
	next.Store(int64(from))
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			reqs := make([]table.Request, 0, batch)
			for ctx.Err() == nil {
				lo := int(next.Add(batch) - batch)
				if lo >= to {
					return
				}
				reqs = reqs[:0]
				for i := lo; i < min(lo+batch, to); i++ {
					reqs = append(reqs, table.Request{ID: keys.ID(i), Scale: MemWindow, Limit: 10, Hits: 1})
				}
				if _, ok, err := s.CheckAll(ctx, reqs); err != nil || !ok {
					firstErr.CompareAndSwap(nil, fmt.Errorf("fill: CheckAll allowed %v, %v", ok, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return ctx.Err()
}

// RedisUsedMemory returns INFO memory's used_memory.
func RedisUsedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis: no used_memory in INFO memory")
}

// RedisMemory empties the Redis behind rdb, then creates keys the way the
// Redis+Lua front does (FixedWindowLua by EVALSHA: INCR, then PEXPIRE of
// one window, one key per bucket), up to each number of points in turn,
// and reads used_memory at each, less the empty server's.
func RedisMemory(ctx context.Context, rdb *redis.Client, points []int) (MemCurve, error) {
	var c MemCurve
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return c, err
	}
	if err := serve.FixedWindow.Load(ctx, rdb).Err(); err != nil {
		return c, err
	}
	base, err := RedisUsedMemory(ctx, rdb)
	if err != nil {
		return c, err
	}
	scaleMs := MemWindow.Milliseconds()
	window := time.Now().UnixMilli() / scaleMs
	filled, per := 0, 0.0
	for _, n := range points {
		if ok, why := fits(filled, n, per, 2); !ok {
			c.Stopped = why
			break
		}
		t0 := time.Now()
		if err := fillRedis(ctx, rdb, scaleMs, window, filled, n); err != nil {
			return c, err
		}
		took := time.Since(t0)
		filled = n
		if got, err := rdb.DBSize(ctx).Result(); err != nil || got != int64(n) {
			return c, fmt.Errorf("redis memory: DBSIZE %d (%v), want %d", got, err, n)
		}
		used, err := RedisUsedMemory(ctx, rdb)
		if err != nil {
			return c, err
		}
		held := used - base
		per = float64(held) / float64(n)
		c.Points = append(c.Points, MemPoint{Buckets: n, Bytes: held, PerBucket: per, FillTime: took})
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return c, err
	}
	return c, nil
}

// fillRedis runs the script once for each id from to to-1, pipelined 1000
// at a time from 4 connections.
func fillRedis(ctx context.Context, rdb *redis.Client, scaleMs, window int64, from, to int) error {
	const batch = 1000
	sha := serve.FixedWindow.Hash()
	var next atomic.Int64
	next.Store(int64(from))
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				lo := int(next.Add(batch) - batch)
				if lo >= to {
					return
				}
				p := rdb.Pipeline()
				for i := lo; i < min(lo+batch, to); i++ {
					p.EvalSha(ctx, sha, []string{serve.RedisKey(keys.ID(i), scaleMs, window)}, scaleMs)
				}
				cmds, err := p.Exec(ctx)
				if err == nil {
					for _, cmd := range cmds {
						if v, e := cmd.(*redis.Cmd).Int64Slice(); e != nil || len(v) != 2 || v[0] != 1 {
							err = fmt.Errorf("redis fill: %v, %v", v, e)
							break
						}
					}
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return ctx.Err()
}
