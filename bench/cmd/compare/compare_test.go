package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
	"github.com/ratelimitd/ratelimitd/bench/internal/report"
)

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"--save", "", "--dir", "/tmp/a b", "it's"})
	if want := `--save '' --dir '/tmp/a b' 'it'\''s'`; got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}

// TestLineHandoff: with two processors the probe measures a time, more
// than nothing and less than its budget (two goroutines took every turn);
// it returns within the budget.
func TestLineHandoff(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: nothing to hand a line over to")
	}
	start := time.Now()
	h := lineHandoff()
	if h <= 0 || h >= handoffBudget {
		t.Errorf("lineHandoff() = %v, want a time in (0, %v)", h, handoffBudget)
	}
	if took := time.Since(start); took > handoffBudget+time.Second {
		t.Errorf("lineHandoff took %v, past its budget %v", took, handoffBudget)
	}
}

func TestCDF(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Microsecond
	}
	pts := cdf(lat)
	if len(pts) != 104 {
		t.Fatalf("%d points, want 104", len(pts))
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Fraction <= pts[i-1].Fraction || pts[i].Latency < pts[i-1].Latency {
			t.Fatalf("point %d %+v does not follow %+v", i, pts[i], pts[i-1])
		}
	}
	if first, last := pts[0], pts[len(pts)-1]; first.Latency != time.Microsecond || last.Latency != time.Millisecond || last.Fraction != 1 {
		t.Errorf("first %+v, last %+v", first, last)
	}
	if cdf(nil) != nil {
		t.Error("cdf(nil) != nil")
	}
}

