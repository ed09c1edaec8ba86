package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
)

// InPkgHeading is the heading of the in-package section of RESULTS.md.
const InPkgHeading = "## 4. In-package benchmarks"

func (b *md) inPkgSection(r *Report) {
	b.p("%s", InPkgHeading)
	b.p("")
	if b.skipped(r, "gobench") || r.InPkg == nil {
		return
	}
	p := r.InPkg
	b.p("The ratelimitd module's own benchmarks (`go test -bench`), one `go test` child process per line below, run")
	b.p("one after another in the module's root (the working tree), after the other sections. Every figure is the")
	b.p("median of the runs (`-count`); \"range\" is the lowest and the highest run of the family's main figure; the")
	b.p("ratio divides a row's main figure by its baseline's, measured in the same `go test` process. Times are per")
	b.p("operation as the benchmark defines it.")
	if r.Mode == "short" {
		b.p("This is **short** mode: `-short` and a few iterations, a smoke test of the runs and of the parsing; these")
		b.p("figures measure nothing.")
	}
	b.p("")
	var rows [][]string
	var total time.Duration
	for _, o := range p.Runs {
		status := "ok"
		if o.Err != "" {
			status = "FAILED: " + mdCell(firstLine(o.Err))
		}
		total += o.Wall
		rows = append(rows, []string{"`" + mdCell(o.Command) + "`", o.Wall.Round(time.Second).String(), fmt.Sprint(len(o.Output.Results)), status})
	}
	for _, c := range p.NotRun {
		rows = append(rows, []string{"`" + mdCell(c) + "`", "—", "—", "not run: the time budget was used up"})
	}
	b.table([]string{"command (in the module root)", "wall time (build included)", "result lines", "status"}, rows)
	b.p("In all %s of wall time.", total.Round(time.Second))
	b.p("")
	for _, o := range p.Runs {
		if o.Err != "" {
			b.p("`%s` failed:", o.Command)
			b.p("")
			b.p("```")
			b.p("%s", strings.TrimRight(o.Err, "\n"))
			b.p("```")
			b.p("")
		}
		for i := range o.Summaries {
			b.inPkgFamily(&o.Summaries[i], o.Pkg)
		}
	}
}

func (b *md) inPkgFamily(s *gobench.Summary, pkg string) {
	b.p("### `%s` (`%s`)", s.Title, pkg)
	b.p("")
	if s.What != "" {
		b.p("%s", s.What)
		b.p("")
	}
	primary := s.PrimaryUnit()
	header := []string{"benchmark", "runs", "b.N"}
	for _, u := range s.Units {
		header = append(header, metricHeader(u))
	}
	header = append(header, "range of "+metricHeader(primary))
	hasBase := !s.Baseline.IsZero()
	if hasBase {
		header = append(header, metricHeader(primary)+" ÷ "+s.Baseline.Label())
		if s.Overhead {
			header = append(header, metricHeader(primary)+" − "+s.Baseline.Label())
		}
	}
	var rows [][]string
	for _, r := range s.Rows {
		row := []string{"`" + mdCell(s.Sub(r)) + "`", fmt.Sprint(r.Runs), figure(float64(r.Iterations))}
		for _, u := range s.Units {
			if st, ok := r.Stat(u); ok {
				row = append(row, metric(st.Median, u))
			} else {
				row = append(row, "—")
			}
		}
		if st, ok := r.Stat(primary); ok && st.N > 1 {
			row = append(row, metric(st.Min, primary)+" – "+metric(st.Max, primary))
		} else {
			row = append(row, "—")
		}
		if hasBase {
			if r.Ratio != 0 {
				row = append(row, ratio(r.Ratio))
			} else {
				row = append(row, "—")
			}
			if s.Overhead {
				if r.Ratio != 0 && r.Baseline != r.Name {
					row = append(row, signed(metric(r.Diff, primary)))
				} else {
					row = append(row, "—")
				}
			}
		}
		rows = append(rows, row)
	}
	b.table(header, rows)
}

// signed puts a + before a figure that has no sign.
func signed(s string) string {
	if strings.HasPrefix(s, "-") || s == "—" {
		return s
	}
	return "+" + s
}

// mdCell makes s safe in a table cell.
func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
