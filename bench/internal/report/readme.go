package report

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
	"github.com/ratelimitd/ratelimitd/bench/internal/scaling"
)

// The markers around the block of README.md that UpdateREADME writes.
const (
	READMEBegin = "<!-- bench:begin -->"
	READMEEnd   = "<!-- bench:end -->"
)

// READMEBlock renders the summary the project's README.md shows in its
// performance section, markers included: one line of date and machine, a
// link to the full report (resultsLink, relative to the README), and a
// table of the headline figures — the goals, the sweep, the key in-package
// benchmarks — each beside the baseline or peer measured in the same run
// and their ratio. Every figure is formatted exactly as Markdown prints it
// in RESULTS.md, so that each can be found there.
func READMEBlock(r *Report, resultsLink string) string {
	var b md
	b.p("%s", READMEBegin)
	b.p("<!-- Written by `cd bench && go run ./cmd/compare -readme ../README.md` (make bench-compare) from its run; do not edit by hand. -->")
	b.p("")
	m := r.Machine
	b.p("Measured by `bench/cmd/compare` in %s mode on %s, on %s, %d cores (GOMAXPROCS %d), %s; every figure below is in",
		r.Mode, r.Started.UTC().Format("2006-01-02 15:04 MST"), m.CPU, m.Cores, m.GOMAXPROCS, m.Go)
	b.p("[%s](%s), with how it was measured, the exact commands and the peers' versions. Each ratio is ratelimitd's", resultsLink, resultsLink)
	b.p("figure ÷ the baseline's or peer's, both measured in the same run (for the benchmarks, in the same `go test` process).")
	b.p("")
	rows := readmeRows(r)
	cells := make([][]string, len(rows))
	for i, x := range rows {
		cells[i] = []string{x.what, x.ours, x.base, x.ratio, x.goal}
	}
	b.table([]string{"what", "ratelimitd", "baseline or peer, same run", "ratio", "goal"}, cells)
	b.p("%s", READMEEnd)
	return b.String()
}

// UpdateREADME replaces the block between READMEBegin and READMEEnd of the
// file at path (markers included) with READMEBlock(r, resultsLink). The
// file must hold each marker once, in that order, each on a line of its
// own; nothing else of the file changes.
func UpdateREADME(path string, r *Report, resultsLink string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := replaceBlock(old, READMEBlock(r, resultsLink))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, updated, fi.Mode().Perm())
}

// replaceBlock returns doc with its marked block replaced by block (which
// holds the markers and ends with a newline).
func replaceBlock(doc []byte, block string) ([]byte, error) {
	if bytes.Count(doc, []byte(READMEBegin)) != 1 || bytes.Count(doc, []byte(READMEEnd)) != 1 {
		return nil, fmt.Errorf("want exactly one %s and one %s line", READMEBegin, READMEEnd)
	}
	i := bytes.Index(doc, []byte(READMEBegin))
	j := bytes.Index(doc, []byte(READMEEnd))
	if j < i {
		return nil, errors.New(READMEEnd + " comes before " + READMEBegin)
	}
	if i > 0 && doc[i-1] != '\n' {
		return nil, errors.New(READMEBegin + " is not at the start of a line")
	}
	j += len(READMEEnd)
	if j < len(doc) && doc[j] == '\n' {
		j++
	}
	var out bytes.Buffer
	out.Write(doc[:i])
	out.WriteString(block)
	out.Write(doc[j:])
	return out.Bytes(), nil
}

type readmeRow struct{ what, ours, base, ratio, goal string }

const notMeasured = "not measured in this run"

