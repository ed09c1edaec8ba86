package gobench

import (
	"slices"
	"strings"
)

// Family is a set of benchmarks reported together, in one table: a
// top-level benchmark and its sub-benchmarks, or a few top-level
// benchmarks that measure one thing in different ways.
type Family struct {
	// Title names the family in the report, e.g. "BenchmarkApply".
	Title string
	// Top lists the top-level benchmarks (function names) of the family.
	Top []string
	// What says in a sentence what the family measures.
	What string
	// Primary is the unit the ratio to the baseline compares, e.g.
	// "ns/op" or "checks/s"; empty: the first unit of the results.
	Primary string
	// Baseline says which result each other result is compared with; the
	// zero Baseline means none.
	Baseline Baseline
	// Overhead asks for the difference to the baseline (primary −
	// baseline's primary) beside the ratio: a middleware's cost per
	// request, for instance.
	Overhead bool
}

// Baseline names the result a family's results are compared with.
type Baseline struct {
	// Level and Value: a result's baseline is the result of the family
	// whose name is the same except that its element Level (the names'
	// "/"-separated elements, 0 being the top-level benchmark) is Value:
	// Level 2, Value "baseline=map+mutex" pairs
	// BenchmarkApply/keys=1000/table with
	// BenchmarkApply/keys=1000/baseline=map+mutex.
	Level int
	Value string
	// Name, if set instead, is the full name of the one result every other
	// result of the family is compared with.
	Name string
}

// IsZero reports whether b names no baseline.
func (b Baseline) IsZero() bool { return b.Value == "" && b.Name == "" }

// Label is how the report names the baseline: Value or Name.
func (b Baseline) Label() string {
	if b.Name != "" {
		return b.Name
	}
	return b.Value
}

// Summary is a family's results: one row per (sub-)benchmark.
type Summary struct {
	Family
	// Units are the units any row has, in the order first seen.
	Units []string
	Rows  []Row
}

// Row is one (sub-)benchmark over its runs.
type Row struct {
	Name string // the full name, e.g. BenchmarkApply/keys=1000/table
	// Runs is the number of result lines (-count).
	Runs int
	// Iterations is the median b.N of the runs.
	Iterations int64
	// Stats has one entry per unit the runs reported, in Units order.
	Stats []Stat
	// Baseline is the full name of the row this one is compared with
	// (its own for a baseline), or "" if none.
	Baseline string
	// Ratio is the median of the primary unit ÷ the baseline's (1 for a
	// baseline itself); 0 if there is no baseline or either is missing.
	Ratio float64
	// Diff is the median of the primary unit − the baseline's, with
	// Family.Overhead and a baseline.
	Diff float64
}

// Stat is one unit's figures over the runs.
type Stat struct {
	Unit             string
	Median, Min, Max float64
	N                int // the runs that reported it
}

// Stat returns the row's figures for unit.
func (r Row) Stat(unit string) (Stat, bool) {
	for _, s := range r.Stats {
		if s.Unit == unit {
			return s, true
		}
	}
	return Stat{}, false
}

// Sub returns the row's name relative to the family: without the
// top-level benchmark's name when the family has a single one.
func (s *Summary) Sub(r Row) string {
	if len(s.Top) == 1 {
		if rest, ok := strings.CutPrefix(r.Name, s.Top[0]+"/"); ok {
			return rest
		}
	}
	return r.Name
}

// Row returns the row with the given full name.
func (s *Summary) Row(name string) (Row, bool) {
	for _, r := range s.Rows {
		if r.Name == name {
			return r, true
		}
	}
	return Row{}, false
}

// PrimaryUnit returns the unit ratios compare: Family.Primary, or the
// first unit of the results.
func (s *Summary) PrimaryUnit() string {
	if s.Primary != "" {
		return s.Primary
	}
	if len(s.Units) > 0 {
		return s.Units[0]
	}
	return ""
}

// Summarize groups results by family, in the order of fams; results of
// top-level benchmarks no family names get a family of their own, with no
// baseline, after the others. Families without results are left out.
func Summarize(results []Result, fams []Family) []Summary {
	byTop := map[string]int{}
	var sums []Summary
	for _, f := range fams {
		for _, t := range f.Top {
			byTop[t] = len(sums)
		}
		sums = append(sums, Summary{Family: f})
	}
	grouped := make([][]Result, len(sums))
	for _, r := range results {
		i, ok := byTop[r.Top()]
		if !ok {
			i = len(sums)
			byTop[r.Top()] = i
			sums = append(sums, Summary{Family: Family{Title: r.Top(), Top: []string{r.Top()}}})
			grouped = append(grouped, nil)
		}
		grouped[i] = append(grouped[i], r)
	}
	var out []Summary
	for i := range sums {
		if len(grouped[i]) == 0 {
			continue
		}
		s := sums[i]
		s.summarize(grouped[i])
		out = append(out, s)
	}
	return out
}

func (s *Summary) summarize(results []Result) {
	var names []string
	byName := map[string][]Result{}
	for _, r := range results {
		if _, ok := byName[r.Name]; !ok {
			names = append(names, r.Name)
		}
		byName[r.Name] = append(byName[r.Name], r)
		for _, m := range r.Metrics {
			if !slices.Contains(s.Units, m.Unit) {
				s.Units = append(s.Units, m.Unit)
			}
		}
	}
	for _, name := range names {
		runs := byName[name]
		row := Row{Name: name, Runs: len(runs)}
		its := make([]float64, len(runs))
		for i, r := range runs {
			its[i] = float64(r.Iterations)
		}
		row.Iterations = int64(median(its))
		for _, u := range s.Units {
			var vs []float64
			for _, r := range runs {
				if v, ok := r.Metric(u); ok {
					vs = append(vs, v)
				}
			}
			if len(vs) == 0 {
				continue
			}
			row.Stats = append(row.Stats, Stat{Unit: u, Median: median(vs), Min: slices.Min(vs), Max: slices.Max(vs), N: len(vs)})
		}
		s.Rows = append(s.Rows, row)
	}
	if s.Baseline.IsZero() {
		return
	}
	unit := s.PrimaryUnit()
	for i := range s.Rows {
		r := &s.Rows[i]
		base, ok := s.baselineOf(r.Name)
		if !ok {
			continue
		}
		r.Baseline = base.Name
		v, ok1 := r.Stat(unit)
		b, ok2 := base.Stat(unit)
		if ok1 && ok2 && b.Median != 0 {
			r.Ratio = v.Median / b.Median
			if s.Overhead {
				r.Diff = v.Median - b.Median
			}
		}
	}
}

// baselineOf returns the baseline row of the row named name.
func (s *Summary) baselineOf(name string) (Row, bool) {
	if s.Baseline.Name != "" {
		return s.Row(s.Baseline.Name)
	}
	el := strings.Split(name, "/")
	if s.Baseline.Level >= len(el) {
		return Row{}, false
	}
	el[s.Baseline.Level] = s.Baseline.Value
	return s.Row(strings.Join(el, "/"))
}

// median returns the median of vs (the mean of the middle two for an even
// count); vs is sorted in place.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}
