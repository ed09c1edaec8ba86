package dashboard

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// LatencyWindow is the span of time Latencies.Quantile reads: the
// current 10-second interval and the five before it, so between 50 and 60
// seconds of the past.
const LatencyWindow = latencySlots * latencyWidth

const (
	latencyWidth = 10 * time.Second
	latencySlots = 6
	// Each power of two of nanoseconds is split in latencySub buckets,
	// so a bucket is at most 1/latencySub (12.5%) wide; durations from
	// 2^latencyTop ns (about 69 s) on share the last bucket.
	latencySubBits = 3
	latencySub     = 1 << latencySubBits
	latencyTop     = 36
	latencyBuckets = latencySub + (latencyTop-latencySubBits)*latencySub
)

// Latencies estimates quantiles of durations (check latencies) over the
// last minute, in fixed memory: a histogram of 272 buckets, each at most
// 12.5% wide, per 10-second interval, six intervals (13,056 bytes). It is
// safe for concurrent use and takes no lock: Record is one atomic
// compare-and-swap in the common case. Its zero value is ready to use.
//
// As in TrafficRing, each counter carries the interval it counts in its
// top 24 bits and the count in the other 40: the first Record of a new
// interval resets the counter it lands on, and a reader takes a counter of
// an interval outside its window as 0.
type Latencies struct {
	counters [latencySlots][latencyBuckets]atomic.Uint64
}

// latencyBucket returns the bucket of a duration of ns nanoseconds.
func latencyBucket(ns int64) int {
	if ns < latencySub {
		return int(max(ns, 0))
	}
	v := uint64(min(ns, 1<<latencyTop-1))
	e := bits.Len64(v) - 1 // the top bit, ≥ latencySubBits
	mant := int(v>>(e-latencySubBits)) & (latencySub - 1)
	return latencySub + (e-latencySubBits)*latencySub + mant
}

// latencyUpper returns the duration just above bucket b's: every duration
// counted in b is less.
func latencyUpper(b int) time.Duration {
	if b < latencySub {
		return time.Duration(b + 1)
	}
	e := (b-latencySub)/latencySub + latencySubBits
	mant := (b - latencySub) % latencySub
	return time.Duration(uint64(latencySub+mant+1) << (e - latencySubBits))
}

// Record counts one duration d at now. A now behind the interval its
// counter holds (a clock stepped back, up to an hour) is dropped rather
// than let it wipe a newer interval.
func (l *Latencies) Record(d time.Duration, now time.Time) {
	iv := floorDiv(now.UnixNano(), int64(latencyWidth))
	stamp := uint64(iv) & stampMask
	c := &l.counters[mod(iv, latencySlots)][latencyBucket(int64(d))]
	for {
		old := c.Load()
		next := stamp<<countBits | 1
		switch ahead := (old>>countBits - stamp) & stampMask; {
		case old != 0 && ahead == 0:
			if old&countMask == countMask {
				return // saturated
			}
			next = old + 1
		case old != 0 && ahead <= maxBehindIntervals:
			return // the counter holds a later interval
		}
		if c.CompareAndSwap(old, next) {
			return
		}
	}
}

// maxBehindIntervals is how far back (an hour) a clock may step before a
// Record is taken for a new interval.
const maxBehindIntervals = uint64(time.Hour / latencyWidth)

// Quantile returns, for each q of qs (0 < q ≤ 1), a duration that at
// least a fraction q of the durations recorded in the LatencyWindow before
// now were below, at most 12.5% above the true quantile; and how many
// durations the window holds. With none, every quantile is 0.
func (l *Latencies) Quantile(now time.Time, qs ...float64) ([]time.Duration, uint64) {
	cur := floorDiv(now.UnixNano(), int64(latencyWidth))
	var hist [latencyBuckets]uint64
	var n uint64
	for iv := cur - latencySlots + 1; iv <= cur; iv++ {
		stamp := uint64(iv) & stampMask
		slot := &l.counters[mod(iv, latencySlots)]
		for b := range slot {
			if v := slot[b].Load(); v>>countBits == stamp {
				hist[b] += v & countMask
				n += v & countMask
			}
		}
	}
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out, 0
	}
	for i, q := range qs {
		rank := min(max(uint64(math.Ceil(q*float64(n))), 1), n)
		var seen uint64
		for b, c := range hist {
			if seen += c; seen >= rank {
				out[i] = latencyUpper(b)
				break
			}
		}
	}
	return out, n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
