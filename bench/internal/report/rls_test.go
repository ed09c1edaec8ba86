package report

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
)

// withRLS is synthetic() with the rls section and its in-package family.
func withRLS() *Report {
	r := synthetic()
	r.RLS = &RLS{Streams: 64, Conns: 4, Keys: 1000, Rounds: 2, PerRound: time.Second, Warmup: time.Second, Peers: []HTTPPeer{
		{Name: "ratelimitd ShouldRateLimit", Short: ShortRLS, Request: "gRPC, 1 descriptor", ChecksPerRequest: 1, Requests: 60_000, Elapsed: 2 * time.Second, P50: 2 * time.Millisecond, P99: 9 * time.Millisecond, ServerCPU: 1.2, CPUSource: "/proc", ClientCPU: 3, Verified: "user-0 counted 60"},
		{Name: "envoyproxy/ratelimit ShouldRateLimit", Short: ShortRLSRef, Request: "gRPC, 1 descriptor", ChecksPerRequest: 1, Requests: 16_000, Elapsed: 2 * time.Second, P50: 8 * time.Millisecond, P99: 36 * time.Millisecond, ServerCPU: 1.6, CPUSource: "/proc of it + redis-server", ClientCPU: 1},
		{Name: "ratelimitd GET /check_rate", Short: ShortRLSHTTP, Request: "GET /check_rate", ChecksPerRequest: 1, Requests: 80_000, Elapsed: 2 * time.Second, P50: time.Millisecond, P99: 5 * time.Millisecond, ServerCPU: 1.2, CPUSource: "/proc", ClientCPU: 2},
	}}
	r.InPkg = &InPkg{Runs: []gobench.Outcome{{Summaries: []gobench.Summary{{
		Family: gobench.Family{Title: gobench.FamRLS, Top: []string{"BenchmarkShouldRateLimit"}, Primary: "ns/op", Baseline: gobench.Baseline{Level: 1, Value: "service"}},
		Units:  []string{"ns/op", "allocs/op"},
		Rows: []gobench.Row{
			{Name: "BenchmarkShouldRateLimit/service", Runs: 1, Ratio: 1, Baseline: "BenchmarkShouldRateLimit/service", Stats: []gobench.Stat{{Unit: "ns/op", Median: 2500, Min: 2500, Max: 2500, N: 1}, {Unit: "allocs/op", Median: 9, Min: 9, Max: 9, N: 1}}},
			{Name: "BenchmarkShouldRateLimit/grpc", Runs: 1, Baseline: "BenchmarkShouldRateLimit/service", Ratio: 14.4, Stats: []gobench.Stat{{Unit: "ns/op", Median: 36000, Min: 36000, Max: 36000, N: 1}, {Unit: "allocs/op", Median: 162, Min: 162, Max: 162, N: 1}}},
		},
	}}}}}
	return r
}

// TestRLSReport: the rls section's goals, its RESULTS.md table and lines,
// its chart, and README rows whose every number is in RESULTS.md.
func TestRLSReport(t *testing.T) {
	r := withRLS()
	gs := Goals(r)
	ref, p99 := goalByID(t, gs, GoalRLSRef), goalByID(t, gs, GoalRLSP99)
	if ref.ID != GoalRLSRef || ref.Status != Pass || ref.Measured != "30.0k vs 8.00k req/s = 3.75×" {
		t.Errorf("reference goal: got %+v", ref)
	}
	if p99.ID != GoalRLSP99 || p99.Status != Pass || p99.Measured != "p99 9.00 ms" {
		t.Errorf("p99 goal: got %+v", p99)
	}
	r.RLS.Peers[0].P99 = 25 * time.Millisecond
	if g := goalByID(t, Goals(r), GoalRLSP99); g.Status != Miss {
		t.Errorf("p99 of 25 ms: got %s, want %s", g.Status, Miss)
	}
	r.RLS.Peers[0].P99 = 9 * time.Millisecond

	dir := t.TempDir()
	if _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## 1b. Envoy's Rate Limit Service (gRPC), side by side",
		"64 concurrent `ShouldRateLimit` calls over 4 HTTP/2 connections",
		"| ratelimitd ShouldRateLimit | gRPC, 1 descriptor | 30.0k | 1.00× | 2.00 ms | 9.00 ms |",
		"| envoyproxy/ratelimit ShouldRateLimit | gRPC, 1 descriptor | 8.00k | 3.75× |",
		"| 0.020 | /proc | 0.050 |", // 1.2 s / 60k × 1000; 3 s / 60k × 1000
		"- p99, ratelimitd gRPC ÷ envoyproxy/ratelimit: 0.25×.",
		"- Server CPU per check, ratelimitd gRPC ÷ envoyproxy/ratelimit (+ redis-server): 0.20×.",
		"- Server CPU per check, ratelimitd gRPC `ShouldRateLimit` ÷ HTTP `GET /check_rate` (same daemon, same rounds): 1.33×.",
		"- **PASS** — ratelimitd ShouldRateLimit over gRPC ≥ 3× envoyproxy/ratelimit's",
		"](charts/rls_throughput.svg)",
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "charts", "rls_throughput.svg")); err != nil || wellFormed(b) != nil {
		t.Errorf("charts/rls_throughput.svg: %v", err)
	}

	block := READMEBlock(r, "RESULTS.md")
	for _, want := range []string{
		"| 30.0k req/s | envoyproxy/ratelimit: 8.00k req/s | 3.75× | ≥ 3×: **PASS** |",
		"| 9.00 ms | envoyproxy/ratelimit: 36.0 ms | 0.25× | < 20 ms: **PASS** |",
		"| 0.020 | envoyproxy/ratelimit: 0.100 | 0.20× |",
		"| 0.020 s per 1k | HTTP GET: 0.015 s per 1k | 1.33× |",
		"| 36.0 µs/op, 162 allocs/op | in process: 2.50 µs/op, 9 allocs/op | 14.40× |",
	} {
		if !strings.Contains(block, want) {
			t.Errorf("README block lacks %q:\n%s", want, block)
		}
	}
	results := Numbers(string(md), false)
	for _, n := range Numbers(block, true) {
		if !slices.Contains(results, n) {
			t.Errorf("the README block's %q is not in RESULTS.md", n)
		}
	}
}
