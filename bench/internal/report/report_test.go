package report

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
	"github.com/ratelimitd/ratelimitd/bench/internal/scaling"
)

func cdf(p50 time.Duration) []CDFPoint {
	return []CDFPoint{{p50 / 4, 0}, {p50, 0.5}, {p50 * 3, 0.99}, {p50 * 5, 1}}
}

// synthetic is a report with made-up numbers for every section, chosen so
// that some goals pass and some miss.
func synthetic() *Report {
	return &Report{
		Mode:         "short",
		Started:      time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		WallTime:     95 * time.Second,
		Machine:      Machine{CPU: "Test CPU", Cores: 2, GOMAXPROCS: 2, Kernel: "6.1.0", OS: "linux/amd64", Go: "go1.26.8", MemTotal: 24 << 30},
		Versions:     []Version{{"ratelimitd", "devel @ abc1234", "daemon binary"}, {"gubernator", "v2.13.0", "child process"}},
		Commands:     []Command{{"this run", "cd bench && go run ./cmd/compare -short"}},
		LoadAvgStart: "0.10 0.20 0.30", LoadAvgEnd: "1.90 1.00 0.50",
		LineHandoffs: []LineHandoff{{"http", 29 * time.Nanosecond}, {"embedded", 0}, {"journal", 171 * time.Nanosecond}},
		Notes:        []string{"a note"},
		HTTP: &HTTP{Conns: 64, Rounds: 2, PerRound: time.Second, Warmup: time.Second, Keys: 1000, Peers: []HTTPPeer{
			{Name: "bare net/http handler", Short: ShortBare, Ceiling: true, Request: "GET /", ChecksPerRequest: 1, Requests: 72_000, Elapsed: 2 * time.Second, P50: 1500 * time.Microsecond, P99: 6 * time.Millisecond, ServerCPU: 1.2, CPUSource: "/proc", ClientCPU: 2, CDF: cdf(1500 * time.Microsecond)},
			{Name: "ratelimitd GET", Short: ShortGet, Request: "GET /check_rate", ChecksPerRequest: 1, Requests: 62_000, Elapsed: 2 * time.Second, P50: 1800 * time.Microsecond, P99: 7 * time.Millisecond, ServerCPU: 1.3, CPUSource: "/proc", ClientCPU: 2, CDF: cdf(1800 * time.Microsecond), Verified: "count of user-0 reached 62"},
			{Name: "ratelimitd batch", Short: ShortBatch, Request: "POST /check_rate ×100", ChecksPerRequest: 100, Requests: 18_000, Elapsed: 2 * time.Second, P50: 5 * time.Millisecond, P99: 20 * time.Millisecond, ServerCPU: 1.4, CPUSource: "/proc", ClientCPU: 1, CDF: cdf(5 * time.Millisecond)},
			{Name: "gubernator", Short: ShortGubernator, Request: "POST /v1/GetRateLimits", ChecksPerRequest: 1, Requests: 10_000, Elapsed: 2 * time.Second, P50: 10 * time.Millisecond, P99: 30 * time.Millisecond, ServerCPU: 1.5, CPUSource: "/proc", ClientCPU: 1, CDF: cdf(10 * time.Millisecond)},
			{Name: "Redis+Lua front", Short: ShortRedis, Error: "redis-server not found"},
		}},
		Embedded: &Embedded{PerRun: time.Second, Passes: 2, Keys: []int{1000, 1_000_000},
			Limiters: []string{RatelimitdLimiter, "x/time/rate (sharded map)", "ulule/limiter memory store"},
			Results: []EmbeddedResult{
				{Limiter: RatelimitdLimiter, Keys: 1000, Dist: "uniform", Goroutines: 1, Checks: 1_000_000, Elapsed: time.Second, AllocsPerOp: 0},
				{Limiter: "x/time/rate (sharded map)", Keys: 1000, Dist: "uniform", Goroutines: 1, Checks: 7_000_000, Elapsed: time.Second},
				{Limiter: "ulule/limiter memory store", Keys: 1000, Dist: "uniform", Goroutines: 1, Checks: 2_000_000, Elapsed: time.Second, AllocsPerOp: 2},
				{Limiter: RatelimitdLimiter, Keys: 1_000_000, Dist: "uniform", Goroutines: 2, Checks: 500_000, Elapsed: time.Second},
				{Limiter: "x/time/rate (sharded map)", Keys: 1_000_000, Dist: "uniform", Goroutines: 2, Checks: 400_000, Elapsed: time.Second},
				{Limiter: "ulule/limiter memory store", Keys: 1_000_000, Dist: "uniform", Goroutines: 2, Error: "boom"},
			}},
		Memory: &Memory{Window: time.Hour,
			Ratelimitd: scaling.MemCurve{Points: []scaling.MemPoint{{Buckets: 1000, Bytes: 1_600_000, PerBucket: 1600}, {Buckets: 1_000_000, Bytes: 101_000_000, PerBucket: 101}}},
			Redis:      scaling.MemCurve{Points: []scaling.MemPoint{{Buckets: 1000, Bytes: 90_000, PerBucket: 90}, {Buckets: 1_000_000, Bytes: 90_000_000, PerBucket: 90}}, Stopped: "stopped before 10000000 buckets: test"},
		},
		Sweep: &Sweep{
			VsExpired: []scaling.SweepPoint{{Live: 100_000, Expired: 1000, Took: 70 * time.Microsecond, Reps: 3}, {Live: 100_000, Expired: 100_000, Took: 7 * time.Millisecond, Reps: 3}},
			VsLive:    []scaling.SweepPoint{{Live: 10_000, Expired: 10_000, Took: 700 * time.Microsecond, Reps: 3}, {Live: 1_000_000, Expired: 10_000, Took: 720 * time.Microsecond, Reps: 3}},
		},
		SweepLat: &SweepLat{scaling.SweepLatency{Expired: 100_000, Goroutines: 64, HotKeys: 1000, Journal: "interval",
			Baseline:  scaling.LatStats{Checks: 500_000, Elapsed: time.Second, P50: 60 * time.Microsecond, P99: 400 * time.Microsecond, P999: time.Millisecond, Max: 2 * time.Millisecond},
			During:    scaling.LatStats{Checks: 2000, Elapsed: 20 * time.Millisecond, P50: 100 * time.Microsecond, P99: 4 * time.Millisecond, P999: 5 * time.Millisecond, Max: 6 * time.Millisecond},
			SweepTook: 20 * time.Millisecond, Deleted: 101_000, Rounds: 1, Batches: 16}},
		Journal: &Journal{Goroutines: 128, Rounds: 2, PerRound: time.Second, Points: []scaling.JournalPoint{
			{Mode: "memory", LatStats: scaling.LatStats{Checks: 1_000_000, Elapsed: time.Second, P50: 100 * time.Microsecond, P99: 500 * time.Microsecond}},
			{Mode: "always", LatStats: scaling.LatStats{Checks: 40_000, Elapsed: time.Second, P50: 3 * time.Millisecond, P99: 17 * time.Millisecond}},
		}},
		RESP: syntheticRESP(),
		Cluster: &Cluster{Members: 3, Conns: 64, Rounds: 2, PerRound: time.Second, Warmup: time.Second, Keys: 1000,
			Peers: []HTTPPeer{
				{Name: "single node", Short: ShortSingle, Requests: 30_000, Elapsed: time.Second, ServerCPU: 1.5, P50: time.Millisecond, P99: 4 * time.Millisecond},
				{Name: "one member of 3", Short: ShortOneMember, Requests: 20_000, Elapsed: time.Second, ServerCPU: 1.6},
				{Name: "round-robin over 3", Short: ShortRoundRobin, Requests: 20_000, Elapsed: time.Second, ServerCPU: 1.8},
			},
			Forwarded: 26_000, Batches: 2_000,
			Direct: &DirectForward{LocalIDs: 340, ForwardedIDs: 660, Forwarded: 30_000, Batches: 1_000, Peers: []HTTPPeer{
				{Name: "member 0, its own ids", Short: ShortLocalIDs, Requests: 20_000, Elapsed: time.Second, ServerCPU: 1.0},
				{Name: "member 0, the other members' ids", Short: ShortForwardedIDs, Requests: 30_000, Elapsed: time.Second, ServerCPU: 2.4},
			}},
			Handoff: &Handoff{Buckets: 100_000, VShards: 512, Moved: 50_000, Handoffs: 16, Time: 800 * time.Millisecond}},
	}
}

