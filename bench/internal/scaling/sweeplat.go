package scaling

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/clock"
	"github.com/ratelimitd/ratelimitd/table"
)

// LatStats summarises the latencies of a set of checks.
type LatStats struct {
	Checks              int64
	Elapsed             time.Duration
	P50, P99, P999, Max time.Duration
}

// PerSec returns the checks per second.
func (s LatStats) PerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Checks) / s.Elapsed.Seconds()
}

func statsOf(lat []time.Duration, elapsed time.Duration) LatStats {
	slices.Sort(lat)
	q := func(f float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(float64(len(lat)-1)*f)]
	}
	s := LatStats{Checks: int64(len(lat)), Elapsed: elapsed, P50: q(0.5), P99: q(0.99), P999: q(0.999)}
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s
}

// SweepLatency is the latency of checks before and while the sweeper
// deletes a large number of expired buckets.
type SweepLatency struct {
	Expired    int // buckets made to expire at once
	Goroutines int // checking goroutines
	HotKeys    int // keys they check
	Journal    string
	Baseline   LatStats // checks finished in the quiet period before
	During     LatStats // checks in flight while the sweep ran
	SweepTook  time.Duration
	Deleted    int   // by the sweep rounds that ran after the jump
	Rounds     int   // sweep rounds (reports) it took
	Batches    int   // Sweeps (of at most 10,000 deletions each)
	Slices     int64 // holds of a shard by the sweep after the jump (System.SweepStats)
}

// offsetClock is the system clock moved forward by an offset that the
// benchmark can jump, so that a million buckets expire at one instant.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *offsetClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d, f)
}

// reportChan is a SweepObserver passing reports on without blocking.
type reportChan chan reportAt

type reportAt struct {
	r  actors.SweepReport
	at time.Time
}

func (c reportChan) SweepDone(r actors.SweepReport) {
	select {
	case c <- reportAt{r, time.Now()}:
	default:
	}
}

type sample struct{ start, end int64 } // ns since the run's origin

// sweepStart is when the deleting began, for the first round to delete
// anything, reported at at and lasting took by the System's clock: not
// before the jump, since a round that began before it and ran across it
// (a paced round takes a while) counts the two hours the clock jumped.
func sweepStart(at time.Time, took time.Duration, jump time.Time) time.Time {
	if start := at.Add(-took); start.After(jump) {
		return start
	}
	return jump
}

// MeasureSweepLatency starts a System as the daemon runs it (journal in
// dir with the default interval sync, the default sweep batch) with a
// sweep every second, fills it with expired-to-be buckets (one-hour
// windows), runs checks on hot keys from goroutines, and after a quiet
// period of baseline moves the clock two hours on, so that all of them
// expire at once and the next sweep deletes them, while the checks go on.
func MeasureSweepLatency(ctx context.Context, dir string, expired, goroutines int, baseline time.Duration) (SweepLatency, error) {
	const hotKeys = 1000
	out := SweepLatency{Expired: expired, Goroutines: goroutines, HotKeys: hotKeys, Journal: "interval (default)"}
	clock := &offsetClock{}
	// Start the clock one minute into an hour, so no window ends before the jump.
	now := time.Now()
	clock.off.Store(int64(now.Truncate(time.Hour).Add(time.Hour + time.Minute).Sub(now)))
	reports := make(reportChan, 1024)
	s, err := actors.Start(ctx, actors.Config{
		DataDir: dir, Clock: clock, SweepInterval: time.Second, SweepObserver: reports, MaxBuckets: -1,
	})
	if err != nil {
		return out, err
	}
	defer func() { _ = s.Stop(context.Background()) }()
	if err := fillSystem(ctx, s, 0, expired); err != nil {
		return out, err
	}
	hot := make([]table.Request, hotKeys)
	for i := range hot {
		hot[i] = table.Request{ID: "hot-" + strconv.Itoa(i), Policy: table.Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1}
	}

	origin := time.Now()
	ns := func(t time.Time) int64 { return t.Sub(origin).Nanoseconds() }
	var stop atomic.Bool
	var firstErr atomic.Value
	per := make([][]sample, goroutines)
	var wg sync.WaitGroup
	hardStop := origin.Add(baseline + 60*time.Second)
	for g := range goroutines {
		wg.Go(func() {
			mine := make([]sample, 0, 1<<14)
			for i := g * 7919; !stop.Load() && len(mine) < 50_000_000; i++ {
				t0 := time.Now()
				if t0.After(hardStop) {
					break
				}
				d, err := s.Check(ctx, hot[i%hotKeys])
				if err != nil || !d.Allowed {
					firstErr.CompareAndSwap(nil, fmt.Errorf("check during sweep: %+v, %v", d, err))
					break
				}
				mine = append(mine, sample{ns(t0), ns(time.Now())})
			}
			per[g] = mine
		})
	}
	halt := func() {
		stop.Store(true)
		wg.Wait()
	}

	// The quiet period: sweeps run but find nothing expired.
	select {
	case <-time.After(baseline):
	case <-ctx.Done():
		halt()
		return out, ctx.Err()
	}
	jump := time.Now()
	for drained := false; !drained; { // forget the quiet rounds
		select {
		case <-reports:
		default:
			drained = true
		}
	}
	slices0 := s.SweepStats().Slices
	clock.off.Add(int64(2 * time.Hour))

	var first, last time.Time
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for out.Deleted < expired {
		select {
		case ra := <-reports:
			if ra.r.Deleted == 0 {
				continue
			}
			if first.IsZero() {
				first = sweepStart(ra.at, ra.r.Duration, jump)
			}
			last = ra.at
			out.Deleted += ra.r.Deleted
			out.Rounds++
			out.Batches += ra.r.Batches
		case <-timeout.C:
			halt()
			return out, fmt.Errorf("sweep latency: %d of %d buckets swept after 60 s", out.Deleted, expired)
		case <-ctx.Done():
			halt()
			return out, ctx.Err()
		}
	}
	time.Sleep(200 * time.Millisecond) // checks after the sweep, outside the window
	halt()
	if err, _ := firstErr.Load().(error); err != nil {
		return out, err
	}
	out.SweepTook = last.Sub(first)
	out.Slices = s.SweepStats().Slices - slices0

	// Baseline: checks finished in the quiet period, after a warm-up of
	// a fifth of it. During: checks in flight at any time in the sweep.
	b0, b1 := ns(origin.Add(baseline/5)), ns(jump)
	w0, w1 := ns(first), ns(last)
	var base, during []time.Duration
	for _, m := range per {
		for _, x := range m {
			switch {
			case x.end >= b0 && x.end < b1:
				base = append(base, time.Duration(x.end-x.start))
			case x.start <= w1 && x.end >= w0:
				during = append(during, time.Duration(x.end-x.start))
			}
		}
	}
	if len(during) == 0 || len(base) == 0 {
		return out, errors.New("sweep latency: no checks measured in a period")
	}
	out.Baseline = statsOf(base, time.Duration(b1-b0))
	out.During = statsOf(during, max(time.Duration(w1-w0), time.Microsecond))
	runtime.GC()
	return out, nil
}
