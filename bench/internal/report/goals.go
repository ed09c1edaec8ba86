package report

import (
	"fmt"
	"strings"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
)

// Goal statuses.
const (
	Pass        = "PASS"
	Miss        = "MISS"
	NotMeasured = "NOT MEASURED"
)

// Goal is one of the targets, judged on this run's numbers.
type Goal struct {
	ID       string // one of the Goal… constants
	Name     string
	Target   string // the target, in the words of Name: "≥ 0.85×"
	Status   string // Pass, Miss or NotMeasured
	Measured string // the numbers it was judged on
}

// Goal IDs, in the order Goals returns them.
const (
	GoalHTTPBare       = "http-bare"
	GoalHTTPGubernator = "http-gubernator"
	GoalBatches        = "batches"
	GoalEmbedded1k     = "embedded-1k"
	GoalEmbedded1M     = "embedded-1M"
	GoalMemory         = "memory"
	GoalTopKeys        = "top-keys"
)

// Peer roles, as HTTPPeer.Short.
const (
	ShortBare       = "bare"
	ShortGet        = "ratelimitd GET"
	ShortBatch      = "ratelimitd POST×100"
	ShortGubernator = "gubernator"
	ShortRedis      = "redis+lua"
)

// RatelimitdLimiter is the embedded limiter's name in Embedded.Limiters,
// the one the goals are measured on; RatelimitdHandle is ratelimitd's
// other entry there, its Limiter (a policy made once).
const (
	RatelimitdLimiter = "ratelimitd actors.System.Check"
	RatelimitdHandle  = "ratelimitd actors.Limiter.Allow"
)

// isRatelimitd reports whether the embedded limiter name is one of ratelimitd's,
// which no row compares ratelimitd against.
func isRatelimitd(name string) bool { return strings.HasPrefix(name, "ratelimitd ") }

// Peer returns the peer with the given Short label, if it has numbers.
func (h *HTTP) Peer(short string) *HTTPPeer {
	if h == nil {
		return nil
	}
	return peerOf(h.Peers, short)
}

// peerOf returns the peer of peers with the given Short label, if it has
// numbers.
func peerOf(peers []HTTPPeer, short string) *HTTPPeer {
	for i := range peers {
		if peers[i].Short == short && peers[i].OK() {
			return &peers[i]
		}
	}
	return nil
}

func status(ok bool) string {
	if ok {
		return Pass
	}
	return Miss
}

// Goals judges the run against the goals. They are reported,
// never asserted.
func Goals(r *Report) []Goal {
	var gs []Goal
	bare, get, batch, gub := r.HTTP.Peer(ShortBare), r.HTTP.Peer(ShortGet), r.HTTP.Peer(ShortBatch), r.HTTP.Peer(ShortGubernator)

	g := Goal{ID: GoalHTTPBare, Name: "ratelimitd HTTP GET /check_rate ≥ 0.90× the bare net/http handler (req/s)", Target: "≥ 0.90×", Status: NotMeasured}
	if bare != nil && get != nil {
		x := get.ReqPerSec() / bare.ReqPerSec()
		g.Status, g.Measured = status(x >= 0.90), fmt.Sprintf("%s vs %s req/s = %.2f×", rate(get.ReqPerSec()), rate(bare.ReqPerSec()), x)
	}
	gs = append(gs, g)

	g = Goal{ID: GoalHTTPGubernator, Name: "ratelimitd HTTP ≥ 4× gubernator's HTTP (req/s, one check per request)", Target: "≥ 4×", Status: NotMeasured}
	if get != nil && gub != nil {
		x := get.ReqPerSec() / gub.ReqPerSec()
		g.Status, g.Measured = status(x >= 4), fmt.Sprintf("%s vs %s req/s = %.2f×", rate(get.ReqPerSec()), rate(gub.ReqPerSec()), x)
	}
	gs = append(gs, g)

	g = Goal{ID: GoalBatches, Name: "batches of 100 over HTTP ≥ 1M checks/s", Target: "≥ 1M checks/s", Status: NotMeasured}
	if batch != nil {
		g.Status, g.Measured = status(batch.ChecksPerSec() >= 1e6), fmt.Sprintf("%s checks/s (%s req/s)", rate(batch.ChecksPerSec()), rate(batch.ReqPerSec()))
	}
	gs = append(gs, g)

	gs = append(gs, embeddedGoal(r.Embedded, 1_000, false), embeddedGoal(r.Embedded, 1_000_000, true))

	g = Goal{ID: GoalMemory, Name: "memory per live bucket below Redis's memory per key", Target: "below Redis", Status: NotMeasured}
	if m := r.Memory; m != nil {
		if n, rl, rd, ok := largestCommon(m); ok {
			g.Status, g.Measured = status(rl < rd), fmt.Sprintf("at %s buckets: %.0f B vs %.0f B = %.2f×", count(n), rl, rd, rl/rd)
		}
	}
	gs = append(gs, g)
	gs = append(gs, respGoals(r.RESP)...)
	gs = append(gs, clusterGoal(r.Cluster))
	gs = append(gs, rlsGoals(r)...)
	gs = append(gs, perfGoals(r)...)
	return append(gs, topKeysGoal(r.InPkg))
}

// topKeysPrefix names BenchmarkCheck's rows with top-keys tracking, each
// paired with a System without it in alternating rounds; the rest of a
// name is the goroutine count (p=N).
const topKeysPrefix = "BenchmarkCheck/system+topkeys/"