func readmeRows(r *Report) []readmeRow {
	goals := map[string]Goal{}
	for _, g := range Goals(r) {
		goals[g.ID] = g
	}
	goal := func(id string) string {
		g, ok := goals[id]
		if !ok {
			return ""
		}
		return g.Target + ": **" + g.Status + "**"
	}
	var rows []readmeRow
	// goalRow is a row that is a goal alone: its name, and what it was
	// judged on.
	goalRow := func(id string) readmeRow {
		g := goals[id]
		x := readmeRow{what: g.Name, ours: g.Measured, goal: goal(id)}
		if x.ours == "" {
			x.ours = notMeasured
		}
		return x
	}
	add := func(x readmeRow) {
		for _, p := range []*string{&x.ours, &x.base, &x.ratio} {
			if *p == "" {
				*p = "—"
			}
		}
		rows = append(rows, x)
	}

	// The goals.
	bare, get, batch, gub := r.HTTP.Peer(ShortBare), r.HTTP.Peer(ShortGet), r.HTTP.Peer(ShortBatch), r.HTTP.Peer(ShortGubernator)
	x := readmeRow{what: "HTTP `GET /check_rate`, one check per request, vs a bare net/http handler (a child process each, the same load client)", goal: goal(GoalHTTPBare)}
	if get != nil && bare != nil {
		x.ours, x.base, x.ratio = rate(get.ReqPerSec())+" req/s", "bare handler: "+rate(bare.ReqPerSec())+" req/s", ratio(get.ReqPerSec()/bare.ReqPerSec())
	} else {
		x.ours = notMeasured
	}
	add(x)
	x = readmeRow{what: "HTTP, one check per request, vs gubernator's HTTP API", goal: goal(GoalHTTPGubernator)}
	if get != nil && gub != nil {
		x.ours, x.base, x.ratio = rate(get.ReqPerSec())+" req/s", "gubernator: "+rate(gub.ReqPerSec())+" req/s", ratio(get.ReqPerSec()/gub.ReqPerSec())
	} else {
		x.ours = notMeasured
	}
	add(x)
	x = readmeRow{what: "HTTP batches (`POST /check_rate`, a JSON array of checks)", goal: goal(GoalBatches)}
	if batch != nil {
		x.ours = fmt.Sprintf("%s checks/s (%s req/s of %d checks)", rate(batch.ChecksPerSec()), rate(batch.ReqPerSec()), batch.ChecksPerRequest)
	} else {
		x.ours = notMeasured
	}
	add(x)
	for _, c := range []struct {
		keys int
		id   string
	}{{1_000, GoalEmbedded1k}, {1_000_000, GoalEmbedded1M}} {
		x = readmeRow{what: fmt.Sprintf("embedded `actors.System.Check` at %s keys vs the fastest in-process library, the worst case for ratelimitd", count(c.keys)), goal: goal(c.id)}
		if ec, rl, best, ok := r.Embedded.worst(c.keys); ok {
			gs := "goroutines"
			if ec.goroutines == 1 {
				gs = "goroutine"
			}
			x.what = fmt.Sprintf("embedded `actors.System.Check` at %s keys vs the fastest in-process library, in ratelimitd's worst case (%s, %d %s)", count(c.keys), ec.dist, ec.goroutines, gs)
			x.ours = rate(rl.PerSec()) + " checks/s"
			x.base = best.Limiter + ": " + rate(best.PerSec()) + " checks/s"
			x.ratio = ratio(rl.PerSec() / best.PerSec())
		} else {
			x.ours = notMeasured
		}
		add(x)
	}
	add(goalRow(GoalEmbeddedAll))
	x = readmeRow{what: "memory per live bucket (heap after GC) vs Redis's per key (`used_memory`)", goal: goal(GoalMemory)}
	if m := r.Memory; m != nil {
		if n, rl, rd, ok := largestCommon(m); ok {
			x.what = fmt.Sprintf("memory per live bucket at %s buckets (heap after GC) vs Redis's per key (`used_memory`)", count(n))
			x.ours, x.base, x.ratio = fmt.Sprintf("%.1f B", rl), fmt.Sprintf("Redis: %.1f B", rd), ratio(rl/rd)
		} else {
			x.ours = notMeasured
		}
	} else {
		x.ours = notMeasured
	}
	add(x)
	add(goalRow(GoalMemoryPacked))
	for _, x := range append(respRows(r, goal), rlsReadmeRows(r, goal)...) {
		add(x)
	}

	// The sweep.
	sweepRow := func(what, goalID string, pts func(*Sweep) sweepCurve, label func(p sweepPointLabel) string) {
		x := readmeRow{what: what}
		if goalID != "" {
			x.goal = goal(goalID)
		}
		if r.Sweep == nil {
			x.ours = notMeasured
			add(x)
			return
		}
		first, last, ok := sweepEnds(pts(r.Sweep))
		if !ok {
			x.ours = notMeasured
			add(x)
			return
		}
		x.ours = fmt.Sprintf("%.1f ns %s", last.NsPerDeleted(), label(sweepPointLabel{last.Live, last.Expired}))
		x.base = fmt.Sprintf("%.1f ns %s", first.NsPerDeleted(), label(sweepPointLabel{first.Live, first.Expired}))
		x.ratio = ratio(last.NsPerDeleted() / first.NsPerDeleted())
		add(x)
	}
	sweepRow("sweep (`table.DeleteExpired`), cost per deleted bucket as the expired buckets grow", "",
		func(s *Sweep) sweepCurve { return s.VsExpired },
		func(p sweepPointLabel) string { return fmt.Sprintf("at %s expired", count(p.expired)) })
	sweepRow("sweep, cost per deleted bucket as the live buckets grow", GoalSweepCostLive,
		func(s *Sweep) sweepCurve { return s.VsLive },
		func(p sweepPointLabel) string { return fmt.Sprintf("beside %s live", count(p.live)) })
	x = readmeRow{what: "check latency p99 while a sweep deletes every bucket at once vs before it", goal: goal(GoalSweepStall)}
	if s := r.SweepLat; s != nil && s.Baseline.P99 > 0 {
		x.what = fmt.Sprintf("check latency p99 while a sweep deletes %s buckets at once vs before it", count(s.Expired))
		x.ours, x.base, x.ratio = dur(s.During.P99), "before: "+dur(s.Baseline.P99), ratio(float64(s.During.P99)/float64(s.Baseline.P99))
	} else {
		x.ours = notMeasured
	}
	add(x)

	// The in-package benchmarks.
	p := r.InPkg
	if p == nil {
		add(readmeRow{what: "the module's own benchmarks (`go test -bench`)", ours: notMeasured})
		return rows
	}
	bench := func(what, fam, name, unit, baseWhat string, extra ...string) {
		x := readmeRow{what: what}
		s := p.Family(fam)
		var row gobench.Row
		ok := false
		if s != nil {
			row, ok = s.Row(name)
		}
		st, ok2 := row.Stat(unit)
		if !ok || !ok2 {
			x.ours = notMeasured
			add(x)
			return
		}
		x.ours = metric(st.Median, unit) + readmeUnit(unit)
		for _, u := range extra {
			if e, ok := row.Stat(u); ok {
				x.ours += ", " + metricHeader(u) + " " + metric(e.Median, u)
			}
		}
		if s.Overhead && row.Ratio != 0 {
			x.ours += " (" + signed(metric(row.Diff, unit)) + ")"
		}
		if row.Baseline != "" && row.Baseline != row.Name {
			if base, ok := s.Row(row.Baseline); ok {
				if bst, ok := base.Stat(unit); ok {
					x.base = baseWhat + ": " + metric(bst.Median, unit) + readmeUnit(unit)
					for _, u := range extra {
						if e, ok := base.Stat(u); ok {
							x.base += ", " + metricHeader(u) + " " + metric(e.Median, u)
						}
					}
				}
			}
			if row.Ratio != 0 {
				x.ratio = ratio(row.Ratio)
			}
		}
		add(x)
	}
	bench("`table.Apply` vs a map+mutex counter (`BenchmarkApply/keys=1000/table`)", gobench.FamApply, "BenchmarkApply/keys=1000/table", "ns/op", "map+mutex")
	bench("`table.Apply` vs a map+mutex counter (`BenchmarkApply/keys=1000000/table`)", gobench.FamApply, "BenchmarkApply/keys=1000000/table", "ns/op", "map+mutex")
	bench("`System.Check` vs a map+mutex floor (`BenchmarkCheck/system/p=1`)", gobench.FamCheck, "BenchmarkCheck/system/p=1", "checks/s", "map+mutex floor")
	rows[len(rows)-1].goal = goal(GoalCheckFloor)
	bench("`System.Check` vs a map+mutex floor (`BenchmarkCheck/system/p=64`)", gobench.FamCheck, "BenchmarkCheck/system/p=64", "checks/s", "map+mutex floor")
	add(topKeysRow(p, goal(GoalTopKeys)))
	for _, mode := range []string{"none", "interval", "always"} {
		bench(fmt.Sprintf("`System.Check` with journal sync `%s` vs no journal (`BenchmarkCheckJournal/sync=%s`)", mode, mode),
			gobench.FamCheckJournal, "BenchmarkCheckJournal/sync="+mode, "checks/s", "no journal", "p99-µs")
	}
	add(goalRow(GoalJournalRate))
	add(goalRow(GoalJournalBytes))
	rec := readmeRow{what: "recovery on start, snapshot + segments (`BenchmarkRecovery`)"}
	if s := p.Family(gobench.FamRecovery); s != nil && len(s.Rows) > 0 {
		row := s.Rows[len(s.Rows)-1]
		rec.what = fmt.Sprintf("recovery on start, snapshot + segments (`%s`)", row.Name)
		if st, ok := row.Stat("buckets/s"); ok {
			rec.ours = metric(st.Median, "buckets/s") + " buckets/s"
			if t, ok := row.Stat("ns/op"); ok {
				rec.ours += ", " + metric(t.Median, "ns/op") + " per start"
			}
		}
	}
	if rec.ours == "" {
		rec.ours = notMeasured
	}
	rec.goal = goal(GoalRecovery)
	add(rec)
	jg := readmeRow{what: "journal growth at a steady rate, default settings (`BenchmarkJournalGrowth`)"}
	if s := p.Family(gobench.FamJournalGrowth); s != nil && len(s.Rows) > 0 {
		var parts []string
		for _, u := range []string{"journal-B/check", "GiB/h-before-compaction", "MiB-on-disk"} {
			if st, ok := s.Rows[0].Stat(u); ok {
				parts = append(parts, metric(st.Median, u)+" "+u)
			}
		}
		jg.ours = strings.Join(parts, ", ")
	}
	if jg.ours == "" {
		jg.ours = notMeasured
	}
	add(jg)
	bench("HTTP middleware, many requests in flight, vs the bare handler (`BenchmarkMiddlewareOverhead/middleware/parallel`)", gobench.FamMiddleware, "BenchmarkMiddlewareOverhead/middleware/parallel", "ns/op", "bare handler")
	bench("HTTP middleware, one request at a time, vs the bare handler (`BenchmarkMiddlewareOverhead/middleware`)", gobench.FamMiddleware, "BenchmarkMiddlewareOverhead/middleware", "ns/op", "bare handler")
	bench("named-rule URL match, cached, vs the uncached longest-prefix match (`BenchmarkMatchCached/serial`)", gobench.FamMatch, "BenchmarkMatchCached/serial", "ns/op", "uncached")
	px := readmeRow{what: "limiting reverse proxy vs `httputil.ReverseProxy` alone (`BenchmarkProxy`)"}
	if s := p.Family(gobench.FamProxy); s != nil {
		if row, ok := s.Row("BenchmarkProxy"); ok {
			a, ok1 := row.Stat("ratelimitd-req/s")
			b, ok2 := row.Stat("reverseproxy-req/s")
			q, ok3 := row.Stat("ratelimitd/reverseproxy")
			if ok1 && ok2 && ok3 {
				px.ours = metric(a.Median, a.Unit) + " req/s"
				px.base = "ReverseProxy alone: " + metric(b.Median, b.Unit) + " req/s"
				px.ratio = metric(q.Median, q.Unit)
			}
		}
	}
	if px.ours == "" {
		px.ours = notMeasured
	}
	add(px)
	return rows
}

