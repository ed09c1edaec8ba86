package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// RESPHeading is the heading of the Redis protocol section of RESULTS.md.
const RESPHeading = "## 5. The Redis protocol, side by side"

// RESP is section 5: Redis protocol servers driven by one load client,
// redis-benchmark, with the same connections and pipelines for each.
type RESP struct {
	Client    string // redis-benchmark's version
	Conns     int
	Keys      int   // distinct keys (redis-benchmark -r)
	Pipelines []int // redis-benchmark -P, in the order shown
	Rounds    int
	// PerRound is the length each round's run aims at: its requests are
	// the warm-up's rate times PerRound (0: fixed requests, no warm-up).
	PerRound time.Duration
	Peers    []RESPPeer
	// Error is why the section has no numbers (no redis-benchmark).
	Error string
}

// RESPPeer is one server and the command redis-benchmark sends it.
type RESPPeer struct {
	Name      string // as shown
	Short     string // the role, one of the ShortRESP… constants
	Ceiling   bool   // plain INCR
	Command   string // as given to redis-benchmark
	CPUSource string // whose CPU ServerCPU is
	Runs      []RESPRun
	Error     string // why the peer has no numbers
	Verified  string // what its counters said after the runs
}

// RESPRun is one peer at one pipeline depth, over every round.
type RESPRun struct {
	Pipeline  int
	Requests  int64         // over the measured rounds
	Elapsed   time.Duration // requests ÷ redis-benchmark's rps, summed over the rounds
	P50, P99  time.Duration // redis-benchmark's, the median over the rounds
	ServerCPU float64       // seconds, over the measured rounds
	ClientCPU float64       // redis-benchmark's own seconds
	// RoundRPS is redis-benchmark's requests/s in each measured round, in
	// the rounds' order: the pairs of respRatio.
	RoundRPS []float64
	Error    string
}

// respRatio is ours ÷ theirs in requests/s: the median over the rounds of
// each round's ratio when both ran every round, else the ratio of the
// totals. The runs one round compares follow one another within seconds,
// while the speed of a shared machine drifts over minutes (the same
// server's runs a minute apart differ by half); pairing them within a
// round cancels the drift that the totals keep.
func respRatio(ours, theirs *RESPRun) float64 {
	n := len(ours.RoundRPS)
	if n > 0 && n == len(theirs.RoundRPS) {
		qs := make([]float64, 0, n)
		for i, t := range theirs.RoundRPS {
			if t > 0 {
				qs = append(qs, ours.RoundRPS[i]/t)
			}
		}
		if len(qs) == n {
			slices.Sort(qs)
			if n%2 == 1 {
				return qs[n/2]
			}
			return (qs[n/2-1] + qs[n/2]) / 2
		}
	}
	return ours.ReqPerSec() / theirs.ReqPerSec()
}

// The Redis protocol peers' roles, as RESPPeer.Short.
const (
	ShortRESPRatelimitd = "ratelimitd CL.THROTTLE"
	ShortRESPFixedLua   = "redis EVALSHA fixed window"
	ShortRESPGCRALua    = "redis EVALSHA GCRA"
	ShortRESPIncr       = "redis INCR"
)

// Goal IDs of the Redis protocol section.
const (
	GoalRESPPipelined = "resp-pipelined"
	GoalRESPSingle    = "resp-single"
)

// ReqPerSec returns requests per second.
func (r *RESPRun) ReqPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// OK reports whether the run has numbers.
func (r *RESPRun) OK() bool { return r.Error == "" && r.Requests > 0 && r.Elapsed > 0 }

// Run returns the peer's run at pipeline, if it has numbers.
func (p *RESPPeer) Run(pipeline int) *RESPRun {
	if p == nil || p.Error != "" {
		return nil
	}
	for i := range p.Runs {
		if p.Runs[i].Pipeline == pipeline && p.Runs[i].OK() {
			return &p.Runs[i]
		}
	}
	return nil
}

// Peer returns the peer with the given role.
func (x *RESP) Peer(short string) *RESPPeer {
	if x == nil {
		return nil
	}
	for i := range x.Peers {
		if x.Peers[i].Short == short {
			return &x.Peers[i]
		}
	}
	return nil
}

// hardestLua returns, at pipeline, the run of the Lua peer ours compares
// worst against (respRatio), and that ratio.
func (x *RESP) hardestLua(pipeline int, ours *RESPRun) (*RESPPeer, *RESPRun, float64) {
	var bp *RESPPeer
	var br *RESPRun
	var bq float64
	for _, s := range []string{ShortRESPFixedLua, ShortRESPGCRALua} {
		p := x.Peer(s)
		if r := p.Run(pipeline); r != nil {
			if q := respRatio(ours, r); br == nil || q < bq {
				bp, br, bq = p, r, q
			}
		}
	}
	return bp, br, bq
}

