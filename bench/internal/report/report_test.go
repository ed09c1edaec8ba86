package report

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		Notes: []string{"a note"},
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
	}
}

func TestGoals(t *testing.T) {
	gs := Goals(synthetic())
	want := []struct{ status, measured string }{
		{Pass, "31.0k vs 36.0k req/s = 0.86×"},
		{Pass, "= 6.20×"},
		{Miss, "900.0k checks/s"},
		{Miss, "worst case fastest other ÷ ratelimitd = 7.00×"},
		{Pass, "worst case ratelimitd ÷ fastest other = 1.25×"},
		{Miss, "at 1M buckets: 101 B vs 90 B = 1.12×"},
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
	charts := []string{"http_throughput.svg", "http_latency_cdf.svg", "embedded_throughput.svg", "memory_per_bucket.svg", "sweep_vs_expired.svg", "sweep_vs_live.svg"}
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
		"- **PASS** — ratelimitd HTTP GET", "- **MISS** — batches of 100",
		"| ratelimitd GET | GET /check_rate | 31.0k | 31.0k | 0.86× | 1.80 ms | 7.00 ms |",
		"| ratelimitd batch | POST /check_rate ×100 | 9.00k | 900.0k | 0.25× |",
		"| 0.021 | /proc | 0.032 |", // the GET peer: 1.3 s / 62k checks × 1000; 2 s / 62k req × 1000
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
