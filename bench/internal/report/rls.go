package report

import (
	"fmt"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
)

// RLS is the section rls: Envoy's ShouldRateLimit over gRPC, ratelimitd
// beside envoyproxy/ratelimit (the reference, with Redis), one descriptor
// per request, the same load client; and ratelimitd's HTTP GET
// /check_rate, same daemon, in the same rounds, for what the gRPC check
// costs beside it.
type RLS struct {
	Streams  int // concurrent calls (HTTP: connections)
	Conns    int // gRPC connections they share
	Keys     int
	Rounds   int
	PerRound time.Duration
	Warmup   time.Duration
	// Peers are reported as HTTP peers are; Short is one of ShortRLS*.
	Peers []HTTPPeer
}

// RLS peer roles, as HTTPPeer.Short.
const (
	ShortRLS     = "ratelimitd gRPC"
	ShortRLSRef  = "envoyproxy/ratelimit"
	ShortRLSHTTP = "ratelimitd HTTP GET"
)

// RLS goal IDs.
const (
	GoalRLSRef = "rls-reference"
	GoalRLSP99 = "rls-p99"
)

// EnvoyDefaultTimeout is the timeout of Envoy's rate-limit filter when its
// config sets none.
const EnvoyDefaultTimeout = 20 * time.Millisecond

// Peer returns the peer with the given Short label, if it has numbers.
func (s *RLS) Peer(short string) *HTTPPeer {
	if s == nil {
		return nil
	}
	return peerOf(s.Peers, short)
}

// rlsGoals judges the rls section: ≥ 3× the reference's requests/s, and a
// p99 under Envoy's default timeout at saturation.
func rlsGoals(r *Report) []Goal {
	ours, ref := r.RLS.Peer(ShortRLS), r.RLS.Peer(ShortRLSRef)
	g := Goal{ID: GoalRLSRef, Name: "ratelimitd ShouldRateLimit over gRPC ≥ 3× envoyproxy/ratelimit's (req/s, one descriptor per request, the same load client)", Target: "≥ 3×", Status: NotMeasured}
	if ours != nil && ref != nil {
		x := ours.ReqPerSec() / ref.ReqPerSec()
		g.Status, g.Measured = status(x >= 3), fmt.Sprintf("%s vs %s req/s = %.2f×", rate(ours.ReqPerSec()), rate(ref.ReqPerSec()), x)
	}
	p := Goal{ID: GoalRLSP99, Name: "ratelimitd ShouldRateLimit p99 under Envoy's default 20 ms timeout, at saturation", Target: "< 20 ms", Status: NotMeasured}
	if ours != nil {
		p.Status, p.Measured = status(ours.P99 < EnvoyDefaultTimeout), "p99 "+dur(ours.P99)
	}
	return []Goal{g, p}
}

// rlsSection writes the section rls of RESULTS.md.
func (b *md) rlsSection(r *Report, charts []string) {
	b.p("## 1b. Envoy's Rate Limit Service (gRPC), side by side")
	b.p("")
	if b.skipped(r, "rls") || r.RLS == nil {
		return
	}
	s := r.RLS
	b.p("One load client (this process): %d concurrent `ShouldRateLimit` calls over %d HTTP/2 connections (a lean gRPC",
		s.Streams, s.Conns)
	b.p("client: each request rendered once, no allocation per call), each sending its next call when the last is answered,")
	b.p("one descriptor per request (`user` = one of %s values), a one-hour limit no run reaches; ratelimitd's HTTP", count(s.Keys))
	b.p("`GET /check_rate` of the same ids over %d keep-alive", s.Streams)
	b.p("connections, same daemon. Every peer gets a %s warm-up, then %d rounds of %s, the order rotating each round.", s.Warmup, s.Rounds, s.PerRound)
	b.p("")
	ours := s.Peer(ShortRLS)
	var rows [][]string
	for i := range s.Peers {
		p := &s.Peers[i]
		if !p.OK() {
			rows = append(rows, []string{p.Name, p.Request, "—", "—", "—", "—", "—", "—", "—", "not run: " + p.Error})
			continue
		}
		x := "—"
		if ours != nil {
			x = ratio(ours.ReqPerSec() / p.ReqPerSec())
		}
		rows = append(rows, []string{p.Name, p.Request, rate(p.ReqPerSec()), x, dur(p.P50), dur(p.P99), dur(p.P999),
			fmt.Sprintf("%.3f", p.CPUPer1kChecks()), p.CPUSource, fmt.Sprintf("%.3f", p.ClientCPU/float64(p.Requests)*1000)})
	}
	b.table([]string{"peer", "one request", "req/s", "ratelimitd gRPC ÷ it (req/s)", "p50", "p99", "p99.9",
		"server CPU s per 1k checks", "server CPU read from", "load client CPU s per 1k req"}, rows)
	for _, p := range s.Peers {
		if p.OK() && p.Verified != "" {
			b.p("- %s: %s", p.Name, p.Verified)
		}
	}
	if ref, http := s.Peer(ShortRLSRef), s.Peer(ShortRLSHTTP); ours != nil {
		if ref != nil && ref.P99 > 0 {
			b.p("- p99, ratelimitd gRPC ÷ envoyproxy/ratelimit: %s.", ratio(float64(ours.P99)/float64(ref.P99)))
		}
		if ref != nil && ref.CPUPer1kChecks() > 0 {
			b.p("- Server CPU per check, ratelimitd gRPC ÷ envoyproxy/ratelimit (+ redis-server): %s.", ratio(ours.CPUPer1kChecks()/ref.CPUPer1kChecks()))
		}
		if http != nil && http.CPUPer1kChecks() > 0 {
			b.p("- Server CPU per check, ratelimitd gRPC `ShouldRateLimit` ÷ HTTP `GET /check_rate` (same daemon, same rounds): %s.", ratio(ours.CPUPer1kChecks()/http.CPUPer1kChecks()))
		}
	}
	b.p("")
	b.chart(charts, "rls_throughput.svg", "ShouldRateLimit requests per second, per peer")
}

