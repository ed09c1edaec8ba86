// Package embedded compares in-process limiters side by side: ratelimitd's
// actors.System.Check and actors.Limiter.Allow, golang.org/x/time/rate
// (one Limiter per key in a sharded map), github.com/sethvargo/go-limiter's
// memorystore and github.com/ulule/limiter/v3's memory store. Every limiter gets the same
// keys in the same order and a limit no check reaches (about 10^12 per
// hour), so every check is an admitted hit that updates its key's state.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	ulule "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/table"
)

// Window and Limit are the limit every limiter enforces: Limit hits per
// Window per key, far more than any run makes.
const (
	Window = time.Hour
	Limit  = 1 << 40
)

// Limiter is one library behind a common face.
type Limiter interface {
	// Allow records one hit of key and reports whether it was admitted.
	Allow(ctx context.Context, key string) (bool, error)
	// Close releases the limiter and its goroutines.
	Close(ctx context.Context) error
}

// Factory makes a Limiter.
type Factory struct {
	Name   string // as reported
	Module string // the Go module it comes from, for its version
	New    func(ctx context.Context) (Limiter, error)
}

// Factories returns the limiters compared, ratelimitd first.
func Factories() []Factory {
	return []Factory{
		{Name: "ratelimitd actors.System.Check", Module: "github.com/ratelimitd/ratelimitd", New: newRatelimitd},
		{Name: "ratelimitd actors.Limiter.Allow", Module: "github.com/ratelimitd/ratelimitd", New: newRatelimitdLimiter},
		{Name: "x/time/rate (sharded map)", Module: "golang.org/x/time", New: newXRate},
		{Name: "sethvargo/go-limiter memorystore", Module: "github.com/sethvargo/go-limiter", New: newSethvargo},
		{Name: "ulule/limiter memory store", Module: "github.com/ulule/limiter/v3", New: newUlule},
	}
}

// ratelimitd: the embedded System with its defaults (4 × GOMAXPROCS
// shards, a sweep every 10 s, state in memory: none of the others
// journals either).
type rl struct{ s *actors.System }

func newRatelimitd(ctx context.Context) (Limiter, error) {
	s, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		return nil, err
	}
	return &rl{s: s}, nil
}

func (l *rl) Allow(ctx context.Context, key string) (bool, error) {
	d, err := l.s.Check(ctx, table.Request{ID: key, Policy: table.Policy{Scale: Window, Limit: Limit}, Hits: 1})
	return d.Allowed, err
}

func (l *rl) Close(ctx context.Context) error { return l.s.Stop(ctx) }

// ratelimitd's Limiter: the same System, checked through a Limiter of the
// policy, made once, as the other libraries are made with their rate.
type rlLimiter struct {
	s *actors.System
	l *actors.Limiter
}

func newRatelimitdLimiter(ctx context.Context) (Limiter, error) {
	s, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		return nil, err
	}
	l, err := s.Limiter(table.Policy{Scale: Window, Limit: Limit})
	if err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	return &rlLimiter{s: s, l: l}, nil
}

func (l *rlLimiter) Allow(ctx context.Context, key string) (bool, error) { return l.l.Allow(ctx, key) }

func (l *rlLimiter) Close(ctx context.Context) error { return l.s.Stop(ctx) }

// x/time/rate: it limits one thing; a service keeps one Limiter per key.
// Here, 256 shards each a mutex and a map, the usual way.
const xShards = 256

type xrate struct {
	seed   maphash.Seed
	shards [xShards]xShard
}

type xShard struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
	_  [40]byte // keep shards on separate cache lines
}

func newXRate(context.Context) (Limiter, error) {
	x := &xrate{seed: maphash.MakeSeed()}
	for i := range x.shards {
		x.shards[i].m = make(map[string]*rate.Limiter)
	}
	return x, nil
}

var xLimit = rate.Limit(float64(Limit) / Window.Seconds())

func (x *xrate) Allow(_ context.Context, key string) (bool, error) {
	s := &x.shards[maphash.String(x.seed, key)%xShards]
	s.mu.Lock()
	l := s.m[key]
	if l == nil {
		l = rate.NewLimiter(xLimit, Limit)
		s.m[key] = l
	}
	s.mu.Unlock()
	return l.Allow(), nil
}

func (x *xrate) Close(context.Context) error { return nil }

// sethvargo/go-limiter: memorystore, Limit tokens per Window.
type sv struct{ s limiter.Store }

func newSethvargo(context.Context) (Limiter, error) {
	s, err := memorystore.New(&memorystore.Config{Tokens: Limit, Interval: Window})
	if err != nil {
		return nil, err
	}
	return &sv{s: s}, nil
}

func (l *sv) Allow(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := l.s.Take(ctx, key)
	return ok, err
}

func (l *sv) Close(ctx context.Context) error { return l.s.Close(ctx) }

// ulule/limiter: the memory store with its defaults, Limit per Window.
type ul struct{ l *ulule.Limiter }

func newUlule(context.Context) (Limiter, error) {
	return &ul{l: ulule.New(memory.NewStore(), ulule.Rate{Period: Window, Limit: Limit})}, nil
}

func (l *ul) Allow(ctx context.Context, key string) (bool, error) {
	c, err := l.l.Get(ctx, key)
	return !c.Reached, err
}

func (l *ul) Close(context.Context) error { return nil }

// Prefill makes every id a live key of lim, from workers goroutines.
func Prefill(ctx context.Context, lim Limiter, ids []string, workers int) error {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(ids)) {
					return
				}
				if ok, err := lim.Allow(ctx, ids[i]); err != nil || !ok {
					firstErr.CompareAndSwap(nil, fmt.Errorf("prefill %s: allowed %v, %v", ids[i], ok, err))
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

// Result is one timed run.
type Result struct {
	Checks  int64
	Elapsed time.Duration
	Mallocs uint64 // heap allocations in the process during the run
}

// PerSec returns checks per second.
func (r Result) PerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Checks) / r.Elapsed.Seconds()
}

// AllocsPerOp returns heap allocations per check.
func (r Result) AllocsPerOp() float64 {
	if r.Checks == 0 {
		return 0
	}
	return float64(r.Mallocs) / float64(r.Checks)
}

// MaxChecks bounds the checks of one goroutine in one run.
const MaxChecks = 200_000_000

// ErrDenied is returned when a limiter denies a check that is far within
// its limit: its numbers would not be comparable.
var ErrDenied = errors.New("embedded: a check within the limit was denied")

// Run checks ids[seq[...]] on lim from goroutines goroutines for d, each
// starting at its own offset in seq, and counts the process's heap
// allocations (runtime.MemStats.Mallocs) over the run.
func Run(ctx context.Context, lim Limiter, ids []string, seq []int32, goroutines int, d time.Duration) (Result, error) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var total atomic.Int64
	var firstErr atomic.Value
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := range goroutines {
		wg.Go(func() {
			off := g * len(seq) / goroutines
			n := int64(0)
			for n < MaxChecks && !stop.Load() {
				// Read the clock every 256 checks only.
				if n&255 == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
					break
				}
				key := ids[seq[(off+int(n))%len(seq)]]
				ok, err := lim.Allow(ctx, key)
				if err != nil || !ok {
					if err == nil {
						err = fmt.Errorf("%w: %s", ErrDenied, key)
					}
					firstErr.CompareAndSwap(nil, err)
					stop.Store(true)
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	if err, _ := firstErr.Load().(error); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return Result{Checks: total.Load(), Elapsed: elapsed, Mallocs: m1.Mallocs - m0.Mallocs}, nil
}
