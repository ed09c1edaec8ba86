package gobench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func parseFile(t *testing.T, name string, procs int) Output {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := Parse(f, procs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParseSamples parses go test output captured from the module's own
// benchmarks (short and full settings).
func TestParseSamples(t *testing.T) {
	for _, c := range []struct {
		file    string
		results int
		first   string
		pkg     string
		check   string // a name
		unit    string
		value   float64 // its first run's value of unit
		units   int     // its number of metrics
	}{
		{"short-table.txt", 8, "BenchmarkApply/keys=1000/baseline=map+mutex", "github.com/ratelimitd/ratelimitd/table", "BenchmarkDeleteExpired/live=10000", "ns/deleted", 74.12, 4},
		{"full-table-delete.txt", 6, "BenchmarkDeleteExpired/live=10000", "github.com/ratelimitd/ratelimitd/table", "BenchmarkDeleteExpired/live=1000000", "ns/op", 2894214, 4},
		{"short-actors.txt", 10, "BenchmarkCheck/floor=map+mutex/p=1", "github.com/ratelimitd/ratelimitd/actors", "BenchmarkCheckJournal/sync=interval", "p99-µs", 95744, 7},
		{"full-actors-check.txt", 24, "BenchmarkCheck/floor=map+mutex/p=1", "github.com/ratelimitd/ratelimitd/actors", "BenchmarkCheckJournal/sync=always", "x-memory", 0.01254, 7},
		{"short-actors.txt", 10, "BenchmarkCheck/floor=map+mutex/p=1", "github.com/ratelimitd/ratelimitd/actors", "BenchmarkJournalGrowth", "GiB/h-before-compaction", 2.119, 4},
		{"short-api.txt", 5, "BenchmarkMiddlewareOverhead/bare", "github.com/ratelimitd/ratelimitd/api", "BenchmarkProxy", "ratelimitd/reverseproxy", 0.9005, 5},
		{"short-rules.txt", 4, "BenchmarkMatchCached/serial", "github.com/ratelimitd/ratelimitd/api/rules", "BenchmarkMatchUncached", "ns/op", 138.5, 3},
	} {
		t.Run(c.file+"/"+c.check, func(t *testing.T) {
			out := parseFile(t, c.file, 2)
			if len(out.Results) != c.results {
				t.Fatalf("%d results, want %d", len(out.Results), c.results)
			}
			if out.Other != 0 || len(out.Failed) != 0 {
				t.Errorf("Other %d, Failed %v: want none", out.Other, out.Failed)
			}
			if !strings.HasPrefix(out.CPU, "Oxide") {
				t.Errorf("CPU %q", out.CPU)
			}
			if r := out.Results[0]; r.Name != c.first || r.Procs != 2 || r.Pkg != c.pkg || r.Iterations <= 0 {
				t.Errorf("first result %+v, want %s in %s", r, c.first, c.pkg)
			}
			i := slices.IndexFunc(out.Results, func(r Result) bool { return r.Name == c.check })
			if i < 0 {
				t.Fatalf("no %s", c.check)
			}
			r := out.Results[i]
			if v, ok := r.Metric(c.unit); !ok || v != c.value {
				t.Errorf("%s %s = %v, %v; want %v", c.check, c.unit, v, ok, c.value)
			}
			if len(r.Metrics) != c.units {
				t.Errorf("%s has %d metrics, want %d: %+v", c.check, len(r.Metrics), c.units, r.Metrics)
			}
		})
	}
}

// noisy is go test output as a benchmark that writes its own output, a
// failing one and a skipped one can make it, with GOMAXPROCS 4.
const noisy = `goos: linux
goarch: amd64
pkg: example.com/m/a
cpu: Test CPU @ 2.0GHz
BenchmarkPlain-4   	 1000000	      1042 ns/op	      16 B/op	       1 allocs/op
BenchmarkLogs/size-1024-4         	2024/11/30 08:00:00 a log line from the benchmark
  	 50000	     23456 ns/op	     12.5 MB/s
BenchmarkSameLine/x-4  	some output 100	  5.5 ns/op
BenchmarkNoNsOp-4   	       1	     29461 ratelimitd-p99-µs	      7629 req/s	         0.9005 ratio
BenchmarkFails/sub-4   	--- FAIL: BenchmarkFails/sub-4
    bench_test.go:12: boom
BenchmarkSkipped-4   	--- SKIP: BenchmarkSkipped-4
    bench_test.go:20: not today
BenchmarkBench-4   	     100	  10 ns/op	  3 widgets
--- BENCH: BenchmarkBench-4
    bench_test.go:30: 3 widgets 100 x
	BenchmarkNotAName	 10 1 ns/op
Benchmarking is fun 10 1 ns/op
BenchmarkNaN-4   	  10	  NaN weird/op
--- FAIL: BenchmarkTop-4
FAIL
exit status 1
pkg: example.com/m/b
BenchmarkOther-4   	 7	 3.0e+06 ns/op
FAIL	example.com/m/a	1.234s
`

func TestParseNoisy(t *testing.T) {
	out, err := Parse(strings.NewReader(noisy), 4)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name  string
		n     int64
		units string
	}
	wants := []want{
		{"BenchmarkPlain", 1000000, "ns/op B/op allocs/op"},
		{"BenchmarkLogs/size-1024", 50000, "ns/op MB/s"},
		{"BenchmarkSameLine/x", 100, "ns/op"},
		{"BenchmarkNoNsOp", 1, "ratelimitd-p99-µs req/s ratio"},
		{"BenchmarkBench", 100, "ns/op widgets"},
		{"BenchmarkNaN", 10, "weird/op"},
		{"BenchmarkOther", 7, "ns/op"},
	}
	if len(out.Results) != len(wants) {
		t.Fatalf("got %d results %+v, want %d", len(out.Results), out.Results, len(wants))
	}
	for i, w := range wants {
		r := out.Results[i]
		var units []string
		for _, m := range r.Metrics {
			units = append(units, m.Unit)
		}
		if r.Name != w.name || r.Iterations != w.n || strings.Join(units, " ") != w.units || r.Procs != 4 {
			t.Errorf("result %d: %s n=%d units %q procs %d; want %s n=%d units %q", i, r.Name, r.Iterations, units, r.Procs, w.name, w.n, w.units)
		}
	}
	if v, _ := out.Results[1].Metric("MB/s"); v != 12.5 {
		t.Errorf("MB/s = %v", v)
	}
	if v, _ := out.Results[5].Metric("weird/op"); !math.IsNaN(v) {
		t.Errorf("NaN parsed as %v", v)
	}
	if v, _ := out.Results[6].Metric("ns/op"); v != 3e6 {
		t.Errorf("3.0e+06 parsed as %v", v)
	}
	if out.Results[6].Pkg != "example.com/m/b" || out.Results[0].Pkg != "example.com/m/a" {
		t.Errorf("pkgs %q, %q", out.Results[0].Pkg, out.Results[6].Pkg)
	}
	if got := strings.Join(out.Failed, ","); got != "BenchmarkFails/sub,BenchmarkTop" {
		t.Errorf("Failed = %q", got)
	}
	if out.CPU != "Test CPU @ 2.0GHz" {
		t.Errorf("CPU = %q", out.CPU)
	}
	// The failure's and the skip's messages, the --- BENCH: block's log
	// line, the indented name, "Benchmarking is fun" and "exit status 1"
	// (the log line after a name is not counted: the name is pending).
	if out.Other != 6 {
		t.Errorf("Other = %d, want 6", out.Other)
	}
}

func TestSplitProcs(t *testing.T) {
	for _, c := range []struct {
		in    string
		procs int
		name  string
		n     int
	}{
		{"BenchmarkA-2", 2, "BenchmarkA", 2},
		{"BenchmarkA/size-1024-2", 2, "BenchmarkA/size-1024", 2},
		{"BenchmarkA/size-1024", 2, "BenchmarkA/size-1024", 1}, // not ours: kept
		{"BenchmarkA/size-1024", 1, "BenchmarkA/size-1024", 1}, // GOMAXPROCS 1: no suffix
		{"BenchmarkA/size-1024-8", 0, "BenchmarkA/size-1024", 8},
		{"BenchmarkA/future-per-check-16", 16, "BenchmarkA/future-per-check", 16},
		{"BenchmarkA-", 2, "BenchmarkA-", 1},
	} {
		if name, n := splitProcs(c.in, c.procs); name != c.name || n != c.n {
			t.Errorf("splitProcs(%q, %d) = %q, %d; want %q, %d", c.in, c.procs, name, n, c.name, c.n)
		}
	}
}

// invFor returns the invocation of the plan that runs family title.
func invFor(t *testing.T, short bool, title string) Invocation {
	t.Helper()
	for _, inv := range Plan(short) {
		for _, f := range inv.Families {
			if f.Title == title {
				return inv
			}
		}
	}
	t.Fatalf("no invocation runs %s", title)
	return Invocation{}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func TestSummarize(t *testing.T) {
	out := parseFile(t, "full-actors-check.txt", 2)
	fams := invFor(t, false, FamCheck).Families
	sums := Summarize(out.Results, fams)
	if len(sums) != 2 || sums[0].Title != FamCheck || sums[1].Title != FamCheckJournal {
		t.Fatalf("summaries %+v", sums)
	}
	check := sums[0]
	if got := strings.Join(check.Units, " "); got != "ns/op checks/s B/op allocs/op" {
		t.Errorf("units %q", got)
	}
	sys, ok := check.Row("BenchmarkCheck/system/p=64")
	if !ok {
		t.Fatal("no system/p=64")
	}
	st, _ := sys.Stat("checks/s")
	if sys.Runs != 3 || st.Median != 1702960 || st.Min != 1691164 || st.Max != 3439477 || st.N != 3 {
		t.Errorf("system/p=64: %+v %+v", sys, st)
	}
	if sys.Iterations != 2968642 {
		t.Errorf("median b.N %d", sys.Iterations)
	}
	if sys.Baseline != "BenchmarkCheck/floor=map+mutex/p=64" || !near(sys.Ratio, 1702960.0/14657166) {
		t.Errorf("system/p=64 baseline %q ratio %v", sys.Baseline, sys.Ratio)
	}
	floor, _ := check.Row("BenchmarkCheck/floor=map+mutex/p=1")
	if floor.Baseline != floor.Name || floor.Ratio != 1 {
		t.Errorf("the floor's own ratio: %q %v", floor.Baseline, floor.Ratio)
	}
	if got := check.Sub(sys); got != "system/p=64" {
		t.Errorf("Sub = %q", got)
	}
	j := sums[1]
	always, _ := j.Row("BenchmarkCheckJournal/sync=always")
	if !near(always.Ratio, 28901.0/2340855) {
		t.Errorf("always ratio %v", always.Ratio)
	}
	if p99, _ := always.Stat("p99-µs"); p99.Median != 18891 {
		t.Errorf("always p99 %+v", p99)
	}

	// A fixed baseline; a top-level benchmark no family names; Overhead.
	rules := Summarize(parseFile(t, "short-rules.txt", 2).Results, invFor(t, false, FamMatch).Families)
	if len(rules) != 1 || len(rules[0].Rows) != 4 {
		t.Fatalf("rules: %+v", rules)
	}
	cached, _ := rules[0].Row("BenchmarkMatchCached/serial")
	if cached.Baseline != "BenchmarkMatchUncached" || !near(cached.Ratio, 119.7/138.5) || rules[0].Sub(cached) != "BenchmarkMatchCached/serial" {
		t.Errorf("cached: %+v", cached)
	}
	api := Summarize(parseFile(t, "short-api.txt", 2).Results, invFor(t, false, FamMiddleware).Families)
	if len(api) != 2 || api[0].Title != FamMiddleware || api[1].Title != "BenchmarkProxy" || !api[1].Baseline.IsZero() {
		t.Fatalf("api: %+v", api)
	}
	mw, _ := api[0].Row("BenchmarkMiddlewareOverhead/middleware/parallel")
	if mw.Baseline != "BenchmarkMiddlewareOverhead/bare/parallel" || !near(mw.Diff, 3898-1942) || !near(mw.Ratio, 3898.0/1942) {
		t.Errorf("middleware/parallel: %+v", mw)
	}
	if p, ok := api[1].Row("BenchmarkProxy"); !ok || p.Ratio != 0 || p.Baseline != "" {
		t.Errorf("proxy: %+v", p)
	}
	if Summarize(nil, invFor(t, false, FamApply).Families) != nil {
		t.Error("families without results are kept")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestPlan checks that every family of the plan is selected by its
// invocation's -bench expression, and the modes' flags.
func TestPlan(t *testing.T) {
	for _, short := range []bool{false, true} {
		titles := map[string]bool{}
		for _, inv := range Plan(short) {
			re := regexp.MustCompile(inv.Bench)
			for _, f := range inv.Families {
				if titles[f.Title] {
					t.Errorf("family %s twice", f.Title)
				}
				titles[f.Title] = true
				for _, top := range f.Top {
					if !re.MatchString(top) {
						t.Errorf("%s: -bench %s does not select %s", inv.Pkg, inv.Bench, top)
					}
				}
				if f.Baseline.Name != "" && !slices.Contains(f.Top, strings.Split(f.Baseline.Name, "/")[0]) {
					t.Errorf("%s: baseline %s is not in the family", f.Title, f.Baseline.Name)
				}
			}
			args := inv.Args()
			if slices.Contains(args, "-short") != short {
				t.Errorf("short=%v: %v", short, args)
			}
			if short && !strings.HasSuffix(inv.Benchtime, "x") {
				t.Errorf("short mode runs %s for -benchtime %s, want a count of iterations", inv.Pkg, inv.Benchtime)
			}
			if args[0] != "test" || args[len(args)-1] != inv.Pkg || !strings.HasPrefix(inv.Pkg, "./") {
				t.Errorf("args %v", args)
			}
		}
		for _, f := range []string{FamApply, FamApplyAlgorithms, FamDeleteExpired, FamCheck, FamCheckJournal, FamShardSharing, FamBatchJournal, FamRecovery, FamJournalGrowth, FamMiddleware, FamProxy, FamMatch, FamKey, FamClientIP} {
			if !titles[f] {
				t.Errorf("short=%v: no family %s", short, f)
			}
		}
	}
}

func TestCommandLine(t *testing.T) {
	inv := Invocation{Pkg: "./actors/", Bench: "^Benchmark(Check|CheckJournal)$", Benchtime: "1s", Count: 3, Short: true, Env: []string{"A=1", "B=x y"}, Timeout: 5 * time.Minute}
	want := `A=1 B='x y' go test -run '^$' -bench '^Benchmark(Check|CheckJournal)$' -benchmem -benchtime 1s -count 3 -short -timeout 5m0s ./actors/`
	if got := inv.CommandLine(); got != want {
		t.Errorf("CommandLine:\n got %s\nwant %s", got, want)
	}
}

// fakeGo writes a script standing in for the go command: it records its
// arguments, its working directory and $FAKE_ENV, prints body and exits
// with status.
func fakeGo(t *testing.T, body string, status int, sleep string) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	out := filepath.Join(dir, "out.txt")
	if err := os.WriteFile(out, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n" +
		"printf '%s\\n' \"$@\" > " + argsFile + "\n" +
		"pwd >> " + argsFile + "\n" +
		"echo \"$FAKE_ENV\" >> " + argsFile + "\n" +
		"cat " + out + "\n" +
		"echo 'a line on stderr' >&2\n"
	if sleep != "" {
		script += "sleep " + sleep + "\n"
	}
	script += "exit " + string(rune('0'+status)) + "\n"
	bin = filepath.Join(dir, "go")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func TestExec(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("testdata", "short-table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	bin, argsFile := fakeGo(t, string(sample), 0, "")
	root := t.TempDir()
	inv := invFor(t, true, FamApply)
	inv.Env = []string{"FAKE_ENV=hello"}
	var lines []string
	o := Exec(context.Background(), bin, root, 2, inv, func(l string) { lines = append(lines, l) })
	if o.Err != "" {
		t.Fatalf("Err: %s", o.Err)
	}
	if len(o.Output.Results) != 8 || len(o.Summaries) != 3 || o.Summaries[0].Title != FamApply || o.Wall <= 0 {
		t.Errorf("%d results, summaries %d, wall %v", len(o.Output.Results), len(o.Summaries), o.Wall)
	}
	if o.Output.Other != 1 { // the stderr line, in the same stream
		t.Errorf("Other = %d, want 1", o.Output.Other)
	}
	if len(lines) != strings.Count(string(sample), "\n")+1 {
		t.Errorf("onLine saw %d lines", len(lines))
	}
	got, _ := os.ReadFile(argsFile)
	want := strings.Join(append(inv.Args(), root, "hello"), "\n") + "\n"
	if string(got) != want {
		t.Errorf("the child got\n%s\nwant\n%s", got, want)
	}
	if o.Command != inv.CommandLine() {
		t.Errorf("Command %q", o.Command)
	}
}

func TestExecFailures(t *testing.T) {
	root := t.TempDir()
	inv := invFor(t, true, FamApply)

	bin, _ := fakeGo(t, "BenchmarkApply/keys=1000/table-2 \t 100\t 5 ns/op\nFAIL\n", 1, "")
	o := Exec(context.Background(), bin, root, 2, inv, nil)
	if !strings.Contains(o.Err, "exit status 1") || !strings.Contains(o.Err, "a line on stderr") || len(o.Output.Results) != 1 {
		t.Errorf("exit status 1: Err %q, %d results", o.Err, len(o.Output.Results))
	}

	bin, _ = fakeGo(t, "PASS\n", 0, "")
	if o := Exec(context.Background(), bin, root, 2, inv, nil); !strings.Contains(o.Err, "no benchmark result") {
		t.Errorf("no results: Err %q", o.Err)
	}

	bin, _ = fakeGo(t, "BenchmarkApply/keys=1000/table-2 \t--- FAIL: BenchmarkApply/keys=1000/table-2\n", 0, "")
	if o := Exec(context.Background(), bin, root, 2, inv, nil); !strings.Contains(o.Err, "--- FAIL: BenchmarkApply/keys=1000/table") {
		t.Errorf("a failed benchmark: Err %q", o.Err)
	}

	bin, _ = fakeGo(t, "BenchmarkApply/keys=1000/table-2 \t", 0, "30")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	o = Exec(ctx, bin, root, 2, inv, nil)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a cancelled child took %v to be killed", took)
	}
	if !strings.Contains(o.Err, "killed after") {
		t.Errorf("cancelled: Err %q", o.Err)
	}

	o = Exec(context.Background(), filepath.Join(root, "no-such-go"), root, 2, inv, nil)
	if !strings.Contains(o.Err, "start") {
		t.Errorf("no go command: Err %q", o.Err)
	}
}

// TestREADMETable: bench/README.md's table of the in-package runs has one
// row per invocation of the full plan, in its order, naming its package
// and its full mode's -benchtime and -count.
func TestREADMETable(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| package | benchmarks | baseline | full mode |")
	if !ok {
		t.Fatal("bench/README.md has no table of the in-package runs")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	lines := strings.Split(table, "\n")
	if len(lines) < 3 {
		t.Fatalf("bench/README.md's table of the in-package runs has no rows: %q", table)
	}
	var got []string
	for _, row := range lines[2:] { // after the rest of the header line and the rule
		cells := strings.Split(row, " | ")
		if len(cells) < 4 {
			t.Fatalf("row %q has no full-mode cell (the fourth)", row)
		}
		got = append(got, strings.TrimPrefix(cells[0], "| ")+" "+cells[3])
	}
	var want []string
	for _, inv := range Plan(false) {
		want = append(want, "`"+inv.Pkg+"` `-benchtime "+inv.Benchtime+" -count "+strconv.Itoa(inv.Count)+"`")
	}
	if !slices.Equal(got, want) {
		t.Errorf("bench/README.md's rows (package, full mode):\n %q\nthe plan's:\n %q", got, want)
	}
}