// respGoals judges the two goals: CL.THROTTLE at least 1.5× (at
// pipeline 16) and 1× (at pipeline 1) the requests/s of Redis running
// each Lua limiter.
func respGoals(x *RESP) []Goal {
	var gs []Goal
	for _, c := range []struct {
		id       string
		pipeline int
		target   float64
	}{{GoalRESPPipelined, 16, 1.5}, {GoalRESPSingle, 1, 1}} {
		g := Goal{ID: c.id, Target: fmt.Sprintf("≥ %g×", c.target), Status: NotMeasured,
			Name: fmt.Sprintf("Redis protocol: ratelimitd CL.THROTTLE ≥ %g× the req/s of redis-server running the Lua fixed window and the Lua GCRA by EVALSHA, pipelines of %d", c.target, c.pipeline)}
		ours := x.Peer(ShortRESPRatelimitd).Run(c.pipeline)
		var parts []string
		worst, any := 0.0, false
		for _, s := range []string{ShortRESPFixedLua, ShortRESPGCRALua} {
			theirs := x.Peer(s).Run(c.pipeline)
			if ours == nil || theirs == nil {
				continue
			}
			q := respRatio(ours, theirs)
			if !any || q < worst {
				worst = q
			}
			any = true
			parts = append(parts, fmt.Sprintf("vs %s %s req/s = %.2f×", s, rate(theirs.ReqPerSec()), q))
		}
		if any {
			g.Status = status(worst >= c.target)
			g.Measured = fmt.Sprintf("%s req/s %s", rate(ours.ReqPerSec()), strings.Join(parts, ", "))
		}
		gs = append(gs, g)
	}
	return gs
}

// respRows are the README block's rows of the section: at each pipeline,
// CL.THROTTLE against the Lua limiter it compares worst against (the goal)
// and against INCR.
func respRows(r *Report, goal func(id string) string) []readmeRow {
	x := r.RESP
	var rows []readmeRow
	for _, c := range []struct {
		pipeline int
		goal     string
	}{{16, GoalRESPPipelined}, {1, GoalRESPSingle}} {
		client := "`redis-benchmark`"
		if x != nil && x.Conns > 0 {
			client += fmt.Sprintf(", %d connections", x.Conns)
		}
		what := fmt.Sprintf("Redis protocol `CL.THROTTLE`, pipelines of %d (%s), vs `redis-server` running the Lua limiter it compares worst against, by `EVALSHA`", c.pipeline, client)
		lua := readmeRow{what: what, goal: goal(c.goal)}
		incr := readmeRow{what: fmt.Sprintf("Redis protocol `CL.THROTTLE`, pipelines of %d, vs `redis-server` answering plain `INCR` (the ceiling)", c.pipeline)}
		ours := x.Peer(ShortRESPRatelimitd).Run(c.pipeline)
		if ours == nil {
			lua.ours, incr.ours = notMeasured, notMeasured
			rows = append(rows, lua, incr)
			continue
		}
		if p, best, q := x.hardestLua(c.pipeline, ours); best != nil {
			lua.ours = rate(ours.ReqPerSec()) + " req/s"
			lua.base = p.Short + ": " + rate(best.ReqPerSec()) + " req/s"
			lua.ratio = ratio(q)
		} else {
			lua.ours = notMeasured
		}
		if ceil := x.Peer(ShortRESPIncr).Run(c.pipeline); ceil != nil {
			incr.ours = rate(ours.ReqPerSec()) + " req/s"
			incr.base = "INCR: " + rate(ceil.ReqPerSec()) + " req/s"
			incr.ratio = ratio(respRatio(ours, ceil))
		} else {
			incr.ours = notMeasured
		}
		rows = append(rows, lua, incr)
	}
	return rows
}