// topKeysRow is README's row of the top keys' cost: BenchmarkCheck with
// top-keys tracking against without, in alternating rounds, at p=64, as
// the row above it.
func topKeysRow(p *InPkg, goal string) readmeRow {
	x := readmeRow{what: "`System.Check` with top-keys tracking (at its defaults, which sample the admitted checks at these rates) vs without, in alternating rounds (`BenchmarkCheck/system+topkeys/p=64`)", goal: goal, ours: notMeasured}
	s := p.Family(gobench.FamCheck)
	if s == nil {
		return x
	}
	row, ok := s.Row(topKeysPrefix + "p=64")
	w, ok1 := row.Stat("checks/s")
	wo, ok2 := row.Stat("without-checks/s")
	r, ok3 := row.Stat("x-system")
	if !ok || !ok1 || !ok2 || !ok3 {
		return x
	}
	x.ours = metric(w.Median, "checks/s") + " checks/s"
	if a, ok := row.Stat("allocs/op"); ok {
		x.ours += ", " + metric(a.Median, "allocs/op") + " allocs/op"
	}
	x.base, x.ratio = "without: "+metric(wo.Median, "checks/s")+" checks/s", ratio(r.Median)
	return x
}

type sweepCurve = []scaling.SweepPoint

type sweepPointLabel struct{ live, expired int }

