package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/embedded"
	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
	"github.com/ratelimitd/ratelimitd/bench/internal/report"
	"github.com/ratelimitd/ratelimitd/bench/internal/scaling"
	"github.com/ratelimitd/ratelimitd/bench/internal/serve"
)

// seqLen is the length of each key sequence; goroutines start at
// different offsets in it and wrap around.
const seqLen = 1 << 21

func (r *runner) embeddedSection(ctx context.Context) error {
	e := &report.Embedded{Keys: []int{1_000, 100_000, 1_000_000}, PerRun: time.Second, Passes: 2}
	if r.o.short {
		e.Keys, e.PerRun, e.Passes = []int{1_000, 100_000}, 200*time.Millisecond, 1
	}
	fs := embedded.Factories()
	for _, f := range fs {
		e.Limiters = append(e.Limiters, f.Name)
	}
	r.rep.Embedded = e
	dists := []keys.Dist{keys.Uniform, keys.Zipf}
	goroutines := []int{1, 2}

	type acc struct {
		checks  int64
		elapsed time.Duration
		mallocs uint64
		err     string
	}
	type key struct {
		lim, keys, dist, g int
	}
	results := map[key]*acc{}
	for _, n := range e.Keys {
		ids := keys.IDs(n)
		for di, d := range dists {
			seq := keys.Sequence(d, n, seqLen, uint64(1000+di))
			for pass := range e.Passes {
				// Alternate the order of the limiters from pass to pass.
				order := make([]int, len(fs))
				for i := range order {
					order[i] = i
					if pass%2 == 1 {
						order[i] = len(fs) - 1 - i
					}
				}
				for _, li := range order {
					f := fs[li]
					if err := ctx.Err(); err != nil {
						return err
					}
					runs, err := r.embeddedOne(ctx, f, ids, seq, goroutines, e.PerRun)
					for gi, g := range goroutines {
						a := results[key{li, n, int(d), g}]
						if a == nil {
							a = &acc{}
							results[key{li, n, int(d), g}] = a
						}
						switch {
						case err != nil:
							a.err = firstLine(err.Error())
						case a.err == "":
							a.checks += runs[gi].Checks
							a.elapsed += runs[gi].Elapsed
							a.mallocs += runs[gi].Mallocs
						}
					}
					if err != nil {
						r.fail("embedded %s, %d keys, %v: %v", f.Name, n, d, err)
					}
				}
			}
			for li, f := range fs {
				for _, g := range goroutines {
					a := results[key{li, n, int(d), g}]
					res := report.EmbeddedResult{Limiter: f.Name, Keys: n, Dist: d.String(), Goroutines: g, Checks: a.checks, Elapsed: a.elapsed, Error: a.err}
					if a.checks > 0 {
						res.AllocsPerOp = float64(a.mallocs) / float64(a.checks)
					}
					e.Results = append(e.Results, res)
					r.logf("embedded %-34s keys=%-8d %-12s g=%d %12.0f checks/s %.2f allocs/op %s", f.Name, n, d, g, res.PerSec(), res.AllocsPerOp, res.Error)
				}
			}
		}
	}
	return nil
}

