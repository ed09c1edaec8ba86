package topk

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// MaxSample is the largest rate of a Sampler.
const MaxSample = 1 << 10

// SampleConfig sizes a Sampler.
type SampleConfig struct {
	// Rate is the sampling rate under load: a power of two in [1,
	// MaxSample]; 1 (or 0) picks every check, always.
	Rate int
	// Above is the rate of admitted checks, per second, above which the
	// Sampler samples: below it, it picks every check (exact counts, at
	// a cost that such a rate makes small); 0 means from the first check.
	Above float64
	// Seed seeds the Sampler's draws.
	Seed uint64
}

// sampleEpoch is how many admitted checks a Sampler counts before it
// looks at their rate again, unless a second passes first.
const sampleEpoch = 4096

// Sampler picks the admitted checks a Sketch observes, for a caller whose
// check path cannot afford to observe them all when they are many.
//
// While the admitted checks come at most SampleConfig.Above a second, it
// picks every one. Faster, it samples: each check is picked with
// probability 1/Rate, independently, to be observed with Rate times its
// hits. It measures the rate over epochs of 4096 checks (or of a second,
// if shorter), and goes back to picking every check once an epoch's rate
// falls below a quarter of Above. Rate is a power of two, 2^k, so that
// the trials are exact and cheap: each is k random bits all zero, and the
// gap to the next pick, drawn at a pick, is the count of nonzero k-bit
// fields before the first zero one in random 64-bit words (so a skipped
// check costs a decrement, a pick a few nanoseconds).
//
// Denied checks are not sampled: a caller observes every one, so that the
// ranking by denials keeps the bound of the package documentation, and
// only hits carry the sampling's error. Weighted so, a key's sampled
// weight is an unbiased estimate of its true one, whose error is on top
// of the summaries' Bound: for a key of a admitted hits in checks of h
// hits each, all sampled, a standard deviation of √((Rate−1)·h·a) (with
// Rate 32 and single hits: ±5.6% for a = 10,000, ±18% for a = 1,000);
// less when some were counted exactly. Count and Min are then estimates
// too: their guarantees hold for the sampled weight, not the true one.
// Sampled reports whether any pick was sampled within a span of time.
//
// A Sampler is not safe for concurrent use: like a Sketch, it lives in a
// shard and is called holding the shard's lock. The zero value picks
// every check. Its 16 bytes are what a check touches: the count of checks
// to skip, written at each skipped one, the current rate, and a pointer to
// the rest, touched at a pick.
type Sampler struct {
	skip uint32 // checks still to skip before the next pick
	rate uint32 // the current rate: 1, or cfg.Rate while sampling
	s    *sampling
}

// sampling is a Sampler's state apart: its draws (k-bit fields of random
// words, fields of them in each, ⌊64/k⌋; low with the lowest bit of each
// field set, high the highest) and its measure of the rate.
type sampling struct {
	max       uint32 // SampleConfig.Rate
	k, fields int
	low, high uint64
	rng       rand.PCG
	above     float64 // SampleConfig.Above, in checks per ns
	gap       uint32  // the gap drawn at the last pick, at rate
	checks    int     // admitted checks in the epoch so far
	start     int64   // Unix ns of the epoch's first pick
	sampled   int64   // Unix ns of the last pick at a rate above 1, or MinInt64
}

// ValidSampleRate reports whether rate is a SampleConfig.Rate: 0, or a
// power of two in [1, MaxSample].
func ValidSampleRate(rate int) bool {
	return rate >= 0 && rate <= MaxSample && rate&(rate-1) == 0
}