// readmeUnit is what follows a figure in the README: a time carries its
// own unit, so ns/op adds "/op" ("142 ns/op"); other units are added after
// a space (" checks/s").
func readmeUnit(unit string) string {
	if _, ok := timeScale(unit); ok {
		if rest, ok := strings.CutPrefix(unit, "ns"); ok && strings.HasPrefix(rest, "/") {
			return rest
		}
		return ""
	}
	return " " + unit
}

// worst returns, at keys, the case in which ratelimitd's checks/s ÷ the
// fastest other library's is lowest, with both results.
func (e *Embedded) worst(keys int) (c embCase, rl, best *EmbeddedResult, ok bool) {
	if e == nil {
		return c, nil, nil, false
	}
	worstX := 0.0
	for _, ec := range e.cases(keys) {
		ours := e.find(RatelimitdLimiter, keys, ec.dist, ec.goroutines)
		if ours == nil || ours.Error != "" || ours.PerSec() == 0 {
			continue
		}
		var fastest *EmbeddedResult
		for _, name := range e.Limiters {
			if isRatelimitd(name) {
				continue
			}
			if o := e.find(name, keys, ec.dist, ec.goroutines); o != nil && o.Error == "" && (fastest == nil || o.PerSec() > fastest.PerSec()) {
				fastest = o
			}
		}
		if fastest == nil || fastest.PerSec() == 0 {
			continue
		}
		if x := ours.PerSec() / fastest.PerSec(); !ok || x < worstX {
			c, rl, best, worstX, ok = ec, ours, fastest, x, true
		}
	}
	return c, rl, best, ok
}

