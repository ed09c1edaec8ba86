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
					reqs = append(reqs, table.Request{ID: keys.ID(i), Policy: table.Policy{Scale: MemWindow, Limit: 10}, Hits: 1})
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

// redisSettled returns used_memory once Redis has finished growing its
// hash tables: a table that doubled is rehashed incrementally, and until
// then both the old and the new one are allocated. It polls every 200 ms
// until three readings in a row agree within 0.1%, for at most 30 s.
func redisSettled(ctx context.Context, rdb *redis.Client) (int64, error) {
	last, err := RedisUsedMemory(ctx, rdb)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for same := 0; same < 3 && time.Now().Before(deadline); {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		used, err := RedisUsedMemory(ctx, rdb)
		if err != nil {
			return 0, err
		}
		if d := used - last; d < 0 && -d > last/1000 || d > last/1000 {
			same = 0
		} else {
			same++
		}
		last = used
	}
	return last, nil
}

// fillLua makes keys as FixedWindowLua makes a new window's key (INCR,
// then PEXPIRE of one window, ARGV[1] ms), for every key it is given: the
// same keys, values and TTLs as the front's, a thousand per call, so that
// ten million keys take seconds, not minutes.
const fillLua = `for _, k in ipairs(KEYS) do
  if redis.call('INCR', k) == 1 then redis.call('PEXPIRE', k, ARGV[1]) end
end
return #KEYS`

var fillScript = redis.NewScript(fillLua)

// RedisMemory empties the Redis behind rdb, then creates keys the way the
// Redis+Lua front does (INCR then PEXPIRE of one window, one key
// rl:<id>:<scale>:<window> per bucket), up to each number of points in
// turn, and reads used_memory at each, less the empty server's. rdb's
// timeouts must allow a FLUSHALL of the largest point.
func RedisMemory(ctx context.Context, rdb *redis.Client, points []int) (MemCurve, error) {
	var c MemCurve
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return c, err
	}
	if err := fillScript.Load(ctx, rdb).Err(); err != nil {
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
		used, err := redisSettled(ctx, rdb)
		if err != nil {
			return c, err
		}
		held := used - base
		per = float64(held) / float64(n)
		c.Points = append(c.Points, MemPoint{Buckets: n, Bytes: held, PerBucket: per, FillTime: took})
	}
	if err := rdb.FlushAllAsync(ctx).Err(); err != nil {
		return c, err
	}
	return c, nil
}

// fillRedis makes the keys of ids from to to-1, a thousand per EVALSHA of
// fillLua, from 4 connections.
func fillRedis(ctx context.Context, rdb *redis.Client, scaleMs, window int64, from, to int) error {
	const batch = 1000
	var next atomic.Int64
	next.Store(int64(from))
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ks := make([]string, 0, batch)
			for ctx.Err() == nil {
				lo := int(next.Add(batch) - batch)
				if lo >= to {
					return
				}
				ks = ks[:0]
				for i := lo; i < min(lo+batch, to); i++ {
					ks = append(ks, serve.RedisKey(keys.ID(i), scaleMs, window))
				}
				n, err := fillScript.Run(ctx, rdb, ks, scaleMs).Int()
				if err == nil && n != len(ks) {
					err = fmt.Errorf("redis fill: the script made %d keys of %d", n, len(ks))
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