// NewSampler returns a Sampler of cfg; the error, for a Rate out of
// range, matches ErrConfig.
func NewSampler(cfg SampleConfig) (Sampler, error) {
	if !ValidSampleRate(cfg.Rate) {
		return Sampler{}, fmt.Errorf("%w: sample rate %d is not a power of two in [1, %d]", ErrConfig, cfg.Rate, MaxSample)
	}
	rate := max(cfg.Rate, 1)
	if !(cfg.Above >= 0) || math.IsInf(cfg.Above, 1) {
		return Sampler{}, fmt.Errorf("%w: sample threshold %v is not a finite rate ≥ 0", ErrConfig, cfg.Above)
	}
	if rate == 1 {
		return Sampler{rate: 1}, nil
	}
	k := bits.TrailingZeros(uint(rate))
	s := &sampling{max: uint32(rate), k: k, fields: 64 / k, rng: *rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15),
		above: cfg.Above / float64(time.Second), start: math.MinInt64, sampled: math.MinInt64}
	for i := range s.fields {
		s.low |= 1 << (i * k)
	}
	s.high = s.low << (k - 1)
	sm := Sampler{rate: 1, s: s}
	if cfg.Above == 0 {
		sm.rate = s.max
		s.gap = s.draw()
		sm.skip = s.gap
	}
	return sm, nil
}

// Rate returns the weight of the next pick: 1 while every check is
// picked, else the sampling rate.
func (s *Sampler) Rate() int { return int(max(s.rate, 1)) }

// Due reports whether the next admitted check will be picked (Skip will
// be false), without drawing: a caller may prepare an observation (fetch
// the sketch's lines) only then.
func (s *Sampler) Due() bool { return s.skip == 0 }

// Skip draws for one admitted check: it reports whether the check is not
// to be observed. A caller observes a check it does not skip with the
// weight Weigh gives, which it must call before the next Skip.
func (s *Sampler) Skip() bool {
	if s.skip > 0 {
		s.skip--
		return true // most checks, when sampling: one decrement
	}
	return false
}

// Weigh returns the hits to observe a picked check of hits with, at now:
// hits times the rate it was picked at (at most math.MaxInt64). It
// measures the rate of the admitted checks and draws the gap to the next
// pick.
func (s *Sampler) Weigh(hits int64, now time.Time) int64 {
	sm := s.s
	if sm == nil {
		return hits
	}
	w := s.rate
	ns := now.UnixNano()
	if w > 1 {
		sm.sampled = ns
	}
	s.measure(int(sm.gap)+1, ns)
	sm.gap = 0
	if s.rate > 1 {
		sm.gap = sm.draw()
	}
	s.skip = sm.gap
	if hits > math.MaxInt64/int64(w) {
		return math.MaxInt64
	}
	return hits * int64(w)
}

// measure counts checks admitted up to ns in the epoch and, at its end,
// sets the rate from theirs.
func (s *Sampler) measure(checks int, ns int64) {
	sm := s.s
	if sm.start == math.MinInt64 {
		sm.start = ns
	}
	sm.checks += checks
	elapsed := ns - sm.start
	if sm.checks < sampleEpoch && elapsed < int64(time.Second) {
		return
	}
	switch perNs := float64(sm.checks) / float64(max(elapsed, 1)); {
	case s.rate == 1 && perNs > sm.above:
		s.rate = sm.max
	case s.rate > 1 && perNs < sm.above/4:
		s.rate = 1
	}
	sm.checks, sm.start = 0, ns
}

// Sampled reports whether a check was picked at a rate above 1 at or
// after since: whether counts of hits since then are estimates.
func (s *Sampler) Sampled(since time.Time) bool {
	return s.s != nil && s.s.sampled != math.MinInt64 && s.s.sampled >= since.UnixNano()
}

// draw draws the checks skipped before the next pick at the sampling
// rate: the trials that fail (a k-bit field not zero) before one
// succeeds. In x − low, a field borrows from the one above only if it is
// zero, so the lowest field of x whose top bit is set in (x − low) &^ x
// is x's lowest zero field.
func (sm *sampling) draw() uint32 {
	n := 0
	for {
		x := sm.rng.Uint64()
		if z := (x - sm.low) &^ x & sm.high; z != 0 {
			n += bits.TrailingZeros64(z) / sm.k
			return uint32(min(n, math.MaxUint32))
		}
		n += sm.fields
	}
}