// rlsReadmeRows are the rls section's rows of README.md's block.
func rlsReadmeRows(r *Report, goal func(id string) string) []readmeRow {
	ours, ref, http := r.RLS.Peer(ShortRLS), r.RLS.Peer(ShortRLSRef), r.RLS.Peer(ShortRLSHTTP)
	var rows []readmeRow
	x := readmeRow{what: "Envoy RLS `ShouldRateLimit` over gRPC, one descriptor per request, vs envoyproxy/ratelimit with Redis (the same load client, the same concurrent calls)", goal: goal(GoalRLSRef)}
	if ours != nil && ref != nil {
		x.ours, x.base, x.ratio = rate(ours.ReqPerSec())+" req/s", "envoyproxy/ratelimit: "+rate(ref.ReqPerSec())+" req/s", ratio(ours.ReqPerSec()/ref.ReqPerSec())
	} else {
		x.ours = notMeasured
	}
	rows = append(rows, x)
	x = readmeRow{what: "Envoy RLS `ShouldRateLimit` p99 at saturation vs envoyproxy/ratelimit's", goal: goal(GoalRLSP99)}
	if ours != nil {
		x.ours = dur(ours.P99)
		if ref != nil && ref.P99 > 0 {
			x.base, x.ratio = "envoyproxy/ratelimit: "+dur(ref.P99), ratio(float64(ours.P99)/float64(ref.P99))
		}
	} else {
		x.ours = notMeasured
	}
	rows = append(rows, x)
	x = readmeRow{what: "server CPU seconds per thousand `ShouldRateLimit` checks vs envoyproxy/ratelimit + redis-server"}
	if ours != nil && ref != nil && ref.CPUPer1kChecks() > 0 {
		x.ours, x.base, x.ratio = fmt.Sprintf("%.3f", ours.CPUPer1kChecks()), fmt.Sprintf("envoyproxy/ratelimit: %.3f", ref.CPUPer1kChecks()), ratio(ours.CPUPer1kChecks()/ref.CPUPer1kChecks())
	} else {
		x.ours = notMeasured
	}
	rows = append(rows, x)
	x = readmeRow{what: "server CPU per check, gRPC `ShouldRateLimit` vs HTTP `GET /check_rate` (same daemon, same rounds)"}
	if ours != nil && http != nil && http.CPUPer1kChecks() > 0 {
		x.ours, x.base, x.ratio = fmt.Sprintf("%.3f s per 1k", ours.CPUPer1kChecks()), fmt.Sprintf("HTTP GET: %.3f s per 1k", http.CPUPer1kChecks()), ratio(ours.CPUPer1kChecks()/http.CPUPer1kChecks())
	} else {
		x.ours = notMeasured
	}
	rows = append(rows, x)
	x = readmeRow{what: "`ShouldRateLimit` through loopback gRPC vs the Service in process, with allocations (`BenchmarkShouldRateLimit/grpc`)"}
	if s := r.InPkg.Family(gobench.FamRLS); s != nil {
		if row, ok := s.Row("BenchmarkShouldRateLimit/grpc"); ok {
			if st, ok := row.Stat("ns/op"); ok {
				x.ours = metric(st.Median, "ns/op") + "/op"
				if a, ok := row.Stat("allocs/op"); ok {
					x.ours += ", " + metric(a.Median, "allocs/op") + " allocs/op"
				}
				if base, ok := s.Row(row.Baseline); ok && row.Baseline != row.Name {
					if bst, ok := base.Stat("ns/op"); ok {
						x.base = "in process: " + metric(bst.Median, "ns/op") + "/op"
						if a, ok := base.Stat("allocs/op"); ok {
							x.base += ", " + metric(a.Median, "allocs/op") + " allocs/op"
						}
					}
					if row.Ratio != 0 {
						x.ratio = ratio(row.Ratio)
					}
				}
			}
		}
	}
	if x.ours == "" {
		x.ours = notMeasured
	}
	return append(rows, x)
}

// rlsBars draws the rls section's requests per second, per peer.
func rlsBars(s *RLS) (*plot.Plot, vg.Length, vg.Length, error) {
	p, w, h, err := httpBars(&HTTP{Conns: s.Streams, Peers: s.Peers})
	if err != nil {
		return nil, 0, 0, err
	}
	p.Title.Text = fmt.Sprintf("ShouldRateLimit (gRPC) and GET /check_rate requests/s, %d concurrent calls, loopback", s.Streams)
	return p, w, h, nil
}