func TestGoals(t *testing.T) {
	gs := Goals(synthetic())
	want := []struct{ status, measured string }{
		{Miss, "31.0k vs 36.0k req/s = 0.86×"}, // under 0.90×
		{Pass, "= 6.20×"},
		{Miss, "900.0k checks/s"},
		{Miss, "worst case fastest other ÷ ratelimitd = 7.00×"},
		{Pass, "worst case ratelimitd ÷ fastest other = 1.25×"},
		{Miss, "at 1M buckets: 101 B vs 90 B = 1.12×"},
		{Miss, "300.0k req/s vs redis EVALSHA fixed window 180.0k req/s = 1.67×, vs redis EVALSHA GCRA 250.0k req/s = 1.20×"},
		{Pass, "60.0k req/s vs redis EVALSHA GCRA 40.0k req/s = 1.50×"},
		// Forwarded ids 2.4 s / 30k checks against local ids 1.0 s / 20k; derived
		// from round-robin, 0.09 vs 0.05 CPU s per 1k checks with 65%
		// forwarded: (0.05 + 0.04/0.65) / 0.05.
		{Pass, "0.080 vs 0.050 CPU s per 1k checks, 30.0 checks per forwarded batch: 1.60× (derived from round-robin over 3 members against the single node: 2.23×)"},
		{NotMeasured, ""}, // the rls section: see TestRLSReport
		{NotMeasured, ""},
		{Miss, "worst row ratelimitd ÷ fastest other = 0.14× (1k keys uniform g=1: 1.00M vs x/time/rate 7.00M/s)"},
		{NotMeasured, ""}, // the floor: no in-package run
		{Miss, "100k expired at once: throughput 0.20×, p99 4.00 ms vs 400 µs = 10.00×"},
		{NotMeasured, ""}, // no interval point in the synthetic journal
		{NotMeasured, ""}, // journal bytes: no in-package run
		{NotMeasured, ""}, // recovery: no in-package run
		// "user-0" … "user-999999": (10×6 + 90×7 + 900×8 + … + 900000×11) / 1M.
		{Miss, "at 1M buckets: 101.0 B, ids of 10.9 B on average: 90.1 B beyond the id"},
		{Pass, "72.0 ns beside 1M live vs 70.0 ns beside 10k = 1.03×"},
		{NotMeasured, ""}, // top keys: no in-package run
	}
	if len(gs) != len(want) {
		t.Fatalf("got %d goals, want %d: %+v", len(gs), len(want), gs)
	}
	for i, w := range want {
		if gs[i].Status != w.status || !strings.Contains(gs[i].Measured, w.measured) {
			t.Errorf("goal %d (%s): got %s %q, want %s containing %q", i, gs[i].Name, gs[i].Status, gs[i].Measured, w.status, w.measured)
		}
	}
}

// TestGoalTopKeys: the top keys' goal is the worst ratio of BenchmarkCheck
// with top keys to without, over the goroutine counts, with no allocation.
func TestGoalTopKeys(t *testing.T) {
	for _, c := range []struct {
		lines, status, measured string
	}{
		{"", NotMeasured, ""},
		{"BenchmarkCheck/system+topkeys/p=64-2 1000 1100 ns/op 909000 checks/s 1000000 without-checks/s 0.909 x-system 0 allocs/op\n", Miss, "worst case 0.91×, 0 allocs/op (p=64: 909.0k vs 1.00M checks/s, 0.91×)"},
		{"BenchmarkCheck/system+topkeys/p=64-2 1000 1000 ns/op 990000 checks/s 1000000 without-checks/s 0.99 x-system 1 allocs/op\n", Miss, "worst case 0.99×, 1 allocs/op"},
		{"BenchmarkCheck/system+topkeys/p=64-2 1000 1000 ns/op 990000 checks/s 1000000 without-checks/s 0.99 x-system 0 allocs/op\nBenchmarkCheck/system+topkeys/p=1-2 1000 1000 ns/op 1800000 checks/s 2000000 without-checks/s 0.90 x-system 0 allocs/op\n", Miss, "worst case 0.90×"},
		{"BenchmarkCheck/system+topkeys/p=64-2 1000 1000 ns/op 950000 checks/s 1000000 without-checks/s 0.95 x-system 0 allocs/op\n", Pass, "worst case 0.95×, 0 allocs/op"},
		// The pair's own ratio, not the ratio of its two rates (a median of
		// rounds' ratios), decides.
		{"BenchmarkCheck/system+topkeys/p=64-2 1000 1000 ns/op 940000 checks/s 1000000 without-checks/s 0.96 x-system 0 allocs/op\n", Pass, "worst case 0.96×"},
		// A row of the unpaired form (no x-system) is not a measure.
		{"BenchmarkCheck/system+topkeys/p=64-2 1000 1000 ns/op 990000 checks/s 0 allocs/op\n", NotMeasured, ""},
	} {
		r := synthetic()
		plan := map[string]gobench.Invocation{}
		for _, inv := range gobench.Plan(false) {
			for _, f := range inv.Families {
				plan[f.Title] = inv
			}
		}
		out := "pkg: github.com/ratelimitd/ratelimitd/actors\nBenchmarkCheck/system/p=64-2 1000 1000 ns/op 1000000 checks/s 0 allocs/op\n" + c.lines
		r.InPkg = &InPkg{Runs: []gobench.Outcome{outcome(t, plan[gobench.FamCheck], out, time.Second)}}
		gs := Goals(r)
		g := gs[len(gs)-1]
		if g.ID != GoalTopKeys || g.Status != c.status || !strings.Contains(g.Measured, c.measured) {
			t.Errorf("%q: got %s %s %q, want %s containing %q", c.lines, g.ID, g.Status, g.Measured, c.status, c.measured)
		}
	}
}

