package report

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// rate formats a per-second figure: 950, 12.3k, 1.23M.
func rate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.1fk", x/1e3)
	case x >= 1e3:
		return fmt.Sprintf("%.2fk", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}

// count formats a count of things: 1k, 100k, 1M, 10M, or the number.
func count(n int) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dM", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%dk", n/1e3)
	default:
		return fmt.Sprint(n)
	}
}

// dur formats a latency with three significant digits.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d >= 100*time.Microsecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d >= 10*time.Microsecond:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	case d >= time.Microsecond:
		return fmt.Sprintf("%.2f µs", float64(d)/1e3)
	default:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	}
}

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// num formats an integer with thousands separators: 1,001,000.
func num[T ~int | ~int64](n T) string {
	s := fmt.Sprint(int64(n))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// window formats a window length: 1h, 30s, 1h30m.
func window(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// timeScale returns how many nanoseconds one unit of a benchmark metric is
// when the metric is a time: ns/op, ns/deleted, p99-µs, match-ns.
func timeScale(unit string) (float64, bool) {
	switch {
	case strings.HasPrefix(unit, "ns/"), unit == "ns", strings.HasSuffix(unit, "-ns"):
		return 1, true
	case unit == "µs", unit == "us", strings.HasSuffix(unit, "-µs"), strings.HasSuffix(unit, "-us"):
		return 1e3, true
	case unit == "ms", strings.HasSuffix(unit, "-ms"):
		return 1e6, true
	}
	return 0, false
}

// metricHeader names a benchmark metric's column: a time's unit becomes
// "time" (ns/op → time/op) or is dropped (p99-µs → p99), as its cells carry
// their own unit; other units are shown as they are.
func metricHeader(unit string) string {
	if _, ok := timeScale(unit); !ok {
		return unit
	}
	if rest, ok := strings.CutPrefix(unit, "ns/"); ok {
		return "time/" + rest
	}
	for _, suf := range []string{"-ns", "-µs", "-us", "-ms"} {
		if h, ok := strings.CutSuffix(unit, suf); ok {
			return h
		}
	}
	return "time"
}

// metric formats a benchmark figure: a time with its unit and three
// significant digits ("85.3 ns", "1.06 µs", "5.30 ms"), anything else as a
// plain figure ("0", "77", "0.249", "12.3k", "1.49M").
func metric(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if s, ok := timeScale(unit); ok {
		return fdur(v * s)
	}
	return figure(v)
}

// fdur formats nanoseconds, possibly fractional, with three significant
// digits and a unit.
func fdur(ns float64) string {
	a := math.Abs(ns)
	switch {
	case a == 0:
		return "0 ns"
	case a < 10:
		return fmt.Sprintf("%.2f ns", ns)
	case a < 100:
		return fmt.Sprintf("%.1f ns", ns)
	case a < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case a < 1e4:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	case a < 1e5:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	case a < 1e6:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	case a < 1e7:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case a < 1e8:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case a < 1e9:
		return fmt.Sprintf("%.0f ms", ns/1e6)
	default:
		return fmt.Sprintf("%.2f s", ns/1e9)
	}
}

// figure formats a number with three significant digits, abbreviating
// thousands and millions as rate does: 0, 77, 3.46, 0.249, 1.23k, 12.3k,
// 1.49M. Whole numbers below 10,000 are shown whole.
func figure(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e4:
		return fmt.Sprintf("%.0f", v)
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 1e3:
		return fmt.Sprintf("%.2fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.01:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// ratio formats a ratio: 0.88×.
func ratio(x float64) string { return fmt.Sprintf("%.2f×", x) }
