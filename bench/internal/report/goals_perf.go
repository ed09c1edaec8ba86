package report

import (
	"fmt"
	"strings"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
)

// The goals of the performance issue (no stalls, the embedded path, the
// journal, memory), beside the goals above.
const (
	GoalEmbeddedAll   = "embedded-all"
	GoalCheckFloor    = "check-floor"
	GoalSweepStall    = "sweep-stall"
	GoalJournalRate   = "journal-rate"
	GoalJournalBytes  = "journal-bytes"
	GoalRecovery      = "recovery"
	GoalMemoryPacked  = "memory-packed"
	GoalSweepCostLive = "sweep-cost-live"
)

// perfGoals judges the run against the performance issue's goals.
func perfGoals(r *Report) []Goal {
	return []Goal{
		embeddedAllGoal(r.Embedded),
		checkFloorGoal(r.InPkg),
		sweepStallGoal(r.SweepLat),
		journalRateGoal(r.Journal),
		journalBytesGoal(r.InPkg),
		recoveryGoal(r.InPkg),
		memoryPackedGoal(r.Memory),
		sweepCostLiveGoal(r.Sweep),
	}
}

// embeddedAllGoal: ratelimitd ahead of every in-process library in every
// row of section 2 (every key count, distribution and goroutine count).
func embeddedAllGoal(e *Embedded) Goal {
	g := Goal{ID: GoalEmbeddedAll, Name: "embedded Check ahead of every in-process library in every row (every key count, distribution and goroutine count)", Target: "ahead", Status: NotMeasured}
	if e == nil {
		return g
	}
	worst, at, any := 0.0, "", false
	for _, k := range e.Keys {
		for _, c := range e.cases(k) {
			rl := e.find(RatelimitdLimiter, k, c.dist, c.goroutines)
			if rl == nil || rl.Error != "" || rl.PerSec() == 0 {
				continue
			}
			best, bestName := 0.0, ""
			for _, name := range e.Limiters {
				if isRatelimitd(name) {
					continue
				}
				if o := e.find(name, k, c.dist, c.goroutines); o != nil && o.Error == "" && o.PerSec() > best {
					best, bestName = o.PerSec(), name
				}
			}
			if best == 0 {
				continue
			}
			if x := rl.PerSec() / best; !any || x < worst {
				worst, at = x, fmt.Sprintf("%s keys %s g=%d: %s vs %s %s/s", count(k), c.dist, c.goroutines, rate(rl.PerSec()), shortLimiter(bestName), rate(best))
			}
			any = true
		}
	}
	if any {
		g.Status, g.Measured = status(worst >= 1), fmt.Sprintf("worst row ratelimitd ÷ fastest other = %.2f× (%s)", worst, at)
	}
	return g
}

// checkFloorGoal: BenchmarkCheck's system at p=1 at least half its
// map+mutex floor's checks/s.
func checkFloorGoal(p *InPkg) Goal {
	g := Goal{ID: GoalCheckFloor, Name: "`BenchmarkCheck` system ≥ 0.5× its map+mutex floor (checks/s, p=1)", Target: "≥ 0.5×", Status: NotMeasured}
	if x, sys, floor, ok := statRatio(p, gobench.FamCheck, "BenchmarkCheck/system/p=1", "BenchmarkCheck/floor=map+mutex/p=1", "checks/s"); ok {
		g.Status, g.Measured = status(x >= 0.5), fmt.Sprintf("%s vs %s checks/s = %.2f×", rate(sys), rate(floor), x)
	}
	return g
}

// sweepStallGoal: while a large sweep runs, checks keep at least half
// their throughput and at most twice their p99 from before it.
func sweepStallGoal(s *SweepLat) Goal {
	g := Goal{ID: GoalSweepStall, Name: "checks while a large sweep runs: throughput ≥ 0.5× and p99 ≤ 2× before it", Target: "≥ 0.5×, ≤ 2×", Status: NotMeasured}
	if s == nil || s.Baseline.PerSec() == 0 || s.Baseline.P99 == 0 || s.During.Checks == 0 {
		return g
	}
	rate := s.During.PerSec() / s.Baseline.PerSec()
	p99 := float64(s.During.P99) / float64(s.Baseline.P99)
	g.Status = status(rate >= 0.5 && p99 <= 2)
	g.Measured = fmt.Sprintf("%s expired at once: throughput %.2f×, p99 %s vs %s = %.2f×", count(s.Expired), rate, dur(s.During.P99), dur(s.Baseline.P99), p99)
	return g
}

// journalRateGoal: section 3d's interval journal at least 0.85× the
// checks/s without a journal.
func journalRateGoal(j *Journal) Goal {
	g := Goal{ID: GoalJournalRate, Name: "journal sync `interval` ≥ 0.85× no journal (checks/s, section 3d)", Target: "≥ 0.85×", Status: NotMeasured}
	if j == nil {
		return g
	}
	var mem, iv float64
	for _, p := range j.Points {
		switch p.Mode {
		case "memory":
			mem = p.PerSec()
		case "interval":
			iv = p.PerSec()
		}
	}
	if mem > 0 && iv > 0 {
		g.Status, g.Measured = status(iv/mem >= 0.85), fmt.Sprintf("%s vs %s checks/s = %.2f×", rate(iv), rate(mem), iv/mem)
	}
	return g
}