func TestGoalsNotMeasured(t *testing.T) {
	r := synthetic()
	r.HTTP.Peers[0].Error = "failed" // no ceiling
	r.Embedded.Results = r.Embedded.Results[:3]
	r.Memory.Redis = scaling.MemCurve{}
	gs := Goals(r)
	for _, i := range []int{0, 4, 5} {
		if gs[i].Status != NotMeasured {
			t.Errorf("goal %d (%s): got %s, want %s", i, gs[i].Name, gs[i].Status, NotMeasured)
		}
	}
	if gs[1].Status != Pass {
		t.Errorf("goal 1: got %s, want %s (it needs no ceiling)", gs[1].Status, Pass)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	files, err := Write(dir, synthetic())
	if err != nil {
		t.Fatal(err)
	}
	charts := []string{"http_throughput.svg", "http_latency_cdf.svg", "embedded_throughput.svg", "memory_per_bucket.svg", "sweep_vs_expired.svg", "sweep_vs_live.svg", "resp_throughput.svg"}
	if got, want := len(files), 1+len(charts); got != want {
		t.Errorf("wrote %d files, want %d: %v", got, want, files)
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# ratelimitd and its peers, side by side",
		"**short** mode", "Test CPU, 2 cores", "6.1.0", "go1.26.8", "| gubernator | v2.13.0 |",
		"cd bench && go run ./cmd/compare -short",
		"| a cache line passed between two CPUs, before each section | http 29 ns · embedded not measured · journal 171 ns |",
		"- **MISS** — ratelimitd HTTP GET", "- **MISS** — batches of 100",
		"| ratelimitd GET | GET /check_rate | 31.0k | 31.0k | 0.86× | 1.80 ms | 7.00 ms |",
		"| ratelimitd batch | POST /check_rate ×100 | 9.00k | 900.0k | 0.25× |",
		"| 0.021 | /proc | 0.032 |", // the GET peer: 1.3 s / 62k checks × 1000; 2 s / 62k req × 1000
		"## 6. Cluster mode",
		"| round-robin over 3 | 20.0k | 0 ns | 0 ns | 0 ns | 0.090 | 1.80× |",
		"forwarded 26k checks in 2k batches: 13.0 checks per batch (65% of the checks)",
		"Derived from these rows, a forwarded check costs 2.23× the CPU of a local one",
		"once with the 340 of the 1k ids whose vshards it owns and once with the 660 the other members own",
		"| member 0, the other members' ids | 30.0k | 0 ns | 0 ns | 0 ns | 0.080 | 1.60× |",
		"A forwarded check costs 1.60× the CPU of a local one; member 0 forwarded 30k checks in 1k batches in these rounds, warm-ups included (30.0 per batch).",
		"512 vshards with 50k buckets moved in 16 handoffs, 800 ms from fence to commit in all: 1.56 ms per vshard, 1.60 s per 100k buckets,",
		"not run: redis-server not found",
		"count of user-0 reached 62",
		"| 1k | uniform | 1 | 1.00M/s, 0.00 allocs | 7.00M/s, 0.00 allocs | 2.00M/s, 2.00 allocs | 0.14× |",
		"failed: boom", "| 1M | uniform | 2 | 500.0k/s, 0.00 allocs | 400.0k/s, 0.00 allocs |", "1.25× |",
		"| 1M | 101.0 B | 96.3 MiB | 90.0 B | 85.8 MiB | 1.12× |",
		"Redis stopped before 10000000 buckets: test.",
		"| 100k | 100k | 7.00 ms | 70.0 ns | 3 |",
		"| 1M | 10k | 720 µs | 72.0 ns | 3 |",
		"| during the sweep | 2,000 | 100.0k | 100 µs | 4.00 ms |", "p99 during ÷ p99 before: 10.00×.",
		"| always | 40.0k | 0.04× | 3.00 ms | 17.0 ms |",
		RESPHeading, "redis-benchmark 7.0.15 (a child process, one thread), with 50 connections", "pipelines of 1 and 16 requests",
		"| ratelimitd CL.THROTTLE | `CL.THROTTLE user:__rand_int__ 999999999 1000000000 3600 1` | 16 | 300.0k | 0.60× | — | 2.00 ms | 5.00 ms | 0.004 | the daemon | 0.002 |  |",
		"| redis-server, Lua GCRA by EVALSHA | `EVALSHA <sha> 1 gcra:user:__rand_int__ 999999999 1000000000 3600 1` | 1 | 40.0k | 0.50× | 1.50× |",
		"| redis-server, INCR | `INCR incr:user:__rand_int__` | 16 | 500.0k | 1.00× | 0.60× |",
		"| redis-server, Lua fixed window by EVALSHA | `EVALSHA <sha> 1 rl:user:__rand_int__ 3600000` | 1 | — | — | — | — | — | — | — | — | failed: boom |",
		"- ratelimitd CL.THROTTLE: user:000000000000 spent 1,234 tokens",
		"- a note",
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	for _, c := range charts {
		if !bytes.Contains(md, []byte("](charts/"+c+")")) {
			t.Errorf("RESULTS.md does not link charts/%s", c)
		}
		b, err := os.ReadFile(filepath.Join(dir, "charts", c))
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("charts/%s is not an SVG: %.80q", c, b)
		}
		if err := wellFormed(b); err != nil {
			t.Errorf("charts/%s is not well-formed XML: %v", c, err)
		}
	}
	if bytes.Contains(md, []byte("NaN")) || bytes.Contains(md, []byte("Inf")) {
		t.Errorf("RESULTS.md holds NaN or Inf")
	}
}

func wellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return err
		}
	}
}

// TestWriteSweepSlices: §3c says how many slices the sweep took, when the
// run counted them.
func TestWriteSweepSlices(t *testing.T) {
	r := synthetic()
	if md := string(Markdown(r, nil)); !strings.Contains(md, "(1 round(s), 16 sweep messages).") {
		t.Errorf("§3c without slices: want \"(1 round(s), 16 sweep messages).\" in\n%s", md)
	}
	r.SweepLat.Slices = 3200
	if md := string(Markdown(r, nil)); !strings.Contains(md, "(1 round(s), 16 sweep messages, 3,200 slices).") {
		t.Errorf("§3c with slices: want \"(1 round(s), 16 sweep messages, 3,200 slices).\" in\n%s", md)
	}
}