// topKeysGoal: BenchmarkCheck with top-keys tracking at least 0.95× its
// checks/s without (x-system, the median of the paired rounds' ratios),
// for every goroutine count of the run, with no allocation per check.
func topKeysGoal(p *InPkg) Goal {
	g := Goal{ID: GoalTopKeys, Name: "top-keys tracking on the check path: `BenchmarkCheck` with it ≥ 0.95× without it (checks/s in alternating rounds, every p), 0 allocations per check", Target: "≥ 0.95×, 0 allocs", Status: NotMeasured}
	s := p.Family(gobench.FamCheck)
	if s == nil {
		return g
	}
	var parts []string
	worst, allocs, any := 0.0, 0.0, false
	for _, r := range s.Rows {
		rest, ok := strings.CutPrefix(r.Name, topKeysPrefix)
		if !ok {
			continue
		}
		x, ok1 := r.Stat("x-system")
		with, ok2 := r.Stat("checks/s")
		without, ok3 := r.Stat("without-checks/s")
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		if !any || x.Median < worst {
			worst = x.Median
		}
		a, _ := r.Stat("allocs/op")
		allocs = max(allocs, a.Median)
		any = true
		parts = append(parts, fmt.Sprintf("%s: %s vs %s checks/s, %.2f×", rest, rate(with.Median), rate(without.Median), x.Median))
	}
	if !any {
		return g
	}
	g.Status = status(worst >= 0.95 && allocs == 0)
	g.Measured = fmt.Sprintf("worst case %.2f×, %s allocs/op (%s)", worst, metric(allocs, "allocs/op"), strings.Join(parts, "; "))
	return g
}

// embeddedGoal: at keys, ratelimitd within 3× of the fastest library in
// every case (!ahead), or ahead of every library in every case (ahead).
func embeddedGoal(e *Embedded, keys int, ahead bool) Goal {
	g := Goal{ID: GoalEmbedded1k, Name: "embedded Check within 3× of the fastest in-process library at 1k keys (every distribution and goroutine count)", Target: "within 3×", Status: NotMeasured}
	if ahead {
		g.ID, g.Name, g.Target = GoalEmbedded1M, "embedded Check ahead of every in-process library at 1M keys (every distribution and goroutine count)", "ahead"
	}
	if e == nil {
		return g
	}
	var parts []string
	worst, any := 0.0, false
	for _, c := range e.cases(keys) {
		rl, best, bestName := e.find(RatelimitdLimiter, keys, c.dist, c.goroutines), 0.0, ""
		if rl == nil || rl.Error != "" {
			continue
		}
		for _, name := range e.Limiters {
			if isRatelimitd(name) {
				continue
			}
			if o := e.find(name, keys, c.dist, c.goroutines); o != nil && o.Error == "" && o.PerSec() > best {
				best, bestName = o.PerSec(), name
			}
		}
		if best == 0 || rl.PerSec() == 0 {
			continue
		}
		var x float64
		if ahead {
			x = rl.PerSec() / best // ≥ 1 is ahead
			if !any || x < worst {
				worst = x
			}
		} else {
			x = best / rl.PerSec() // ≤ 3 is within
			if !any || x > worst {
				worst = x
			}
		}
		any = true
		parts = append(parts, fmt.Sprintf("%s g=%d: %s vs %s %s/s", c.dist, c.goroutines, rate(rl.PerSec()), shortLimiter(bestName), rate(best)))
	}
	if !any {
		return g
	}
	if ahead {
		g.Status = status(worst > 1)
		g.Measured = fmt.Sprintf("worst case ratelimitd ÷ fastest other = %.2f× (%s)", worst, strings.Join(parts, "; "))
	} else {
		g.Status = status(worst <= 3)
		g.Measured = fmt.Sprintf("worst case fastest other ÷ ratelimitd = %.2f× (%s)", worst, strings.Join(parts, "; "))
	}
	return g
}

type embCase struct {
	dist       string
	goroutines int
}

// cases returns the (distribution, goroutines) cases measured at keys, in
// the order first seen.
func (e *Embedded) cases(keys int) []embCase {
	var cs []embCase
	seen := map[embCase]bool{}
	for _, r := range e.Results {
		c := embCase{r.Dist, r.Goroutines}
		if r.Keys == keys && !seen[c] {
			seen[c] = true
			cs = append(cs, c)
		}
	}
	return cs
}

func (e *Embedded) find(limiter string, keys int, dist string, goroutines int) *EmbeddedResult {
	for i := range e.Results {
		r := &e.Results[i]
		if r.Limiter == limiter && r.Keys == keys && r.Dist == dist && r.Goroutines == goroutines {
			return r
		}
	}
	return nil
}

// largestCommon returns the largest bucket count both curves measured.
func largestCommon(m *Memory) (n int, rl, rd float64, ok bool) {
	for _, p := range m.Ratelimitd.Points {
		for _, q := range m.Redis.Points {
			if p.Buckets == q.Buckets && p.Buckets >= n {
				n, rl, rd, ok = p.Buckets, p.PerBucket, q.PerBucket, true
			}
		}
	}
	return
}

func shortLimiter(name string) string {
	if i := strings.IndexAny(name, " "); i > 0 {
		return name[:i]
	}
	return name
}
