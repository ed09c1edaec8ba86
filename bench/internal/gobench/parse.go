// Package gobench runs the ratelimitd module's own Go benchmarks (`go test
// -bench`) as child processes, parses the standard benchmark output and
// summarizes it per benchmark family: the median of each figure over the
// runs (-count), and the ratio of each sub-benchmark to the baseline the
// family measures beside it in the same run (map+mutex for table.Apply, no
// journal for the journal modes, and so on).
package gobench

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Result is one benchmark result line: a run of one (sub-)benchmark.
type Result struct {
	// Name is the benchmark's full name without the -GOMAXPROCS suffix,
	// e.g. "BenchmarkApply/keys=1000/table".
	Name string
	// Procs is the GOMAXPROCS suffix the name carried (1 if none).
	Procs int
	// Pkg is the import path of the last "pkg:" line before the result.
	Pkg        string
	Iterations int64
	// Metrics are the value/unit pairs in the order of the line: ns/op,
	// B/op, allocs/op and whatever the benchmark reported (checks/s,
	// ns/deleted, p99-µs, …).
	Metrics []Metric
}

// Metric is one figure of a result line.
type Metric struct {
	Value float64
	Unit  string
}

// Metric returns the value of the result's metric with the given unit.
func (r Result) Metric(unit string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Unit == unit {
			return m.Value, true
		}
	}
	return 0, false
}

// Top returns the top-level benchmark's name: Name up to its first "/".
func (r Result) Top() string {
	top, _, _ := strings.Cut(r.Name, "/")
	return top
}

// Output is what Parse found in a go test output.
type Output struct {
	Results []Result
	// Failed are the names (as printed, suffix removed) of the benchmarks
	// reported by "--- FAIL:" lines.
	Failed []string
	// CPU is the "cpu:" header line's value, if any.
	CPU string
	// Other counts the lines that were neither results nor headers nor
	// known go test chatter (a benchmark's own output, for instance).
	Other int
}

// Parse reads go test -bench output and returns its result lines.
//
// A result line is a name starting with "Benchmark", an iteration count,
// then value/unit pairs ("142.3 ns/op", "0 B/op", "5304 p99-µs"), separated
// by blanks or tabs; a line may carry no pairs at all when the benchmark
// reported ns/op as 0 and nothing else. procs is the GOMAXPROCS the
// benchmarks ran with: the testing package appends "-procs" to every name
// when it is not 1, and Parse removes that suffix; with procs ≤ 0 it
// removes any trailing "-<digits>".
//
// Parse tolerates the benchmarks' own output: the testing package prints a
// benchmark's name before running it, so anything the benchmark writes to
// stdout or stderr can land between the name and its figures, on the same
// line or on lines of its own. A name line whose rest is not figures is
// kept as pending, and the next line that ends with an iteration count and
// value/unit pairs completes it. Lines of no interest (goos:, PASS, ok,
// log lines, --- BENCH: blocks) are skipped; the error is only a read
// error.
func Parse(r io.Reader, procs int) (Output, error) {
	var out Output
	var pkg, pending string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(trimmed, "pkg:"); ok && !strings.HasPrefix(line, " ") {
			pkg, pending = strings.TrimSpace(v), ""
			continue
		}
		if v, ok := strings.CutPrefix(trimmed, "cpu:"); ok && !strings.HasPrefix(line, " ") {
			out.CPU = strings.TrimSpace(v)
			continue
		}
		if v, ok := strings.CutPrefix(trimmed, "--- FAIL:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 && isBenchName(f[0]) {
				name, _ := splitProcs(f[0], procs)
				out.Failed = append(out.Failed, name)
				if pending == f[0] {
					pending = ""
				}
			}
			continue
		}
		f := strings.Fields(trimmed)
		if len(f) == 0 {
			continue
		}
		if isBenchName(f[0]) && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			if strings.Contains(trimmed, "--- FAIL:") {
				// The name, then the failure: "BenchmarkX-2 \t--- FAIL: BenchmarkX-2".
				name, _ := splitProcs(f[0], procs)
				out.Failed = append(out.Failed, name)
				pending = ""
				continue
			}
			if strings.Contains(trimmed, "--- SKIP:") {
				pending = ""
				continue
			}
			if n, ms, ok := figures(f[1:]); ok {
				out.Results = append(out.Results, result(f[0], procs, pkg, n, ms))
				pending = ""
				continue
			}
			if n, ms, ok := trailingFigures(f[1:]); ok {
				out.Results = append(out.Results, result(f[0], procs, pkg, n, ms))
				pending = ""
				continue
			}
			pending = f[0]
			continue
		}
		if pending != "" {
			if n, ms, ok := trailingFigures(f); ok {
				out.Results = append(out.Results, result(pending, procs, pkg, n, ms))
				pending = ""
				continue
			}
		}
		if !chatter(trimmed) {
			out.Other++
		}
	}
	return out, sc.Err()
}

func result(name string, procs int, pkg string, n int64, ms []Metric) Result {
	name, p := splitProcs(name, procs)
	return Result{Name: name, Procs: p, Pkg: pkg, Iterations: n, Metrics: ms}
}

// isBenchName reports whether s looks like a benchmark's name: "Benchmark"
// followed by nothing, or by a character that is not a lower-case letter
// (the testing package's rule for benchmark functions).
func isBenchName(s string) bool {
	rest, ok := strings.CutPrefix(s, "Benchmark")
	if !ok {
		return false
	}
	return rest == "" || rest[0] < 'a' || rest[0] > 'z'
}

// splitProcs removes the "-N" GOMAXPROCS suffix from a printed name.
func splitProcs(name string, procs int) (string, int) {
	if procs == 1 {
		return name, 1
	}
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return name, 1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n <= 0 || (procs > 1 && n != procs) {
		return name, 1
	}
	return name[:i], n
}

// figures parses "N v1 u1 v2 u2 …": an iteration count and value/unit
// pairs, all of f.
func figures(f []string) (int64, []Metric, bool) {
	if len(f) == 0 || len(f)%2 == 0 {
		return 0, nil, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n <= 0 {
		return 0, nil, false
	}
	ms := make([]Metric, 0, len(f)/2)
	for i := 1; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || !isUnit(f[i+1]) {
			return 0, nil, false
		}
		ms = append(ms, Metric{Value: v, Unit: f[i+1]})
	}
	return n, ms, true
}

// trailingFigures finds the longest tail of f that figures accepts with at
// least one value/unit pair: the figures after a benchmark's own output on
// the same line.
func trailingFigures(f []string) (int64, []Metric, bool) {
	for i := 0; i+3 <= len(f); i++ {
		if n, ms, ok := figures(f[i:]); ok && len(ms) > 0 {
			return n, ms, true
		}
	}
	return 0, nil, false
}

// isUnit reports whether s can be a unit: not a number, no spaces (Fields
// saw to that), and not empty.
func isUnit(s string) bool {
	if s == "" {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err != nil
}

// chatter reports whether a line is go test's own: headers, PASS/FAIL, the
// ok/FAIL package line, and the indented lines of --- BENCH: blocks.
func chatter(s string) bool {
	for _, p := range []string{"goos:", "goarch:", "pkg:", "cpu:", "PASS", "FAIL", "ok ", "ok\t", "--- BENCH:", "--- SKIP:", "?"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