func TestWriteSkippedSections(t *testing.T) {
	r := synthetic()
	r.Embedded, r.Memory, r.Sweep, r.SweepLat, r.Journal = nil, nil, nil, nil, nil
	r.Skipped = map[string]string{"embedded": "-only http", "memory": "-only http", "sweep": "-only http", "sweeplat": "-only http", "journal": "-only http"}
	dir := t.TempDir()
	if _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if n := bytes.Count(md, []byte("Not run: -only http.")); n != 5 {
		t.Errorf("RESULTS.md says %d sections were not run, want 5", n)
	}
	if bytes.Contains(md, []byte("memory_per_bucket.svg")) {
		t.Errorf("RESULTS.md links a chart that was not drawn")
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "http_latency_cdf.svg")); err != nil {
		t.Error(err)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{rate(950), "950"}, {rate(1234), "1.23k"}, {rate(31_000), "31.0k"}, {rate(1_234_567), "1.23M"},
		{count(1000), "1k"}, {count(1_000_000), "1M"}, {count(10_000_000), "10M"}, {count(1500), "1500"},
		{dur(1800 * time.Microsecond), "1.80 ms"}, {dur(650 * time.Microsecond), "650 µs"}, {dur(17 * time.Millisecond), "17.0 ms"},
		{dur(2500 * time.Millisecond), "2.50 s"}, {dur(800), "800 ns"}, {mib(3 << 20), "3.0 MiB"},
		{num(1_001_000), "1,001,000"}, {num(999), "999"}, {num(int64(-12345)), "-12,345"},
		{window(time.Hour), "1h"}, {window(30 * time.Second), "30s"}, {window(90 * time.Minute), "1h30m"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestHumanTicks(t *testing.T) {
	for v, want := range map[float64]string{0.5: "0.5", 20: "20", 1000: "1k", 10_000: "10k", 1e6: "1M", 1e7: "10M", 2.5e6: "2.5M"} {
		if got := human(v); got != want {
			t.Errorf("human(%v) = %q, want %q", v, got, want)
		}
	}
	labelled := 0
	for _, tk := range (humanTicks{}).Ticks(1000, 1e7) {
		if tk.Label != "" {
			labelled++
			if strings.Contains(tk.Label, "e+") {
				t.Errorf("tick label %q", tk.Label)
			}
		}
	}
	if labelled < 3 {
		t.Errorf("%d labelled ticks from 1k to 10M, want at least 3", labelled)
	}
	var narrow []string
	for _, tk := range (humanTicks{}).Ticks(90, 1800) {
		if tk.Label != "" && tk.Value >= 90 && tk.Value <= 1800 { // the axis drops the others
			narrow = append(narrow, tk.Label)
		}
	}
	if got, want := strings.Join(narrow, " "), "100 200 500 1k"; got != want {
		t.Errorf("labels from 90 to 1800: %q, want %q", got, want)
	}
}

func TestLinearTicks(t *testing.T) {
	var got []string
	for _, tk := range (linearTicks{}).Ticks(0, 270) {
		got = append(got, tk.Label)
	}
	if g, want := strings.Join(got, " "), "0 50 100 150 200 250"; g != want {
		t.Errorf("ticks 0..270: %q, want %q", g, want)
	}
	got = got[:0]
	for _, tk := range (linearTicks{}).Ticks(0, 1) {
		got = append(got, tk.Label)
	}
	if g, want := strings.Join(got, " "), "0 0.2 0.4 0.6 0.8 1"; g != want {
		t.Errorf("ticks 0..1: %q, want %q", g, want)
	}
	if len((linearTicks{}).Ticks(1, 1)) != 0 {
		t.Error("ticks of an empty range")
	}
}

// inPkgOutput is go test output for a few families of the plan, with
// made-up figures.
const inPkgOutput = `goos: linux
pkg: github.com/ratelimitd/ratelimitd/table
BenchmarkApply/keys=1000/baseline=map+mutex-2 	10000000	        86.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkApply/keys=1000/baseline=map+mutex-2 	10000000	        90.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkApply/keys=1000/table-2 	10000000	       142.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkApply/keys=1000/table-2 	10000000	       146.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkApply/keys=1000000/baseline=map+mutex-2 	 2000000	       500.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkApply/keys=1000000/table-2 	 1000000	       1000 ns/op	       0 B/op	       0 allocs/op
PASS
`

const inPkgActors = `pkg: github.com/ratelimitd/ratelimitd/actors
BenchmarkCheck/floor=map+mutex/p=64-2 	 1000	 100.0 ns/op	  10000000 checks/s	       0 B/op	       0 allocs/op
BenchmarkCheck/system/p=64-2 	 1000	 1000 ns/op	  1000000 checks/s	       0 B/op	       0 allocs/op
BenchmarkCheck/system+topkeys/p=64-2 	 1000	 1042 ns/op	  960000 checks/s	 1000000 without-checks/s	 0.96 x-system	       0 B/op	       0 allocs/op
BenchmarkCheckJournal/sync=memory-2 	 1000	 1000 ns/op	  1000000 checks/s	       500.0 p99-µs	      39 B/op	       0 allocs/op
BenchmarkCheckJournal/sync=interval-2 	 1000	 1250 ns/op	  800000 checks/s	      62.00 journal-B/check	       650.0 p99-µs	   0.8000 x-memory	      39 B/op	       0 allocs/op
BenchmarkCheckJournal/sync=always-2 	 1000	 25000 ns/op	  40000 checks/s	      26.00 journal-B/check	     17000 p99-µs	   0.04000 x-memory	      39 B/op	       0 allocs/op
BenchmarkRecovery/buckets=1000000-2 	 1	 680000000 ns/op	   1470588 buckets/s
`

const inPkgAPI = `pkg: github.com/ratelimitd/ratelimitd/api
BenchmarkMiddlewareOverhead/bare/parallel-2 	 1000	 5.000 ns/op	       0 B/op	       0 allocs/op
BenchmarkMiddlewareOverhead/middleware/parallel-2 	 1000	 1065 ns/op	      96 B/op	       2 allocs/op
BenchmarkProxy-2 	 1	 15600 ratelimitd-p99-µs	 12000 ratelimitd-req/s	 0.9231 ratelimitd/reverseproxy	 16300 reverseproxy-p99-µs	 13000 reverseproxy-req/s
`

func outcome(t *testing.T, inv gobench.Invocation, text string, wall time.Duration) gobench.Outcome {
	t.Helper()
	out, err := gobench.Parse(strings.NewReader(text), 2)
	if err != nil {
		t.Fatal(err)
	}
	return gobench.Outcome{Invocation: inv, Command: inv.CommandLine(), Wall: wall, Output: out, Summaries: gobench.Summarize(out.Results, inv.Families)}
}

func withInPkg(t *testing.T, r *Report) *Report {
	plan := map[string]gobench.Invocation{}
	for _, inv := range gobench.Plan(false) {
		for _, f := range inv.Families {
			plan[f.Title] = inv
		}
	}
	failed := outcome(t, plan[gobench.FamKey], "", 3*time.Second)
	failed.Err = "exit status 2; the output ended with:\nsomething | broke"
	r.InPkg = &InPkg{
		Runs: []gobench.Outcome{
			outcome(t, plan[gobench.FamApply], inPkgOutput, 100*time.Second),
			outcome(t, plan[gobench.FamCheck], inPkgActors, 60*time.Second),
			outcome(t, plan[gobench.FamMiddleware], inPkgAPI, 90*time.Second),
			failed,
		},
		NotRun: []string{plan[gobench.FamMatch].CommandLine()},
	}
	return r
}

func TestWriteInPkg(t *testing.T) {
	r := withInPkg(t, synthetic())
	md := string(Markdown(r, nil))
	for _, want := range []string{
		InPkgHeading,
		"This is **short** mode",
		"| `go test -run '^$' -bench '^BenchmarkApply$' -benchmem -benchtime 1s -count 3 -timeout 10m0s ./table/` | 1m40s | 6 | ok |",
		"| FAILED: exit status 2; the output ended with: |",
		"something | broke", // in the failure's code block
		"not run: the time budget was used up",
		"In all 4m13s of wall time.",
		"### `BenchmarkApply` (`./table/`)",
		"| benchmark | runs | b.N | time/op | B/op | allocs/op | range of time/op | time/op ÷ baseline=map+mutex |",
		"| `keys=1000/baseline=map+mutex` | 2 | 10.00M | 88.0 ns | 0 | 0 | 86.0 ns – 90.0 ns | 1.00× |",
		"| `keys=1000/table` | 2 | 10.00M | 144 ns | 0 | 0 | 142 ns – 146 ns | 1.64× |",
		"| `keys=1000000/table` | 1 | 1.00M | 1.00 µs | 0 | 0 | — | 2.00× |",
		"| benchmark | runs | b.N | time/op | checks/s | p99 | B/op | allocs/op | journal-B/check | x-memory | range of checks/s | checks/s ÷ sync=memory |",
		"| `sync=always` | 1 | 1000 | 25.0 µs | 40.0k | 17.0 ms | 39 | 0 | 26 | 0.040 | — | 0.04× |",
		"| `buckets=1000000` | 1 | 1 | 680 ms | 1.47M | — |",
		"time/op − bare |",
		"| `middleware/parallel` | 1 | 1000 | 1.06 µs | 96 | 2 | — | 213.00× | +1.06 µs |",
		"| `BenchmarkProxy` | 1 | 1 | 15.6 ms | 12.0k | 0.923 | 16.3 ms | 13.0k | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "Inf") {
		t.Error("RESULTS.md holds NaN or Inf")
	}
	r.InPkg = nil
	r.Skipped = map[string]string{"gobench": "-only http"}
	if md := string(Markdown(r, nil)); !strings.Contains(md, InPkgHeading+"\n\nNot run: -only http.") {
		t.Errorf("a skipped in-package section:\n%s", md[strings.Index(md, InPkgHeading):])
	}
}

// TestREADMEBlockNumbersInResults: every number of the README block is a
// number of the RESULTS.md of the same report, whole or in part.
func TestREADMEBlockNumbersInResults(t *testing.T) {
	for name, r := range map[string]*Report{"full": withInPkg(t, synthetic()), "no in-package": synthetic(), "empty": {Started: time.Now(), Mode: "full"}} {
		block := READMEBlock(r, "bench/RESULTS.md")
		have := map[string]bool{}
		for _, n := range Numbers(string(Markdown(r, nil)), false) {
			have[n] = true
		}
		nums := Numbers(block, true)
		for _, n := range nums {
			if !have[n] {
				t.Errorf("%s: the README block's %q is not in RESULTS.md", name, n)
			}
		}
		if name == "full" && len(nums) < 40 {
			t.Errorf("%s: only %d numbers in the block: %v\n%s", name, len(nums), nums, block)
		}
		if t.Failed() {
			t.Logf("%s block:\n%s", name, block)
		}
	}
}

func TestREADMEBlock(t *testing.T) {
	block := READMEBlock(withInPkg(t, synthetic()), "bench/RESULTS.md")
	for _, want := range []string{
		READMEBegin + "\n", READMEEnd + "\n",
		"in short mode on 2026-11-30 08:00 UTC, on Test CPU, 2 cores (GOMAXPROCS 2), go1.26.8",
		"[bench/RESULTS.md](bench/RESULTS.md)",
		"| what | ratelimitd | baseline or peer, same run | ratio | goal |",
		"| 31.0k req/s | bare handler: 36.0k req/s | 0.86× | ≥ 0.90×: **MISS** |",
		"| 31.0k req/s | gubernator: 5.00k req/s | 6.20× | ≥ 4×: **PASS** |",
		"| 900.0k checks/s (9.00k req/s of 100 checks) | — | — | ≥ 1M checks/s: **MISS** |",
		"at 1k keys vs the fastest in-process library, in ratelimitd's worst case (uniform, 1 goroutine) | 1.00M checks/s | x/time/rate (sharded map): 7.00M checks/s | 0.14× | within 3×: **MISS** |",
		"at 1M keys vs the fastest in-process library, in ratelimitd's worst case (uniform, 2 goroutines) | 500.0k checks/s | x/time/rate (sharded map): 400.0k checks/s | 1.25× | ahead: **PASS** |",
		"memory per live bucket at 1M buckets (heap after GC) vs Redis's per key (`used_memory`) | 101.0 B | Redis: 90.0 B | 1.12× | below Redis: **MISS** |",
		"| 70.0 ns at 100k expired | 70.0 ns at 1k expired | 1.00× |",
		"| 72.0 ns beside 1M live | 70.0 ns beside 10k live | 1.03× |",
		"deletes 100k buckets at once vs before it | 4.00 ms | before: 400 µs | 10.00× |",
		"(`BenchmarkApply/keys=1000/table`) | 144 ns/op | map+mutex: 88.0 ns/op | 1.64× |",
		"(`BenchmarkApply/keys=1000000/table`) | 1.00 µs/op | map+mutex: 500 ns/op | 2.00× |",
		"(`BenchmarkCheck/system/p=64`) | 1.00M checks/s | map+mutex floor: 10.00M checks/s | 0.10× |",
		"in alternating rounds (`BenchmarkCheck/system+topkeys/p=64`) | 960.0k checks/s, 0 allocs/op | without: 1.00M checks/s | 0.96× | ≥ 0.95×, 0 allocs: **PASS** |",
		"(`BenchmarkCheckJournal/sync=none`) | not measured in this run | — | — |",
		"(`BenchmarkCheckJournal/sync=interval`) | 800.0k checks/s, p99 650 µs | no journal: 1.00M checks/s, p99 500 µs | 0.80× |",
		"(`BenchmarkRecovery/buckets=1000000`) | 1.47M buckets/s, 680 ms per start |",
		"(`BenchmarkMiddlewareOverhead/middleware/parallel`) | 1.06 µs/op (+1.06 µs) | bare handler: 5.00 ns/op | 213.00× |",
		"(`BenchmarkMatchCached/serial`) | not measured in this run |",
		"(`BenchmarkProxy`) | 12.0k req/s | ReverseProxy alone: 13.0k req/s | 0.923 |",
		"(`BenchmarkJournalGrowth`) | not measured in this run |",
		"pipelines of 16 (`redis-benchmark`, 50 connections), vs `redis-server` running the Lua limiter it compares worst against, by `EVALSHA` | 300.0k req/s | redis EVALSHA GCRA: 250.0k req/s | 1.20× | ≥ 1.5×: **MISS** |",
		"pipelines of 16, vs `redis-server` answering plain `INCR` (the ceiling) | 300.0k req/s | INCR: 500.0k req/s | 0.60× |  |",
		"pipelines of 1 (`redis-benchmark`, 50 connections), vs `redis-server` running the Lua limiter it compares worst against, by `EVALSHA` | 60.0k req/s | redis EVALSHA GCRA: 40.0k req/s | 1.50× | ≥ 1×: **PASS** |",
		"pipelines of 1, vs `redis-server` answering plain `INCR` (the ceiling) | 60.0k req/s | INCR: 80.0k req/s | 0.75× |  |",
	} {
		if !strings.Contains(block, want) {
			t.Errorf("the block lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(block)
	}
}

func TestUpdateREADME(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	doc := "# x\n\n## Performance\n\nProse.\n\n" + READMEBegin + "\nold | 1 |\n" + READMEEnd + "\n\nMore prose.\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := withInPkg(t, synthetic())
	if err := UpdateREADME(path, r, "bench/RESULTS.md"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# x\n\n## Performance\n\nProse.\n\n" + READMEBlock(r, "bench/RESULTS.md") + "\nMore prose.\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Again: the same.
	if err := UpdateREADME(path, r, "bench/RESULTS.md"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != want {
		t.Error("a second update changed the file")
	}
	for name, bad := range map[string]string{
		"no markers":  "# x\n",
		"no end":      READMEBegin + "\n",
		"reversed":    READMEEnd + "\n" + READMEBegin + "\n",
		"two begins":  READMEBegin + "\n" + READMEBegin + "\n" + READMEEnd + "\n",
		"mid-line":    "text " + READMEBegin + "\n" + READMEEnd + "\n",
		"nonexistent": "",
	} {
		p := filepath.Join(t.TempDir(), "README.md")
		if name != "nonexistent" {
			_ = os.WriteFile(p, []byte(bad), 0o644)
		}
		if err := UpdateREADME(p, r, "x"); err == nil {
			t.Errorf("%s: no error", name)
		}
		if name != "nonexistent" {
			if b, _ := os.ReadFile(p); string(b) != bad {
				t.Errorf("%s: the file changed", name)
			}
		}
	}
}

func TestNumbers(t *testing.T) {
	text := "p99 of 1.06 µs and 142ns, 0.88× (4%) at 1,001,000 and 12.3k/s, 1M keys, 1MiB, 10^12,\n" +
		"go1.26.8 v2.13.0 sha256 x_1 2026-11-30 09:10 UTC; 3.5 s, 7 ms, 8 msgs, 1k× 2M%.\n" +
		"`code 123` and ``a ` 456`` kept 789 `unclosed 5\n" +
		"```sh\n" +
		"go test -count 3\n" +
		"```\n" +
		"~~~\n1\n~~~\n" +
		"after 6."
	got := strings.Join(Numbers(text, true), "|")
	want := "1.06 µs|142 ns|0.88×|4%|1,001,000|12.3k|1M|1|10|12|2026|11|30|09|10|3.5|7 ms|8|1k×|2M%|789|5|6"
	if got != want {
		t.Errorf("Numbers(exempt):\n got %s\nwant %s", got, want)
	}
	all := strings.Join(Numbers(text, false), "|")
	for _, w := range []string{"123", "456", "|3|", "|1|"} {
		if !strings.Contains("|"+all+"|", w) {
			t.Errorf("Numbers(all) lacks %s: %s", w, all)
		}
	}
}

// syntheticRESP is a Redis protocol section with made-up numbers: the
// pipelined goal misses (against GCRA), the single one passes (against
// GCRA alone: the fixed window's run at pipeline 1 failed).
func syntheticRESP() *RESP {
	run := func(pipe int, reqs int64, rps float64) RESPRun {
		return RESPRun{Pipeline: pipe, Requests: reqs, Elapsed: time.Duration(float64(reqs) / rps * 1e9), P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, ServerCPU: float64(reqs) * 4e-6, ClientCPU: float64(reqs) * 2e-6}
	}
	return &RESP{Client: "redis-benchmark 7.0.15", Conns: 50, Keys: 1000, Pipelines: []int{1, 16}, Rounds: 3, PerRound: 2 * time.Second,
		Peers: []RESPPeer{
			{Name: "ratelimitd CL.THROTTLE", Short: ShortRESPRatelimitd, Command: "CL.THROTTLE user:__rand_int__ 999999999 1000000000 3600 1", CPUSource: "the daemon",
				Runs: []RESPRun{run(1, 120_000, 60_000), run(16, 600_000, 300_000)}, Verified: "user:000000000000 spent 1,234 tokens"},
			{Name: "redis-server, Lua fixed window by EVALSHA", Short: ShortRESPFixedLua, Command: "EVALSHA <sha> 1 rl:user:__rand_int__ 3600000", CPUSource: "redis-server",
				Runs: []RESPRun{{Pipeline: 1, Error: "boom"}, run(16, 360_000, 180_000)}},
			{Name: "redis-server, Lua GCRA by EVALSHA", Short: ShortRESPGCRALua, Command: "EVALSHA <sha> 1 gcra:user:__rand_int__ 999999999 1000000000 3600 1", CPUSource: "redis-server",
				Runs: []RESPRun{run(1, 80_000, 40_000), run(16, 500_000, 250_000)}},
			{Name: "redis-server, INCR", Short: ShortRESPIncr, Ceiling: true, Command: "INCR incr:user:__rand_int__", CPUSource: "redis-server",
				Runs: []RESPRun{run(1, 160_000, 80_000), run(16, 1_000_000, 500_000)}},
		}}
}

// TestRESPNotMeasured: without the section, or without redis-benchmark,
// its goals are not measured and its README rows say so; a peer that
// could not start is shown with its reason.
func TestRESPNotMeasured(t *testing.T) {
	for name, x := range map[string]*RESP{"nil": nil, "no client": {Error: "redis-benchmark not found"}} {
		r := synthetic()
		r.RESP = x
		gs := Goals(r)
		for _, id := range []string{GoalRESPPipelined, GoalRESPSingle} {
			if g := goalByID(t, gs, id); g.Status != NotMeasured {
				t.Errorf("%s: goal %s: got %s, want %s", name, g.ID, g.Status, NotMeasured)
			}
		}
		if n := strings.Count(READMEBlock(r, "x"), "Redis protocol `CL.THROTTLE`"); n != 4 {
			t.Errorf("%s: the README block has %d Redis protocol rows, want 4", name, n)
		}
	}
	r := synthetic()
	r.RESP.Peers[1] = RESPPeer{Name: "redis-server, Lua fixed window by EVALSHA", Short: ShortRESPFixedLua, Command: "EVALSHA", Error: "skipped: redis-server not found"}
	md := string(Markdown(r, nil))
	if !strings.Contains(md, "| 16 | — | — | — | — | — | — | — | — | not run: skipped: redis-server not found |") {
		t.Errorf("a skipped peer:\n%s", md[strings.Index(md, RESPHeading):])
	}
	// The goals judge on the scripts that ran.
	if g := goalByID(t, Goals(r), GoalRESPPipelined); g.Status != Miss || !strings.Contains(g.Measured, "GCRA 250.0k req/s = 1.20×") || strings.Contains(g.Measured, "fixed window") {
		t.Errorf("the pipelined goal with the fixed window skipped: %+v", g)
	}
	r.RESP = &RESP{Error: "redis-benchmark not found (Debian: apt-get install redis-tools)"}
	if md := string(Markdown(r, nil)); !strings.Contains(md, RESPHeading+"\n\nNot measured: redis-benchmark not found (Debian: apt-get install redis-tools).") {
		t.Errorf("no client: %s", md[strings.Index(md, RESPHeading):])
	}
}

// goalByID is the goal with that ID; a missing one fails the test.
func goalByID(t *testing.T, gs []Goal, id string) Goal {
	t.Helper()
	for _, g := range gs {
		if g.ID == id {
			return g
		}
	}
	t.Fatalf("no goal %q among %d", id, len(gs))
	return Goal{}
}

// TestGoalClusterForward: the goal is the direct measure, forwarded ids
// against local ids on the same members; without it the goal is not
// measured, whatever the round-robin rows say.
func TestGoalClusterForward(t *testing.T) {
	peers := func(local, fwd float64) []HTTPPeer {
		return []HTTPPeer{
			{Short: ShortLocalIDs, Requests: 10_000, Elapsed: time.Second, ServerCPU: local},
			{Short: ShortForwardedIDs, Requests: 10_000, Elapsed: time.Second, ServerCPU: fwd},
		}
	}
	for _, c := range []struct {
		direct           *DirectForward
		status, measured string
	}{
		{nil, NotMeasured, ""},
		{&DirectForward{Error: "boom"}, NotMeasured, ""},
		{&DirectForward{Peers: peers(0.5, 1.0), Forwarded: 10_000, Batches: 500}, Pass, "0.100 vs 0.050 CPU s per 1k checks, 20.0 checks per forwarded batch: 2.00×"},
		{&DirectForward{Peers: peers(0.5, 1.01)}, Miss, "2.02×"},
		{&DirectForward{Peers: peers(0.5, 1.0)[:1]}, NotMeasured, ""},
	} {
		r := synthetic()
		r.Cluster.Direct = c.direct
		var g Goal
		for _, x := range Goals(r) {
			if x.ID == GoalClusterForward {
				g = x
			}
		}
		if g.Status != c.status || !strings.Contains(g.Measured, c.measured) {
			t.Errorf("%+v: got %s %q, want %s containing %q", c.direct, g.Status, g.Measured, c.status, c.measured)
		}
	}
}

// TestPerfGoals: the performance issue's goals read the in-package
// benchmarks and section 3d as named, each at its threshold.
func TestPerfGoals(t *testing.T) {
	plan := map[string]gobench.Invocation{}
	for _, inv := range gobench.Plan(false) {
		for _, f := range inv.Families {
			plan[f.Title] = inv
		}
	}
	goal := func(r *Report, id string) Goal {
		for _, g := range Goals(r) {
			if g.ID == id {
				return g
			}
		}
		t.Fatalf("no goal %s", id)
		return Goal{}
	}
	for _, c := range []struct {
		family, out, id, status, measured string
	}{
		{gobench.FamCheck, "BenchmarkCheck/floor=map+mutex/p=1-2 1000 50 ns/op 20000000 checks/s 0 allocs/op\nBenchmarkCheck/system/p=1-2 1000 100 ns/op 10000000 checks/s 0 allocs/op\n", GoalCheckFloor, Pass, "10.00M vs 20.00M checks/s = 0.50×"},
		{gobench.FamCheck, "BenchmarkCheck/floor=map+mutex/p=1-2 1000 50 ns/op 20000000 checks/s 0 allocs/op\nBenchmarkCheck/system/p=1-2 1000 100 ns/op 9990000 checks/s 0 allocs/op\n", GoalCheckFloor, Miss, "= 0.50×"},
		{gobench.FamCheckJournal, "BenchmarkCheckJournal/sync=interval-2 1000 100 ns/op 16.0 journal-B/check\n", GoalJournalBytes, Pass, "16.0 B per check"},
		{gobench.FamCheckJournal, "BenchmarkCheckJournal/sync=interval-2 1000 100 ns/op 16.1 journal-B/check\n", GoalJournalBytes, Miss, "16.1 B per check"},
		{gobench.FamRecovery, "BenchmarkRecovery/buckets=1000000-2 1 200000000 ns/op 3000000 buckets/s\n", GoalRecovery, Pass, "3.00M buckets/s (buckets=1000000)"},
		{gobench.FamRecovery, "BenchmarkRecovery/buckets=1000000-2 1 400000000 ns/op 2500000 buckets/s\n", GoalRecovery, Miss, "2.50M buckets/s"},
	} {
		r := synthetic()
		r.InPkg = &InPkg{Runs: []gobench.Outcome{outcome(t, plan[c.family], "pkg: github.com/ratelimitd/ratelimitd/actors\n"+c.out, time.Second)}}
		if g := goal(r, c.id); g.Status != c.status || !strings.Contains(g.Measured, c.measured) {
			t.Errorf("%s: got %s %q, want %s containing %q", c.id, g.Status, g.Measured, c.status, c.measured)
		}
	}

	r := synthetic()
	r.Journal.Points = append(r.Journal.Points, scaling.JournalPoint{Mode: "interval", LatStats: scaling.LatStats{Checks: 850_000, Elapsed: time.Second}})
	if g := goal(r, GoalJournalRate); g.Status != Pass || !strings.Contains(g.Measured, "850.0k vs 1.00M checks/s = 0.85×") {
		t.Errorf("journal rate: got %s %q", g.Status, g.Measured)
	}
	r.Journal.Points[len(r.Journal.Points)-1].Checks = 849_000
	if g := goal(r, GoalJournalRate); g.Status != Miss {
		t.Errorf("journal rate at 0.849×: got %s %q", g.Status, g.Measured)
	}

	// 10M buckets of ids "user-0" … "user-9999999": a mean of 11.8888890 bytes.
	r = synthetic()
	r.Memory.Ratelimitd.Points = append(r.Memory.Ratelimitd.Points, scaling.MemPoint{Buckets: 10_000_000, PerBucket: 75.8})
	if g := goal(r, GoalMemoryPacked); g.Status != Pass || !strings.Contains(g.Measured, "at 10M buckets: 75.8 B, ids of 11.9 B on average: 63.9 B beyond the id") {
		t.Errorf("memory: got %s %q", g.Status, g.Measured)
	}
	r.Memory.Ratelimitd.Points[len(r.Memory.Ratelimitd.Points)-1].PerBucket = 76
	if g := goal(r, GoalMemoryPacked); g.Status != Miss {
		t.Errorf("memory at 76 B: got %s %q", g.Status, g.Measured)
	}
}

func TestMeanIDLen(t *testing.T) {
	for _, c := range []struct {
		n    int
		want float64
	}{
		{0, 0}, {1, 6}, {10, 6}, {11, (10*6 + 7) / 11.0}, {100, (10*6 + 90*7) / 100.0},
		{10_000_000, (10*6 + 90*7 + 900*8 + 9000*9 + 90000*10 + 900000*11 + 9000000*12) / 1e7},
	} {
		if got := meanIDLen(c.n); got != c.want {
			t.Errorf("meanIDLen(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// TestRESPPairedRatio: with every round's requests/s, the ratios are the
// median of each round's ratio, which a drift of the machine between
// rounds does not move: here a slow second round makes the totals' ratio
// 0.99× while every fast round, and the median, is 1.03×; the table and
// the README row say the same. With rounds that do not pair, the totals'.
func TestRESPPairedRatio(t *testing.T) {
	rounds := func(pipe int, rps ...float64) RESPRun {
		r := RESPRun{Pipeline: pipe, RoundRPS: rps}
		for _, v := range rps {
			reqs := int64(2 * v) // two seconds a round
			r.Requests += reqs
			r.Elapsed += 2 * time.Second
		}
		return r
	}
	r := synthetic()
	x := r.RESP
	x.Peers[0].Runs = []RESPRun{rounds(1, 60_000, 30_000, 61_000), rounds(16, 600_000, 600_000, 600_000)}
	x.Peers[1].Runs = []RESPRun{rounds(1, 58_000, 36_000, 59_000), rounds(16, 300_000, 300_000, 300_000)}
	x.Peers[2].Runs = []RESPRun{rounds(1, 50_000, 30_000, 50_000), rounds(16, 100_000, 100_000, 100_000)}
	x.Peers[3].Runs = []RESPRun{rounds(1, 60_000, 30_000, 61_000), rounds(16, 800_000, 800_000, 800_000)}
	if total := x.Peers[0].Run(1).ReqPerSec() / x.Peers[1].Run(1).ReqPerSec(); total >= 1 {
		t.Fatalf("the totals' ratio is %.3f; the test wants it below 1", total)
	}
	g := goalByID(t, Goals(r), GoalRESPSingle)
	if g.Status != Pass || !strings.Contains(g.Measured, "fixed window 51.0k req/s = 1.03×") || !strings.Contains(g.Measured, "GCRA 43.3k req/s = 1.20×") {
		t.Errorf("the single goal: %+v", g)
	}
	md := string(Markdown(r, nil))
	if !strings.Contains(md, "| 1 | 51.0k | 0.97× | 1.03× |") {
		t.Errorf("the fixed window's row at pipeline 1 (÷ INCR 0.97×, ratelimitd ÷ this 1.03×):\n%s", md[strings.Index(md, RESPHeading):])
	}
	if block := READMEBlock(r, "x"); !strings.Contains(block, "redis EVALSHA fixed window: 51.0k req/s | 1.03× | ≥ 1×: **PASS** |") {
		t.Errorf("the README row at pipeline 1:\n%s", block)
	}
	// Rounds that do not pair: the totals' ratio.
	x.Peers[1].Runs[0].RoundRPS = x.Peers[1].Runs[0].RoundRPS[:2]
	if g := goalByID(t, Goals(r), GoalRESPSingle); g.Status != Miss || !strings.Contains(g.Measured, "fixed window 51.0k req/s = 0.99×") {
		t.Errorf("unpaired rounds: %+v", g)
	}
}

// TestEmbeddedHandle: ratelimitd's Limiter is reported beside System.Check,
// with its own ratio, and is never the "fastest other" that the goals and
// either ratio compare against.
func TestEmbeddedHandle(t *testing.T) {
	e := &Embedded{PerRun: time.Second, Passes: 1, Keys: []int{1000, 100_000, 1_000_000},
		Limiters: []string{RatelimitdLimiter, RatelimitdHandle, "x/time/rate (sharded map)"}}
	for _, k := range e.Keys {
		for _, d := range []string{"uniform"} {
			for _, g := range []int{1} {
				e.Results = append(e.Results,
					EmbeddedResult{Limiter: RatelimitdLimiter, Keys: k, Dist: d, Goroutines: g, Checks: 2_000_000, Elapsed: time.Second},
					EmbeddedResult{Limiter: RatelimitdHandle, Keys: k, Dist: d, Goroutines: g, Checks: 9_000_000, Elapsed: time.Second},
					EmbeddedResult{Limiter: "x/time/rate (sharded map)", Keys: k, Dist: d, Goroutines: g, Checks: 4_000_000, Elapsed: time.Second})
			}
		}
	}
	r := &Report{Embedded: e}
	want := map[string]string{
		GoalEmbedded1k:  "worst case fastest other ÷ ratelimitd = 2.00× (uniform g=1: 2.00M vs x/time/rate 4.00M/s)",
		GoalEmbedded1M:  "worst case ratelimitd ÷ fastest other = 0.50× (uniform g=1: 2.00M vs x/time/rate 4.00M/s)",
		GoalEmbeddedAll: "worst row ratelimitd ÷ fastest other = 0.50× (1k keys uniform g=1: 2.00M vs x/time/rate 4.00M/s)",
	}
	for _, g := range Goals(r) {
		if w, ok := want[g.ID]; ok {
			if g.Measured != w {
				t.Errorf("goal %s measured %q, want %q", g.ID, g.Measured, w)
			}
			delete(want, g.ID)
		}
	}
	if len(want) != 0 {
		t.Errorf("goals not reported: %v", want)
	}
	md := string(Markdown(r, nil))
	for _, s := range []string{
		"| keys | distribution | goroutines | ratelimitd actors.System.Check | ratelimitd actors.Limiter.Allow | x/time/rate (sharded map) | System.Check ÷ fastest other | Limiter.Allow ÷ fastest other |",
		"| 100k | uniform | 1 | 2.00M/s, 0.00 allocs | 9.00M/s, 0.00 allocs | 4.00M/s, 0.00 allocs | 0.50× | 2.25× |",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("Markdown lacks %q:\n%s", s, md)
		}
	}
}