func (b *md) respSection(r *Report, charts []string) {
	b.p("%s", RESPHeading)
	b.p("")
	if b.skipped(r, "resp") || r.RESP == nil {
		return
	}
	x := r.RESP
	if x.Error != "" {
		b.p("Not measured: %s.", x.Error)
		b.p("")
		return
	}
	pipes := make([]string, len(x.Pipelines))
	for i, p := range x.Pipelines {
		pipes[i] = fmt.Sprint(p)
	}
	b.p("One load client for every server, %s (a child process, one thread), with %d connections and", x.Client, x.Conns)
	b.p("pipelines of %s requests (`-c %d -P N`), over %s keys (`-r %d`, `user:__rand_int__`); every limiter admits", strings.Join(pipes, " and "), x.Conns, count(x.Keys), x.Keys)
	b.p("and counts every request (a budget no run reaches). ratelimitd is the daemon (`--redis-listen`, a journal,")
	b.p("sync `interval`); Redis is one redis-server, no persistence, running the seed's fixed window (`INCR`, then")
	b.p("`PEXPIRE` on the first hit, `PTTL`) and a GCRA (`GET`, `TIME`, `SET … PX`, redis-cell's reply) as Lua")
	b.p("scripts by `EVALSHA`, and plain `INCR`, the least a Redis does per request.")
	if x.PerRound > 0 {
		b.p("Each run is calibrated by a warm-up run to last about %s; %d rounds, the order rotating each round.", x.PerRound, x.Rounds)
	} else {
		b.p("%d round(s) of a fixed number of requests, no warm-up.", x.Rounds)
	}
	b.p("req/s are over every round; the ratios (÷ INCR, ratelimitd ÷ this, and the goals') are the median over the")
	b.p("rounds of each round's ratio: the runs one round compares follow one another within seconds, while the")
	b.p("speed of a shared machine drifts over minutes. Latencies are redis-benchmark's own (the median over the")
	b.p("rounds); server CPU is read from `/proc/PID/stat`.")
	b.p("")
	var rows [][]string
	for _, p := range x.Peers {
		for _, pipe := range x.Pipelines {
			if p.Error != "" {
				rows = append(rows, []string{p.Name, "`" + mdCell(p.Command) + "`", fmt.Sprint(pipe), "—", "—", "—", "—", "—", "—", "—", "—", "not run: " + mdCell(p.Error)})
				continue
			}
			run := p.Run(pipe)
			if run == nil {
				why := "no run"
				for _, q := range p.Runs {
					if q.Pipeline == pipe && q.Error != "" {
						why = q.Error
					}
				}
				rows = append(rows, []string{p.Name, "`" + mdCell(p.Command) + "`", fmt.Sprint(pipe), "—", "—", "—", "—", "—", "—", "—", "—", "failed: " + mdCell(why)})
				continue
			}
			vsCeil, oursVs := "—", "—"
			if c := x.Peer(ShortRESPIncr).Run(pipe); c != nil {
				vsCeil = fmt.Sprintf("%.2f×", respRatio(run, c))
			}
			if o := x.Peer(ShortRESPRatelimitd).Run(pipe); o != nil && p.Short != ShortRESPRatelimitd {
				oursVs = fmt.Sprintf("%.2f×", respRatio(o, run))
			}
			per1k := func(s float64) string { return fmt.Sprintf("%.3f", s/float64(run.Requests)*1000) }
			rows = append(rows, []string{p.Name, "`" + mdCell(p.Command) + "`", fmt.Sprint(pipe), rate(run.ReqPerSec()), vsCeil, oursVs,
				dur(run.P50), dur(run.P99), per1k(run.ServerCPU), p.CPUSource, per1k(run.ClientCPU), ""})
		}
	}
	b.table([]string{"server", "command", "pipeline", "req/s", "÷ INCR", "ratelimitd ÷ this", "p50", "p99",
		"server CPU s per 1k req", "server CPU read from", "client CPU s per 1k req", "note"}, rows)
	for _, p := range x.Peers {
		if p.Error == "" && p.Verified != "" {
			b.p("- %s: %s", p.Name, p.Verified)
		}
	}
	b.p("")
	b.chart(charts, "resp_throughput.svg", "Redis protocol requests per second, per server and pipeline")
}

// respBars: requests per second, grouped by pipeline, a bar per server.
func respBars(x *RESP) (*plot.Plot, vg.Length, vg.Length, error) {
	p := newPlot(fmt.Sprintf("Redis protocol requests/s (thousands), redis-benchmark, %d connections", x.Conns), "pipeline", "thousand requests per second")
	n := len(x.Peers)
	w := vg.Points(max(6, 80/float64(max(n, 1))))
	for i, pe := range x.Peers {
		vals := make(plotter.Values, len(x.Pipelines))
		for j, pipe := range x.Pipelines {
			if r := pe.Run(pipe); r != nil {
				vals[j] = r.ReqPerSec() / 1e3
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, 0, 0, err
		}
		bars.Color = palette(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(pe.Short, bars)
	}
	names := make([]string, len(x.Pipelines))
	for i, pipe := range x.Pipelines {
		names[i] = fmt.Sprintf("-P %d", pipe)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(x.Pipelines))-0.4
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(10)
	p.Y.Min = 0
	p.Y.Max *= 1.45
	p.Y.Tick.Marker = linearTicks{}
	return p, 7 * vg.Inch, 4.5 * vg.Inch, nil
}

// hasRESPRuns reports whether the section has a run to chart.
func hasRESPRuns(x *RESP) bool {
	if x == nil {
		return false
	}
	for i := range x.Peers {
		for _, pipe := range x.Pipelines {
			if x.Peers[i].Run(pipe) != nil {
				return true
			}
		}
	}
	return false
}