// embeddedOne makes a limiter, fills it with every id, runs each goroutine
// count for d, and closes it; only one limiter is live at a time.
func (r *runner) embeddedOne(ctx context.Context, f embedded.Factory, ids []string, seq []int32, goroutines []int, d time.Duration) ([]embedded.Result, error) {
	lim, err := f.New(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = lim.Close(cctx)
		runtime.GC()
		debug.FreeOSMemory()
	}()
	if err := embedded.Prefill(ctx, lim, ids, 64); err != nil {
		return nil, err
	}
	var out []embedded.Result
	for _, g := range goroutines {
		res, err := embedded.Run(ctx, lim, ids, seq, g, d)
		if err != nil {
			return nil, fmt.Errorf("%d goroutines: %w", g, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func (r *runner) memorySection(ctx context.Context) error {
	points := []int{1_000, 10_000, 100_000, 1_000_000, 10_000_000}
	if r.o.short {
		points = points[:3]
	}
	m := &report.Memory{Window: scaling.MemWindow}
	r.rep.Memory = m
	runtime.GC()
	debug.FreeOSMemory()
	var err error
	if m.Ratelimitd, err = scaling.RatelimitdMemory(ctx, points); err != nil {
		r.fail("memory, ratelimitd: %v", err)
		m.Ratelimitd.Stopped = "failed: " + firstLine(err.Error())
	}
	for _, p := range m.Ratelimitd.Points {
		r.logf("memory ratelimitd %9d buckets %7.1f B/bucket (filled in %s)", p.Buckets, p.PerBucket, p.FillTime.Round(time.Millisecond))
	}
	runtime.GC()
	debug.FreeOSMemory()

	if err := r.startRedis(ctx); err != nil {
		r.fail("memory: starting Redis: %v", err)
		m.RedisError = firstLine(err.Error())
		return nil
	}
	if r.redisAddr == "" {
		m.RedisError = r.redisErr
		r.logf("memory: Redis skipped: %s", r.redisErr)
		return nil
	}
	rdb := serve.NewRedisClient(r.redisAddr, 8, 2*time.Minute)
	defer rdb.Close()
	if m.Redis, err = scaling.RedisMemory(ctx, rdb, points); err != nil {
		r.fail("memory, Redis: %v", err)
		m.Redis.Stopped = "failed: " + firstLine(err.Error())
	}
	for _, p := range m.Redis.Points {
		r.logf("memory redis      %9d keys    %7.1f B/key    (filled in %s)", p.Buckets, p.PerBucket, p.FillTime.Round(time.Millisecond))
	}
	return nil
}

func (r *runner) sweepSection(ctx context.Context) error {
	vsExpired := [][2]int{{100_000, 1_000}, {100_000, 10_000}, {100_000, 100_000}, {100_000, 1_000_000}}
	vsLive := [][2]int{{10_000, 10_000}, {100_000, 10_000}, {1_000_000, 10_000}, {10_000_000, 10_000}}
	reps := 7
	if r.o.short {
		vsExpired = [][2]int{{10_000, 1_000}, {10_000, 10_000}, {10_000, 100_000}}
		vsLive = [][2]int{{1_000, 10_000}, {10_000, 10_000}, {100_000, 10_000}}
		reps = 3
	}
	s := &report.Sweep{}
	r.rep.Sweep = s
	var err error
	if s.VsExpired, err = scaling.Sweep(ctx, vsExpired, reps); err != nil {
		return err
	}
	runtime.GC()
	// The live table of the largest point needs about 1.5 GiB: check first.
	for i, pr := range vsLive {
		if avail, err := scaling.MemAvailable(); err == nil && int64(pr[0])*400 > avail-(2<<30) {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("sweep against live buckets stopped before %d live buckets: %.1f GiB available", pr[0], float64(avail)/(1<<30)))
			vsLive = vsLive[:i]
			break
		}
	}
	if s.VsLive, err = scaling.Sweep(ctx, vsLive, reps); err != nil {
		return err
	}
	for _, p := range append(append([]scaling.SweepPoint(nil), s.VsExpired...), s.VsLive...) {
		r.logf("sweep live=%-9d expired=%-8d %10s %6.1f ns/deleted", p.Live, p.Expired, p.Took, p.NsPerDeleted())
	}
	runtime.GC()
	debug.FreeOSMemory()
	return nil
}

func (r *runner) sweepLatSection(ctx context.Context) error {
	expired, baseline := 1_000_000, 2*time.Second
	if r.o.short {
		expired, baseline = 100_000, time.Second
	}
	dir, err := r.sub("sweeplat")
	if err != nil {
		return err
	}
	sl, err := scaling.MeasureSweepLatency(ctx, dir, expired, 64, baseline)
	if err != nil {
		return err
	}
	r.rep.SweepLat = &report.SweepLat{SweepLatency: sl}
	r.logf("sweep latency: %d deleted in %s; p99 before %v, during %v", sl.Deleted, sl.SweepTook, sl.Baseline.P99, sl.During.P99)
	runtime.GC()
	debug.FreeOSMemory()
	return nil
}

func (r *runner) journalSection(ctx context.Context) error {
	j := &report.Journal{Goroutines: 64 * runtime.GOMAXPROCS(0), Rounds: 6, PerRound: time.Second}
	if r.o.short {
		j.Rounds, j.PerRound = 2, 250*time.Millisecond
	}
	dir, err := r.sub("journal")
	if err != nil {
		return err
	}
	pts, err := scaling.MeasureJournal(ctx, dir, j.Goroutines, j.Rounds, j.PerRound)
	if err != nil {
		return err
	}
	j.Points = pts
	r.rep.Journal = j
	for _, p := range pts {
		r.logf("journal %-8s %10.0f checks/s p50 %v p99 %v", p.Mode, p.PerSec(), p.P50, p.P99)
	}
	return nil
}

// gobenchSection runs the ratelimitd module's own benchmarks, one go test
// child process per invocation of gobench.Plan, in the module root.
func (r *runner) gobenchSection(ctx context.Context) error {
	p := &report.InPkg{}
	r.rep.InPkg = p
	plan := gobench.Plan(r.o.short)
	procs := runtime.GOMAXPROCS(0)
	var failed []string
	for i, inv := range plan {
		if ctx.Err() != nil {
			for _, rest := range plan[i:] {
				p.NotRun = append(p.NotRun, rest.CommandLine())
			}
			return fmt.Errorf("%d of %d go test runs not started: %w", len(plan)-i, len(plan), ctx.Err())
		}
		r.logf("gobench: %s (in %s)", inv.CommandLine(), r.rootDir)
		o := gobench.Exec(ctx, goBin(), r.rootDir, procs, inv, func(line string) {
			if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "--- FAIL") {
				r.logf("gobench:   %s", strings.Join(strings.Fields(line), " "))
			}
		})
		p.Runs = append(p.Runs, o)
		r.logf("gobench: %d result lines in %s", len(o.Output.Results), o.Wall.Round(time.Millisecond))
		if o.Err != "" {
			failed = append(failed, inv.Pkg+" "+inv.Bench+": "+firstLine(o.Err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d go test run(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}
