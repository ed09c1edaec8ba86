package report

import (
	"fmt"
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
