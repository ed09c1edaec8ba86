package dashboard

import (
	"sync/atomic"
	"time"
)

// Result is what one check came to, as the live traffic chart counts it.
type Result uint8

// The results.
const (
	Allowed      Result = iota // admitted
	Denied                     // denied by its limit (or a full table)
	ShadowDenied               // admitted, but its shadow rule would have denied it
	Error                      // answered with an error: bad input, unavailable, timeout
	numResults
)

// SeriesSeconds is how many whole seconds the traffic series holds: 15 minutes.
const SeriesSeconds = 900

// Second is the checks of one whole second, by result.
type Second struct {
	Unix                                  int64 // the second, in Unix seconds
	Allowed, Denied, ShadowDenied, Errors uint64
}

// TrafficRing counts checks per second and result for the last
// SeriesSeconds seconds, in fixed memory (SeriesSeconds × 4 counters of 8
// bytes: 28,800 bytes). It is safe for concurrent use and takes no lock:
// Record is one atomic compare-and-swap in the common case. Its zero value
// is ready to use.
//
// Each counter carries the second it counts in its top 24 bits (the Unix
// second modulo 2^24) and the count in the other 40, so that the first
// Record of a new second resets the counter it lands on, and a reader takes
// a counter whose second is not the one it asks for as 0: no sweeping, no
// torn resets between the four counters of a second.
type TrafficRing struct {
	counters [SeriesSeconds][numResults]atomic.Uint64
}

var _ Traffic = (*TrafficRing)(nil)

const (
	countBits = 40
	stampBits = 64 - countBits
	countMask = 1<<countBits - 1
	stampMask = 1<<stampBits - 1
	maxBehind = 3600 // seconds
)

// Record counts one check with result r at now. A now that is behind the
// second its counter holds (by a multiple of 15 minutes, up to an hour: a
// clock stepped back) is dropped rather than let it wipe a newer second.
// A result out of range is counted as an Error.
func (t *TrafficRing) Record(r Result, now time.Time) {
	if r >= numResults {
		r = Error
	}
	sec := now.Unix()
	stamp := uint64(sec) & stampMask
	c := &t.counters[slot(sec)][r]
	for {
		old := c.Load()
		next := stamp<<countBits | 1 // another second than the counter's: start over
		switch ahead := (old>>countBits - stamp) & stampMask; {
		case old != 0 && ahead == 0:
			if old&countMask == countMask {
				return // saturated: 2^40−1 checks in one second
			}
			next = old + 1
		case old != 0 && ahead <= maxBehind:
			return // the counter holds a later second
		}
		if c.CompareAndSwap(old, next) {
			return
		}
	}
}

// AppendSeconds appends to dst the counts of the SeriesSeconds whole
// seconds before now's second, oldest first (the current second is not
// over, so it is left out).
func (t *TrafficRing) AppendSeconds(dst []Second, now time.Time) []Second {
	end := now.Unix()
	for sec := end - SeriesSeconds; sec < end; sec++ {
		dst = append(dst, t.second(sec))
	}
	return dst
}

// Totals returns the sum of the last n whole seconds before now's second
// (n is clamped to [1, SeriesSeconds]), with Unix the first of them: for
// rates, such as a rule's checks per second over the last minute.
func (t *TrafficRing) Totals(now time.Time, n int) Second {
	n = min(max(n, 1), SeriesSeconds)
	end := now.Unix()
	sum := Second{Unix: end - int64(n)}
	for sec := end - int64(n); sec < end; sec++ {
		s := t.second(sec)
		sum.Allowed += s.Allowed
		sum.Denied += s.Denied
		sum.ShadowDenied += s.ShadowDenied
		sum.Errors += s.Errors
	}
	return sum
}

// second reads the counters of sec.
func (t *TrafficRing) second(sec int64) Second {
	stamp := uint64(sec) & stampMask
	cs := &t.counters[slot(sec)]
	read := func(r Result) uint64 {
		v := cs[r].Load()
		if v>>countBits != stamp {
			return 0
		}
		return v & countMask
	}
	return Second{Unix: sec, Allowed: read(Allowed), Denied: read(Denied), ShadowDenied: read(ShadowDenied), Errors: read(Error)}
}

func slot(sec int64) int {
	s := sec % SeriesSeconds
	if s < 0 {
		s += SeriesSeconds
	}
	return int(s)
}