func TestRequests(t *testing.T) {
	paths := getPaths()
	if len(paths) != httpKeys || paths[7] != "/check_rate?id=user-7&scale=3600000&limit=1000000000000" {
		t.Errorf("getPaths: %d paths, [7] = %q", len(paths), paths[7])
	}
	seen := map[string]bool{}
	for _, b := range batchBodies() {
		var checks []struct {
			ID    string `json:"id"`
			Scale int64  `json:"scale"`
			Limit int64  `json:"limit"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatal(err)
		}
		if len(checks) != batchSize {
			t.Fatalf("a batch of %d checks, want %d", len(checks), batchSize)
		}
		for _, c := range checks {
			if seen[c.ID] || c.Scale != httpScaleMs || c.Limit != httpLimit {
				t.Errorf("check %+v repeated or wrong", c)
			}
			seen[c.ID] = true
		}
	}
	if len(seen) != httpKeys || !seen[keys.ID(0)] || !seen[keys.ID(httpKeys-1)] {
		t.Errorf("batches cover %d ids, want all %d", len(seen), httpKeys)
	}
	if g := gubernatorBodies(); len(g) != httpKeys {
		t.Errorf("%d gubernator bodies", len(g))
	}
}

// TestREADMEPerformanceNumbersComeFromResults enforces "every number in
// README's performance section comes from the report": each number token
// of the project's README.md (../../../README.md from this package's
// directory), in its "## Performance" section — from that heading to the
// next line starting with "## " — must be a number token of
// bench/RESULTS.md (../../RESULTS.md), the report of the last full run.
//
// A number token is what report.Numbers finds: a run of digits not
// preceded by a letter, a digit, '.' or '_' (so p99, go1.26.8 or v2.13.0
// hold none), with its ',' and '.' groups (1,001,000; 0.88) and at most
// one suffix among k and M (12.3k, 1M, then optionally × or %), × or %
// (0.88×, 4%), or a time unit ns, µs or ms after at most one space
// (142 ns). Tokens are compared whole: README's "0.85" is not RESULTS.md's
// "0.85×".
//
// Exempt are only the numbers in code, in README.md: inline code spans
// (commands, flags, benchmark names such as `BenchmarkApply/keys=1000`)
// and fenced code blocks. Nothing else is exempt, the date and machine
// line of the generated block included: it is drawn from RESULTS.md too.
// In RESULTS.md every token counts, code included.
//
// The README's block between <!-- bench:begin --> and <!-- bench:end -->
// is written by a full run with -readme (make bench-compare); prose outside
// it must hold no numbers. The one allowance: while RESULTS.md predates the
// in-package section (no "In-package benchmarks" heading, a report older
// than the generator), the test is skipped, naming the numbers it lacks.
func TestREADMEPerformanceNumbersComeFromResults(t *testing.T) {
	readmePath := filepath.Join("..", "..", "..", "README.md")
	resultsPath := filepath.Join("..", "..", "RESULTS.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatalf("the project's README: %v", err)
	}
	results, err := os.ReadFile(resultsPath)
	if err != nil {
		t.Fatalf("the report: %v", err)
	}
	section, ok := performanceSection(string(readme))
	if !ok {
		t.Fatalf("%s has no \"## Performance\" section", readmePath)
	}
	if !strings.Contains(section, report.READMEBegin) || !strings.Contains(section, report.READMEEnd) {
		t.Errorf("%s's performance section lacks the generated block (%s … %s)", readmePath, report.READMEBegin, report.READMEEnd)
	}
	have := map[string]bool{}
	for _, n := range report.Numbers(string(results), false) {
		have[n] = true
	}
	var missing []string
	nums := report.Numbers(section, true)
	for _, n := range nums {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(nums) == 0 {
		t.Errorf("no numbers in %s's performance section: is the block empty?", readmePath)
	}
	if len(missing) == 0 {
		return
	}
	if !strings.Contains(string(results), "In-package benchmarks") {
		t.Skipf("%s predates the in-package section (no \"In-package benchmarks\" heading): regenerate it and README.md's block "+
			"with make bench-compare; until then %d number(s) of README.md's performance section are not in it: %s",
			resultsPath, len(missing), strings.Join(missing, ", "))
	}
	t.Errorf("%d number(s) of %s's performance section are not in %s (regenerate both with make bench-compare, "+
		"or move the number into the generated block or a code span): %s", len(missing), readmePath, resultsPath, strings.Join(missing, ", "))
}

// performanceSection returns README's "## Performance" section: from its
// heading to the next level-2 heading.
func performanceSection(readme string) (string, bool) {
	lines := strings.SplitAfter(readme, "\n")
	start := -1
	for i, l := range lines {
		if start < 0 {
			if strings.TrimRight(l, " \r\n") == "## Performance" {
				start = i
			}
			continue
		}
		if strings.HasPrefix(l, "## ") {
			return strings.Join(lines[start:i], ""), true
		}
	}
	if start < 0 {
		return "", false
	}
	return strings.Join(lines[start:], ""), true
}

func TestPerformanceSection(t *testing.T) {
	doc := "# x\n## Performance\n\nA 1.\n### Sub 2\n## Development\n3\n"
	if got, ok := performanceSection(doc); !ok || got != "## Performance\n\nA 1.\n### Sub 2\n" {
		t.Errorf("got %q, %v", got, ok)
	}
	if got, ok := performanceSection("## Performance\nlast 4\n"); !ok || got != "## Performance\nlast 4\n" {
		t.Errorf("at the end: got %q, %v", got, ok)
	}
	if _, ok := performanceSection("## Performances\n"); ok {
		t.Error("found a section that is not there")
	}
}

// TestWriteREADME: -readme rewrites the block of the given file, linking
// the RESULTS.md written, relative to the README.
func TestWriteREADME(t *testing.T) {
	root := t.TempDir()
	readme := filepath.Join(root, "README.md")
	doc := "# x\n\n## Performance\n\n" + report.READMEBegin + "\nold\n" + report.READMEEnd + "\n\n## Development\n"
	if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := &report.Report{Mode: "full", Started: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	if err := writeREADME(readme, filepath.Join(root, "bench"), rep); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(readme)
	if want := "# x\n\n## Performance\n\n" + report.READMEBlock(rep, "bench/RESULTS.md") + "\n## Development\n"; string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if err := writeREADME(filepath.Join(root, "missing.md"), root, rep); err == nil {
		t.Error("no error for a missing README")
	}
}

// TestREADMEListsSections: bench/README.md's example of -only names every
// section the flag takes, in the order they run.
func TestREADMEListsSections(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-only \S+ +# some sections only \(([^)]*)\)`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("bench/README.md has no example of -only listing the sections")
	}
	if got := strings.Split(string(m[1]), ", "); !slices.Equal(got, sections) {
		t.Errorf("bench/README.md lists the sections %q; -only takes %q", got, sections)
	}
}