// Numbers returns the number tokens of a Markdown text, in order. A
// number token is a run of decimal digits that does not follow a letter,
// a digit, '.' or '_' (so p99, go1.26.8, v2.13.0 and sha256 hold none),
// continued by groups of ',' or '.' and digits (1,001,000, 0.88), and then
// by at most one suffix: 'k' or 'M' not followed by a letter (12.3k, 1M;
// then optionally '×' or '%'), '×' or '%' (0.88×, 4%), or a time unit ns,
// µs or ms not followed by a letter, after at most one space (142 ns,
// 1.06 µs; the token is then written with one space: "142 ns"). With
// exemptCode, numbers in code are not tokens: inline code spans (between
// backtick runs of equal length) and fenced code blocks (``` or ~~~).
func Numbers(text string, exemptCode bool) []string {
	var out []string
	fence := ""
	for line := range strings.SplitSeq(text, "\n") {
		if exemptCode {
			t := strings.TrimSpace(line)
			if fence != "" {
				if strings.HasPrefix(t, fence) {
					fence = ""
				}
				continue
			}
			if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
				fence = t[:3]
				continue
			}
			line = stripCodeSpans(line)
		}
		out = append(out, lineNumbers(line)...)
	}
	return out
}

// stripCodeSpans replaces each inline code span of line by a space.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		ticks := line[i : i+n]
		// Find the closing run of exactly n backticks.
		end := -1
		for j := i + n; j < len(line); {
			k := strings.Index(line[j:], ticks)
			if k < 0 {
				break
			}
			k += j
			m := 0
			for k+m < len(line) && line[k+m] == '`' {
				m++
			}
			if m == n {
				end = k
				break
			}
			j = k + m
		}
		if end < 0 { // no closing run: the backticks are literal
			b.WriteString(ticks)
			i += n
			continue
		}
		b.WriteByte(' ')
		i = end + n
	}
	return b.String()
}

func lineNumbers(s string) []string {
	var out []string
	isLetter := func(r rune) bool { return unicode.IsLetter(r) }
	at := func(i int) rune {
		if i >= len(s) {
			return utf8.RuneError
		}
		r, _ := utf8.DecodeRuneInString(s[i:])
		return r
	}
	isDigit := func(i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }
	prev := rune(0)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isDigit(i) || isLetter(prev) || unicode.IsDigit(prev) || prev == '.' || prev == '_' {
			prev = r
			i += size
			continue
		}
		j := i
		for isDigit(j) {
			j++
		}
		for j+1 < len(s) && (s[j] == '.' || s[j] == ',') && isDigit(j+1) {
			j++
			for isDigit(j) {
				j++
			}
		}
		tok := s[i:j]
		switch c := at(j); {
		case (c == 'k' || c == 'M') && !isLetter(at(j+1)):
			j++
			tok = s[i:j]
			if n := at(j); n == '×' || n == '%' {
				j += utf8.RuneLen(n)
				tok = s[i:j]
			}
		case c == '×' || c == '%':
			j += utf8.RuneLen(c)
			tok = s[i:j]
		default:
			k := j
			if c == ' ' {
				k++
			}
			for _, u := range []string{"ns", "µs", "ms"} {
				if strings.HasPrefix(s[k:], u) && !isLetter(at(k+len(u))) {
					tok = s[i:j] + " " + u
					j = k + len(u)
					break
				}
			}
		}
		out = append(out, tok)
		prev, _ = utf8.DecodeLastRuneInString(s[:j])
		i = j
	}
	return out
}
