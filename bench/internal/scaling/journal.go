package scaling

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/table"
)

// JournalPoint is System.Check in one journal mode.
type JournalPoint struct {
	Mode string // "memory" (no journal), "none", "interval", "always"
	LatStats
}

// JournalModes is the list compared, the memory-only baseline first.
var JournalModes = []string{"memory", "none", "interval", "always"}

// MeasureJournal starts one System per mode (each journal in its own
// folder under dir, default interval of 100 ms) and runs Check from
// goroutines on 1k keys, all admitted, in rounds of per, alternating the
// modes each round.
func MeasureJournal(ctx context.Context, dir string, goroutines, rounds int, per time.Duration) ([]JournalPoint, error) {
	systems := make([]*actors.System, len(JournalModes))
	defer func() {
		for _, s := range systems {
			if s != nil {
				_ = s.Stop(context.Background())
			}
		}
	}()
	for i, mode := range JournalModes {
		cfg := actors.Config{}
		if mode != "memory" {
			m, err := actors.ParseSyncMode(mode)
			if err != nil {
				return nil, err
			}
			cfg.DataDir, cfg.JournalSync = filepath.Join(dir, mode), m
		}
		s, err := actors.Start(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("journal %s: %w", mode, err)
		}
		systems[i] = s
	}
	reqs := make([]table.Request, 1000)
	for i := range reqs {
		reqs[i] = table.Request{ID: "user-" + strconv.Itoa(i), Policy: table.Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1}
	}
	lat := make([][]time.Duration, len(JournalModes))
	elapsed := make([]time.Duration, len(JournalModes))
	// A warm-up of a round each: files mapped, tables grown.
	for i, s := range systems {
		if _, _, err := runChecks(ctx, s, reqs, goroutines, per/2); err != nil {
			return nil, fmt.Errorf("journal %s: %w", JournalModes[i], err)
		}
	}
	for r := range rounds {
		for k := range systems {
			i := (k + r) % len(systems)
			l, took, err := runChecks(ctx, systems[i], reqs, goroutines, per)
			if err != nil {
				return nil, fmt.Errorf("journal %s: %w", JournalModes[i], err)
			}
			lat[i] = append(lat[i], l...)
			elapsed[i] += took
		}
	}
	out := make([]JournalPoint, len(JournalModes))
	for i, mode := range JournalModes {
		out[i] = JournalPoint{Mode: mode, LatStats: statsOf(lat[i], elapsed[i])}
	}
	return out, nil
}

// runChecks runs Check on reqs from goroutines for d and returns each
// check's latency and the time it took.
func runChecks(ctx context.Context, s *actors.System, reqs []table.Request, goroutines int, d time.Duration) ([]time.Duration, time.Duration, error) {
	var stop atomic.Bool
	var firstErr atomic.Value
	per := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := range goroutines {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1<<12)
			for i := g * 7919; !stop.Load() && len(mine) < 20_000_000; i++ {
				t0 := time.Now()
				if t0.After(deadline) || ctx.Err() != nil {
					break
				}
				dec, err := s.Check(ctx, reqs[i%len(reqs)])
				if err != nil || !dec.Allowed {
					firstErr.CompareAndSwap(nil, fmt.Errorf("check: %+v, %v", dec, err))
					stop.Store(true)
					break
				}
				mine = append(mine, time.Since(t0))
			}
			per[g] = mine
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var all []time.Duration
	for _, m := range per {
		all = append(all, m...)
	}
	return all, took, nil
}
