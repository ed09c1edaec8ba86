package report

import (
	"fmt"
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