// journalBytesGoal: at most 16 journal bytes per check of a live bucket
// (BenchmarkCheckJournal: 1k keys, every check a repeat hit).
func journalBytesGoal(p *InPkg) Goal {
	g := Goal{ID: GoalJournalBytes, Name: "journal bytes per repeat hit on a live bucket ≤ 16 (`BenchmarkCheckJournal/sync=interval`)", Target: "≤ 16 B", Status: NotMeasured}
	if b, ok := rowStat(p, gobench.FamCheckJournal, "BenchmarkCheckJournal/sync=interval", "journal-B/check"); ok {
		g.Status, g.Measured = status(b.Median <= 16), fmt.Sprintf("%.1f B per check", b.Median)
	}
	return g
}

// recoveryGoal: a start replays at least 3M buckets/s.
func recoveryGoal(p *InPkg) Goal {
	g := Goal{ID: GoalRecovery, Name: "recovery on start ≥ 3M buckets/s (`BenchmarkRecovery`)", Target: "≥ 3M buckets/s", Status: NotMeasured}
	s := p.Family(gobench.FamRecovery)
	if s == nil {
		return g
	}
	for _, r := range s.Rows {
		if !strings.HasPrefix(r.Name, "BenchmarkRecovery/") {
			continue
		}
		if b, ok := r.Stat("buckets/s"); ok {
			g.Status, g.Measured = status(b.Median >= 3e6), fmt.Sprintf("%s buckets/s (%s)", rate(b.Median), strings.TrimPrefix(r.Name, "BenchmarkRecovery/"))
		}
	}
	return g
}

// memoryPackedGoal: at the largest point of the curve, at most 64 bytes
// per live bucket beyond its id's length (the mean of the curve's ids),
// and below Redis.
func memoryPackedGoal(m *Memory) Goal {
	g := Goal{ID: GoalMemoryPacked, Name: "memory per live bucket ≤ 64 B + the id's length, at the curve's largest point", Target: "≤ 64 B + id", Status: NotMeasured}
	if m == nil || len(m.Ratelimitd.Points) == 0 {
		return g
	}
	last := m.Ratelimitd.Points[len(m.Ratelimitd.Points)-1]
	id := meanIDLen(last.Buckets)
	g.Status = status(last.PerBucket <= 64+id)
	g.Measured = fmt.Sprintf("at %s buckets: %.1f B, ids of %.1f B on average: %.1f B beyond the id", count(last.Buckets), last.PerBucket, id, last.PerBucket-id)
	return g
}

// meanIDLen is the mean length of the ids of keys 0 to n-1 (keys.ID).
func meanIDLen(n int) float64 {
	if n <= 0 {
		return 0
	}
	total := 0
	for lo := 0; lo < n; {
		hi := max(9, lo*10-1) // the last number with as many digits as lo
		total += (min(hi, n-1) - lo + 1) * len(keys.ID(lo))
		lo = hi + 1
	}
	return float64(total) / float64(n)
}

// sweepCostLiveGoal: the cost per deleted bucket beside the most live
// buckets at most twice the one beside the fewest.
func sweepCostLiveGoal(s *Sweep) Goal {
	g := Goal{ID: GoalSweepCostLive, Name: "sweep cost per deleted bucket, fewest → most live buckets, ≤ 2×", Target: "≤ 2×", Status: NotMeasured}
	if s == nil || len(s.VsLive) < 2 {
		return g
	}
	first, last := s.VsLive[0], s.VsLive[len(s.VsLive)-1]
	if first.NsPerDeleted() == 0 {
		return g
	}
	x := last.NsPerDeleted() / first.NsPerDeleted()
	g.Status, g.Measured = status(x <= 2), fmt.Sprintf("%.1f ns beside %s live vs %.1f ns beside %s = %.2f×", last.NsPerDeleted(), count(last.Live), first.NsPerDeleted(), count(first.Live), x)
	return g
}

// statRatio returns a row's median of unit ÷ a baseline row's, in family.
func statRatio(p *InPkg, family, row, base, unit string) (x, v, b float64, ok bool) {
	rv, ok1 := rowStat(p, family, row, unit)
	bv, ok2 := rowStat(p, family, base, unit)
	if !ok1 || !ok2 || bv.Median == 0 {
		return 0, 0, 0, false
	}
	return rv.Median / bv.Median, rv.Median, bv.Median, true
}

// rowStat returns the figures for unit of a row of family.
func rowStat(p *InPkg, family, row, unit string) (gobench.Stat, bool) {
	s := p.Family(family)
	if s == nil {
		return gobench.Stat{}, false
	}
	r, ok := s.Row(row)
	if !ok {
		return gobench.Stat{}, false
	}
	return r.Stat(unit)
}
