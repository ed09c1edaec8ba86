package table

import (
	"math/bits"
	"time"
)

// decideFixed is the fixed-window rule for a window already holding count
// hits; reset is the time until the window ends, in ns.
func decideFixed(d *Decision, count int64, req *Request, reset int64) {
	*d = Decision{Limit: req.Limit, ResetAfter: time.Duration(reset)}
	switch {
	case req.Hits == 0:
		d.Allowed = count < req.Limit
	case req.Hits <= req.Limit-count:
		d.Allowed = true
		count += req.Hits
	}
	d.Count = count
	d.Remaining = max(req.Limit-count, 0)
	if !d.Allowed {
		d.RetryAfter = d.ResetAfter
	}
}

// windowState is a sliding window at one moment: the counts of the
// current and the previous fixed window, and how far into the current one
// we are. Everything is in ns; the weighted count is
// prev·(size−elapsed)/size + cur, compared exactly in 128-bit arithmetic.
type windowState struct {
	size, elapsed int64
	cur, prev     int64
}

// fits reports whether cur+n hits fit under limit with the previous
// window weighted as it is left ns before the current window ends:
// prev·left + (cur+n)·size ≤ limit·size.
func (w *windowState) fits(n, limit, left int64) bool {
	if n > limit-w.cur {
		return false
	}
	return !less128(mul128(limit, w.size), add128(mul128(w.prev, left), mul128(w.cur+n, w.size)))
}

func (w *windowState) decide(d *Decision, req *Request) {
	left := w.size - w.elapsed // of the previous window, still inside the rolling window
	n := max(req.Hits, 1)      // a peek asks whether one more hit fits
	*d = Decision{Limit: req.Limit}
	d.Allowed = w.fits(n, req.Limit, left)
	cur := w.cur
	if d.Allowed && req.Hits > 0 {
		cur += req.Hits
	}
	// Count: the weighted count, rounded up.
	d.Count = cur + ceilMulDiv(w.prev, left, w.size)
	d.Remaining = max(req.Limit-d.Count, 0)
	switch {
	case cur > 0:
		d.ResetAfter = time.Duration(left + w.size)
	case w.prev > 0:
		d.ResetAfter = time.Duration(left)
	}
	if d.Allowed {
		return
	}
	switch {
	case n > req.Limit:
		// Never fits: the best answer is when the window is empty.
		d.RetryAfter = time.Duration(left + w.size)
	case n <= req.Limit-w.cur:
		// It fits once enough of the previous window has slid out:
		// prev·left' ≤ (limit−cur−n)·size.
		d.RetryAfter = time.Duration(left - floorMulDiv(req.Limit-w.cur-n, w.size, w.prev))
	default:
		// Only in the next window, where this one is the previous:
		// cur·left'' ≤ (limit−n)·size.
		d.RetryAfter = time.Duration(left + w.size - floorMulDiv(req.Limit-n, w.size, w.cur))
	}
}

// gcraState is a token or leaky bucket at one moment (GCRA): tat is the
// theoretical arrival time, when the bucket is full again, in Unix ns
// (never before now); each token takes emission ns to come back; the bucket
// holds burst tokens.
type gcraState struct {
	emission, burst, tat int64
}

func (c *gcraState) decide(d *Decision, req *Request, now int64) {
	used := c.tat - now // ns of refill owed: tokens in use × emission
	capacity := c.burst * c.emission
	n := max(req.Hits, 1) // a peek asks whether one more hit fits
	*d = Decision{Limit: c.burst}
	d.Allowed = n <= c.burst && used <= capacity-n*c.emission
	if d.Allowed && req.Hits > 0 {
		used += req.Hits * c.emission
	}
	d.Count = (used + c.emission - 1) / c.emission
	d.Remaining = max(c.burst-d.Count, 0)
	d.ResetAfter = time.Duration(used)
	if !d.Allowed {
		if n > c.burst {
			d.RetryAfter = d.ResetAfter // never fits; until the bucket is full
		} else {
			d.RetryAfter = time.Duration(used + n*c.emission - capacity)
		}
	}
}

// u128 is an unsigned 128-bit number.
type u128 struct{ hi, lo uint64 }

// mul128 is a·b for non-negative a and b.
func mul128(a, b int64) u128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return u128{hi, lo}
}

func add128(a, b u128) u128 {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	return u128{a.hi + b.hi + carry, lo}
}

func less128(a, b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// floorMulDiv is ⌊a·b/c⌋ for non-negative a, b and c > 0 whose result
// fits an int64.
func floorMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// ceilMulDiv is ⌈a·b/c⌉ under the same conditions.
func ceilMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(q)
}
