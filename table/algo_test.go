package table

import (
	"fmt"
	"math/big"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// atNs is t0 plus ns nanoseconds.
func atNs(ns int64) time.Time { return t0.Add(time.Duration(ns)) }

func TestParseAlgorithm(t *testing.T) {
	t.Parallel()
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket} {
		got, err := ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q): got %v, %v; want %v", a.String(), got, err, a)
		}
	}
	if _, err := ParseAlgorithm("sliding_log"); err == nil || err.Error() != "algorithm: must be one of: fixed_window, sliding_window, token_bucket, leaky_bucket" {
		t.Errorf("ParseAlgorithm(sliding_log): got %v", err)
	}
}

func TestSlidingWindow(t *testing.T) {
	t.Parallel()
	req := func(hits int64) Request {
		return Request{ID: "s", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: SlidingWindow}, Hits: hits}
	}
	tb := New(Config{})
	// 8 hits in window 0.
	if d := tb.Apply(req(8), at(900)); !d.Allowed || d.Count != 8 || d.Remaining != 2 || d.ResetAfter != 1100*time.Millisecond {
		t.Fatalf("8 hits: got %+v", d)
	}
	// At 1.25 s, 75% of window 0 is still inside: weighted 6, so 4 fit.
	if d := tb.Apply(req(5), at(1250)); d.Allowed || d.Count != 6 || d.RetryAfter != 125*time.Millisecond {
		// 5 fit once 8·left ≤ (10−5)·1s: left ≤ 625 ms, i.e. 125 ms from now.
		t.Fatalf("5 hits at 1.25s: got %+v, want denied, count 6, retry after 125ms", d)
	}
	if d := tb.Apply(req(4), at(1250)); !d.Allowed || d.Count != 10 || d.Remaining != 0 {
		t.Fatalf("4 hits at 1.25s: got %+v, want allowed with count 10", d)
	}
	// Now cur 4, prev 8: one more fits when 8·left ≤ 5·1s: left ≤ 625 ms.
	if d := tb.Apply(req(1), at(1374)); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Fatalf("1 hit at 1.374s: got %+v, want denied, retry after 1ms", d)
	}
	if d := tb.Apply(req(1), at(1375)); !d.Allowed || d.Count != 10 {
		t.Fatalf("1 hit at 1.375s: got %+v, want allowed with count 5+ceil(5)", d)
	}
	// Denied until the next window: 7 hits need cur·left'' ≤ 3·1s with cur 5.
	d := tb.Apply(req(7), at(1500))
	if d.Allowed || d.RetryAfter != 500*time.Millisecond+400*time.Millisecond {
		t.Fatalf("7 hits at 1.5s: got %+v, want retry after 900ms", d)
	}
	if d := tb.Apply(req(11), at(1500)); d.Allowed || d.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("11 hits (above the limit): got %+v, want retry after the rolling window empties (1.5s)", d)
	}
}

// TestRetryAfterIsExact checks, for every algorithm, that RetryAfter is exact: with
// no other traffic, the same request is denied 1 ns before it and admitted
// at it (seeded; the seed is printed).
func TestRetryAfterIsExact(t *testing.T) {
	t.Parallel()
	rng, seed := seeded(t, 1)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket} {
		for trial := range 200 {
			tb := New(Config{})
			req := Request{ID: "r", Policy: Policy{Scale: time.Duration(1+rng.IntN(5000)) * time.Millisecond, Limit: int64(1 + rng.IntN(20)), Algorithm: alg}}
			if alg.gcra() {
				req.Burst = int64(rng.IntN(30))
			}
			now := int64(rng.IntN(1e9))
			var d Decision
			for range 200 {
				req.Hits = int64(1 + rng.IntN(int(req.Limit)))
				if d = tb.Apply(req, atNs(now)); !d.Allowed {
					break
				}
				now += int64(rng.IntN(int(req.Scale) / 50))
			}
			if d.Allowed || d.RetryAfter <= 0 {
				continue
			}
			if req.Hits > req.Limit || (alg.gcra() && req.Hits > req.burst()) {
				continue // never fits: RetryAfter is only a reset time
			}
			// 1 ns early, on a copy of the table; then on time.
			if tb.admitsOnCopy(req, atNs(now+int64(d.RetryAfter)-1)) {
				t.Fatalf("seed %d, %v trial %d: %+v admitted 1ns before RetryAfter %v", seed, alg, trial, req, d.RetryAfter)
			}
			if d3 := tb.Apply(req, atNs(now+int64(d.RetryAfter))); !d3.Allowed {
				t.Fatalf("seed %d, %v trial %d: %+v denied at RetryAfter %v: %+v", seed, alg, trial, req, d.RetryAfter, d3)
			}
		}
	}
}

// admitsOnCopy reports whether req, with its cost, would be admitted at
// now, changing nothing: it asks a copy of t, rebuilt from its records.
func (t *Table) admitsOnCopy(req Request, now time.Time) bool {
	c := New(Config{})
	f := t.Freeze(now)
	_ = f.Records(func(rec []byte) error { return c.Restore(rec, now) })
	t.Thaw(f)
	return c.Apply(req, now).Allowed
}

// TestSlidingWindowAgainstOracle compares the sliding window with a
// brute-force model that keeps every admitted hit and weighs the previous
// window in exact rational arithmetic, over random arrivals and costs
// (seeded): every decision and count must match.
func TestSlidingWindowAgainstOracle(t *testing.T) {
	t.Parallel()
	rng, seed := seeded(t, 4)
	for trial := range 60 {
		scale := int64(1+rng.IntN(3000)) * msNs
		req := Request{ID: "sw", Policy: Policy{Scale: time.Duration(scale), Limit: int64(rng.IntN(30)), Algorithm: SlidingWindow}}
		tb := New(Config{})
		type hit struct{ at, n int64 }
		var log []hit
		now := int64(0)
		for step := range 300 {
			now += int64(rng.IntN(int(scale) / 7))
			req.Hits = int64(rng.IntN(4))
			abs := t0.UnixNano() + now
			w := floorDiv(abs, scale)
			// Hits before the previous window never count again.
			for len(log) > 0 && floorDiv(log[0].at, scale) < w-1 {
				log = log[1:]
			}
			var prev, cur int64
			for _, h := range log {
				switch floorDiv(h.at, scale) {
				case w - 1:
					prev += h.n
				case w:
					cur += h.n
				}
			}
			left := big.NewRat((w+1)*scale-abs, scale)
			weighted := new(big.Rat).Add(new(big.Rat).Mul(big.NewRat(prev, 1), left), big.NewRat(cur, 1))
			n := max(req.Hits, 1)
			want := new(big.Rat).Add(weighted, big.NewRat(n, 1)).Cmp(big.NewRat(req.Limit, 1)) <= 0
			d := tb.Apply(req, atNs(now))
			if d.Allowed != want {
				t.Fatalf("seed %d trial %d step %d: %+v: got %+v, oracle allowed=%v (prev %d, cur %d, weighted %s)", seed, trial, step, req, d, want, prev, cur, weighted.FloatString(4))
			}
			if want && req.Hits > 0 {
				log = append(log, hit{abs, req.Hits})
				cur += req.Hits
			}
			pw := new(big.Rat).Mul(big.NewRat(prev, 1), left)
			ceil := new(big.Int).Quo(new(big.Int).Add(pw.Num(), new(big.Int).Sub(pw.Denom(), big.NewInt(1))), pw.Denom()).Int64()
			if d.Count != cur+ceil {
				t.Fatalf("seed %d trial %d step %d: count %d, oracle %d", seed, trial, step, d.Count, cur+ceil)
			}
		}
	}
}

// TestTokenBucketAgainstOracle compares the token bucket with a continuous
// token bucket in exact rational arithmetic, over random arrivals and
// costs (seeded). The scale is a multiple of the limit, so the GCRA
// emission interval is exact and every decision must match.
func TestTokenBucketAgainstOracle(t *testing.T) {
	t.Parallel()
	rng, seed := seeded(t, 2)
	for trial := range 40 {
		limit := int64(1 + rng.IntN(50))
		scale := time.Duration(limit*int64(1+rng.IntN(100))) * time.Millisecond
		burst := int64(rng.IntN(60))
		req := Request{ID: "tb", Policy: Policy{Scale: scale, Limit: limit, Burst: burst, Algorithm: TokenBucket}}
		capacity := req.burst()
		tb := New(Config{})
		tokens := big.NewRat(capacity, 1)
		rate := big.NewRat(limit, int64(scale)) // tokens per ns
		now, last := int64(0), int64(0)
		for step := range 300 {
			now += int64(rng.IntN(int(scale) / 5))
			req.Hits = int64(rng.IntN(int(capacity) + 2))
			// Refill.
			add := new(big.Rat).Mul(rate, big.NewRat(now-last, 1))
			tokens.Add(tokens, add)
			if tokens.Cmp(big.NewRat(capacity, 1)) > 0 {
				tokens.SetInt64(capacity)
			}
			last = now
			n := max(req.Hits, 1)
			want := tokens.Cmp(big.NewRat(n, 1)) >= 0
			if want && req.Hits > 0 {
				tokens.Sub(tokens, big.NewRat(req.Hits, 1))
			}
			d := tb.Apply(req, atNs(now))
			if d.Allowed != want {
				t.Fatalf("seed %d trial %d step %d: %+v at %d ns: got %+v, oracle says allowed=%v (tokens %v)", seed, trial, step, req, now, d, want, tokens.FloatString(3))
			}
			// Remaining is the whole tokens left.
			whole := new(big.Int).Quo(tokens.Num(), tokens.Denom()).Int64()
			if d.Remaining != whole {
				t.Fatalf("seed %d trial %d step %d: remaining %d, oracle %d", seed, trial, step, d.Remaining, whole)
			}
		}
	}
}

// TestTokenBucketBound: whatever the arrivals (random, with random costs
// and random rounding of the emission interval), what a token bucket
// admits in any interval [t1, t2] is at most burst + rate·(t2−t1).
func TestTokenBucketBound(t *testing.T) {
	t.Parallel()
	rng, seed := seeded(t, 3)
	for trial := range 50 {
		req := Request{ID: "b", Policy: Policy{Scale: time.Duration(1+rng.IntN(3000)) * time.Millisecond, Limit: int64(1 + rng.IntN(40)), Burst: int64(rng.IntN(40)), Algorithm: TokenBucket}}
		tb := New(Config{})
		type ev struct{ at, hits int64 }
		var admitted []ev
		now := int64(0)
		for range 400 {
			now += int64(rng.IntN(int(req.Scale) / 10))
			req.Hits = int64(1 + rng.IntN(3))
			if tb.Apply(req, atNs(now)).Allowed {
				admitted = append(admitted, ev{now, req.Hits})
			}
		}
		for i := range admitted {
			sum := int64(0)
			for j := i; j < len(admitted); j++ {
				sum += admitted[j].hits
				span := admitted[j].at - admitted[i].at
				// burst + limit·span/scale, compared exactly.
				if sum*int64(req.Scale) > req.burst()*int64(req.Scale)+req.Limit*span {
					t.Fatalf("seed %d trial %d: %d admitted in %d ns, bound %d + %d·%d/%d", seed, trial, sum, span, req.burst(), req.Limit, span, int64(req.Scale))
				}
			}
		}
	}
}

// TestSlidingWindowSteadyTraffic: under steady traffic (one hit every
// period, for 20 windows, at rates from under the limit to 100 times over
// it) a sliding window, once steady (from its third window on), never
// admits more than its limit in any rolling window of its scale. In the
// first two windows, the weighted-count approximation may admit one more
// (it assumes the first window's hits were spread evenly); the test logs
// the worst it saw there.
func TestSlidingWindowSteadyTraffic(t *testing.T) {
	t.Parallel()
	worstStart := 0
	for _, limit := range []int64{1, 5, 10, 100, 1000} {
		for period := time.Millisecond; period <= 250*time.Millisecond; period += 3 * time.Millisecond {
			tb := New(Config{})
			req := Request{ID: "steady", Policy: Policy{Scale: time.Second, Limit: limit, Algorithm: SlidingWindow}, Hits: 1}
			var admitted []time.Duration
			for at := time.Duration(0); at < 20*time.Second; at += period {
				if tb.Apply(req, t0.Add(at)).Allowed {
					admitted = append(admitted, at)
				}
			}
			for i, j := 0, 0; j < len(admitted); j++ {
				for admitted[j]-admitted[i] >= time.Second {
					i++
				}
				n := j - i + 1
				if admitted[i] < 2*time.Second {
					worstStart = max(worstStart, n-int(limit))
					continue
				}
				if int64(n) > limit {
					t.Fatalf("limit %d, a hit every %v: %d admitted within %v..%v", limit, period, n, admitted[i], admitted[j])
				}
			}
		}
	}
	t.Logf("worst excess over the limit in the first two windows: %d", worstStart)
}

// TestBoundaryBurst reproduces the seed analysis: max−1 hits late in one
// window and max early in the next. A fixed window admits 2·max−1 in one
// window-length span; the sliding window, token bucket and leaky bucket
// admit what their definitions allow there.
func TestBoundaryBurst(t *testing.T) {
	t.Parallel()
	const max = 100
	want := map[Algorithm]int{
		FixedWindow: 2*max - 1,
		// At 1.0 s the previous window (99 hits) still weighs 99·(1−0.05):
		// only 5 more fit at 1.05 s.
		SlidingWindow: max - 1 + 5,
		// 100 tokens, 99 spent at 0.95 s; by 1.05 s 10 have come back: 11.
		TokenBucket: max - 1 + 11,
		// One hit per 10 ms: 1 at 0.95 s, then 1 at 1.05 s (the rest wait).
		LeakyBucket: 2,
	}
	for alg, w := range want {
		tb := New(Config{})
		req := Request{ID: "edge", Policy: Policy{Scale: time.Second, Limit: max, Algorithm: alg}, Hits: 1}
		got := 0
		for range max - 1 {
			if tb.Apply(req, at(950)).Allowed {
				got++
			}
		}
		for range max {
			if tb.Apply(req, at(1050)).Allowed {
				got++
			}
		}
		if got != w {
			t.Errorf("%v: %d admitted between 0.95s and 1.05s, want %d", alg, got, w)
		}
	}
}

// TestLeakyBucketPaces: 10,000 work items through a leaky bucket at 1000/s,
// each retried exactly after its RetryAfter (an injected clock): none is
// lost, and no 100 ms slice holds more than 100 ± 1.
func TestLeakyBucketPaces(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	req := Request{ID: "worker", Policy: Policy{Scale: time.Second, Limit: 1000, Algorithm: LeakyBucket}, Hits: 1}
	now := time.Duration(0)
	slices := map[int64]int{}
	for item := range 10_000 {
		for tries := 0; ; tries++ {
			d := tb.Apply(req, t0.Add(now))
			if d.Allowed {
				slices[int64(now/(100*time.Millisecond))]++
				break
			}
			if tries > 1 || d.RetryAfter <= 0 {
				t.Fatalf("item %d: denied again after waiting its RetryAfter: %+v", item, d)
			}
			now += d.RetryAfter
		}
	}
	for s, n := range slices {
		if n < 99 || n > 101 {
			t.Errorf("slice %d: %d items, want 100 ± 1", s, n)
		}
	}
	if len(slices) != 100 {
		t.Errorf("got %d slices of 100ms, want 100", len(slices))
	}
}

func TestRefund(t *testing.T) {
	t.Parallel()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			tb := New(Config{})
			req := Request{ID: "r", Policy: Policy{Scale: time.Hour, Limit: 10, Burst: 10, Algorithm: alg}, Hits: 4}
			if d := tb.Apply(req, at(0)); !d.Allowed || d.Remaining != 6 {
				t.Fatalf("4 hits: got %+v", d)
			}
			req.Hits = 3
			if d := tb.Refund(req, at(0)); d.Remaining != 9 || d.Count != 1 {
				t.Fatalf("refund 3: got %+v, want count 1, remaining 9", d)
			}
			req.Hits = 50
			if d := tb.Refund(req, at(0)); d.Remaining != 10 || d.Count != 0 {
				t.Fatalf("refund 50 (more than used): got %+v, want count 0, remaining 10 (never above the limit)", d)
			}
			if d := tb.Refund(Request{ID: "nobody", Policy: Policy{Scale: time.Hour, Limit: 10, Burst: 10, Algorithm: alg}, Hits: 1}, at(0)); tb.Len() != 1 || d.Count != 0 {
				t.Fatalf("refund of an unknown id created a bucket or reported a count: %+v, %d buckets", d, tb.Len())
			}
		})
	}
}

func TestReset(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	a := Request{ID: "x", Policy: Policy{Scale: time.Second, Limit: 3, Algorithm: SlidingWindow}, Hits: 3}
	other := Request{ID: "x", Policy: Policy{Scale: time.Minute, Limit: 3}, Hits: 1}
	tb.Apply(a, at(500))
	tb.Apply(a, at(1200)) // denied: window 0 weighs on window 1
	tb.Apply(other, at(1200))
	a.Hits = 1
	if d := tb.Apply(a, at(1300)); d.Allowed {
		t.Fatalf("before reset: got %+v, want denied", d)
	}
	if n := tb.Reset(a, at(1300)); n != 1 {
		t.Fatalf("Reset deleted %d buckets, want 1 (window 0; window 1 never got a hit)", n)
	}
	if d := tb.Apply(a, at(1300)); !d.Allowed || d.Count != 1 {
		t.Fatalf("after reset: got %+v, want allowed with count 1", d)
	}
	if b, ok := tb.Get(other, at(1300)); !ok || b.Count != 1 {
		t.Fatalf("reset touched another limit: %+v, %v", b, ok)
	}
	// The journal sees the delete before the new state.
	fresh := New(Config{})
	restoreAll(t, fresh, collect(t, tb.Changes), at(1300))
	if got, want := fmt.Sprint(snapshotOf(fresh, at(1300))), fmt.Sprint(snapshotOf(tb, at(1300))); got != want {
		t.Fatalf("replayed:\n%s\nwant\n%s", got, want)
	}

	// A bucket that can change no decision any more (a fixed window
	// ended, a token bucket full again), not yet swept: deleted, not
	// counted, as ResetID counts, so that the count does not depend on
	// whether a sweep or a restart (which does not recover it) came first.
	fixed := Request{ID: "f", Policy: Policy{Scale: time.Second, Limit: 5}, Hits: 1}
	tb.Apply(fixed, at(2500)) // window 2
	tb.Apply(fixed, at(3100)) // window 3: window 2 ended
	before := tb.Len()
	if n := tb.Reset(fixed, at(3100)); n != 1 || tb.Len() != before-2 {
		t.Fatalf("Reset of a fixed window and the one before it, ended: %d counted, %d of %d buckets left; want 1 counted, both deleted", n, tb.Len(), before)
	}
	token := Request{ID: "f", Policy: Policy{Algorithm: TokenBucket, Scale: time.Second, Limit: 1, Burst: 2}, Hits: 1}
	tb.Apply(token, at(4000)) // full again at 5000
	if n := tb.Reset(token, at(4999)); n != 1 {
		t.Fatalf("Reset of a token bucket before it is full: %d, want 1", n)
	}
	tb.Apply(token, at(5000)) // full again at 6000
	before = tb.Len()
	if n := tb.Reset(token, at(6000)); n != 0 || tb.Len() != before-1 {
		t.Fatalf("Reset of a token bucket full again: %d counted, %d of %d buckets left; want none counted, it deleted", n, tb.Len(), before)
	}
}

// TestNamespaceKeepsCountsAcrossLimitChanges: a rule's buckets are keyed
// by its name, so a changed limit applies to the same count.
func TestNamespaceKeepsCountsAcrossLimitChanges(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	r := Request{ID: "u", Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 8, Namespace: "login"}
	tb.Apply(r, at(0))
	r.Limit, r.Hits = 20, 1
	if d := tb.Apply(r, at(1)); !d.Allowed || d.Count != 9 || d.Remaining != 11 {
		t.Fatalf("after raising the limit: got %+v, want count 9 of 20", d)
	}
	r.Limit = 5
	if d := tb.Apply(r, at(2)); d.Allowed || d.Count != 9 {
		t.Fatalf("after lowering the limit: got %+v, want denied at count 9", d)
	}
	adhoc := Request{ID: "u", Policy: Policy{Scale: time.Hour, Limit: 5}, Hits: 1}
	if d := tb.Apply(adhoc, at(3)); !d.Allowed || d.Count != 1 {
		t.Fatalf("the same id without the namespace: got %+v, want its own count 1", d)
	}
}

// TestGCRABucketMovesWindows: a token bucket's state follows it across its
// key windows and it expires only once refilled.
func TestGCRABucketMovesWindows(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	r := Request{ID: "g", Policy: Policy{Scale: time.Second, Limit: 10, Algorithm: TokenBucket}, Hits: 10}
	tb.Apply(r, at(900)) // empty at 0.9 s; full again at 1.9 s
	r.Hits = 5
	if d := tb.Apply(r, at(1400)); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("5 hits at 1.4s: got %+v, want allowed (5 back), none left", d)
	}
	if n := tb.DeleteExpired(at(2000), 10); n != 0 {
		t.Fatalf("swept %d at 2.0s, want 0: the bucket is full again only at 2.4s", n)
	}
	fresh := New(Config{})
	restoreAll(t, fresh, collect(t, tb.Changes), at(2000))
	r.Hits = 0
	if got, want := fresh.Apply(r, at(2000)), tb.Apply(r, at(2000)); got != want {
		t.Fatalf("restored: got %+v, want %+v", got, want)
	}
	if n := tb.DeleteExpired(at(4000), 10); n != 1 {
		t.Fatalf("swept %d at 4.0s, want 1", n)
	}
}

// TestMaxBuckets: a flood of distinct ids never grows the table past its
// cap; deny-new refuses the overflow (Full, counted), evict-oldest makes
// room (counted), and expired buckets always go first.
func TestMaxBuckets(t *testing.T) {
	t.Parallel()
	const cap, flood = 1000, 5000
	for _, evict := range []bool{false, true} {
		tb := New(Config{MaxBuckets: cap, Evict: evict})
		full := 0
		for i := range flood {
			d := tb.Apply(Request{ID: fmt.Sprint("id-", i), Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, at(int64(i)))
			if d.Full {
				full++
				if d.Allowed || d.RetryAfter <= 0 {
					t.Fatalf("a Full decision must deny with a RetryAfter: %+v", d)
				}
			}
			if tb.Len() > cap {
				t.Fatalf("evict=%v: %d buckets after %d ids, cap %d", evict, tb.Len(), i+1, cap)
			}
		}
		st := tb.Stats()
		switch {
		case evict && (full != 0 || st.Evictions != flood-cap || st.Rejections != 0):
			t.Fatalf("evict-oldest: %d full, stats %+v; want 0 full, %d evictions", full, st, flood-cap)
		case !evict && (full != flood-cap || st.Rejections != flood-cap || st.Evictions != 0):
			t.Fatalf("deny-new: %d full, stats %+v; want %d rejections", full, st, flood-cap)
		}
		// Existing ids are served at the cap.
		if d := tb.Apply(Request{ID: "id-999", Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, at(flood)); evict == false && (!d.Allowed || d.Count != 2) {
			t.Fatalf("deny-new: an existing id at the cap: got %+v, want allowed with count 2", d)
		}
		// Expired buckets make room without evicting or refusing.
		tb2 := New(Config{MaxBuckets: 10, Evict: evict})
		for i := range 10 {
			tb2.Apply(Request{ID: fmt.Sprint("old-", i), Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 1}, at(0))
		}
		if d := tb2.Apply(Request{ID: "new", Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 1}, at(1000)); !d.Allowed || tb2.Stats() != (Stats{}) {
			t.Fatalf("evict=%v: a new id when only expired buckets fill the table: got %+v, stats %+v", evict, d, tb2.Stats())
		}
	}
}

// TestCardinality: 2M distinct ids against MaxBuckets 100,000: the table
// never holds more, its heap stays flat (after GC, at 10% and at 100% of
// the flood), and each policy's count is exact. Not parallel: the heap it
// measures is the whole process's.
func TestCardinality(t *testing.T) {
	const flood, bound = 2_000_000, 100_000
	for _, evict := range []bool{false, true} {
		tb := New(Config{MaxBuckets: bound, Evict: evict})
		full := 0
		var early uint64
		for i := range flood {
			if i == flood/10 {
				early = heapAfterGC()
			}
			if tb.Apply(Request{ID: "flood-" + strconv.Itoa(i), Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, at(int64(i/1000))).Full {
				full++
			}
		}
		late := heapAfterGC()
		st := tb.Stats()
		switch {
		case tb.Len() != bound:
			t.Fatalf("evict=%v: %d buckets, want %d", evict, tb.Len(), bound)
		case evict && (full != 0 || st.Evictions != flood-bound):
			t.Fatalf("evict-oldest: %d refused, %+v; want %d evictions", full, st, flood-bound)
		case !evict && (full != flood-bound || st.Rejections != flood-bound):
			t.Fatalf("deny-new: %d refused, %+v; want %d", full, st, flood-bound)
		case float64(late) > 1.25*float64(early):
			t.Fatalf("evict=%v: heap grew from %d to %d bytes", evict, early, late)
		}
		t.Logf("evict=%v: heap after GC %d MB at 10%%, %d MB at 100%% of %d ids", evict, early>>20, late>>20, flood)
		runtime.KeepAlive(tb)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestResetID: every bucket of an id in one namespace goes, under each of
// that namespace's limits and windows; the id elsewhere, and other ids,
// keep theirs, and the journal replays the deletes.
func TestResetID(t *testing.T) {
	t.Parallel()
	tb := New(Config{TrackChanges: true})
	const ns = "cell"
	small := Request{ID: "k", Policy: Policy{Algorithm: TokenBucket, Scale: time.Second, Limit: 1, Burst: 2}, Hits: 2, Namespace: ns}
	large := small
	large.Burst = 5 // another size: another group of the namespace
	sliding := Request{ID: "k", Policy: Policy{Algorithm: SlidingWindow, Scale: time.Second, Limit: 10}, Hits: 4, Namespace: ns}
	otherNS := small
	otherNS.Namespace = "elsewhere"
	adhoc := small
	adhoc.Namespace = ""
	otherID := small
	otherID.ID = "k2"
	for _, r := range []Request{small, large, otherNS, adhoc, otherID} {
		if d := tb.Apply(r, at(100)); !d.Allowed {
			t.Fatalf("%+v: denied at first", r)
		}
	}
	tb.Apply(sliding, at(100))  // window 0
	tb.Apply(sliding, at(1100)) // window 1: two buckets of this limit
	if d := tb.Apply(small, at(1100)); d.Allowed {
		t.Fatalf("before ResetID: %+v, want the bucket of 2 still empty", d)
	}
	if n := tb.ResetID(ns, "k", at(1100)); n != 4 {
		t.Fatalf("ResetID deleted %d buckets, want 4 (two token buckets, two sliding windows)", n)
	}
	if n := tb.ResetID(ns, "k", at(1100)); n != 0 {
		t.Fatalf("ResetID again deleted %d, want 0", n)
	}
	for _, r := range []Request{small, large, sliding} {
		if b, ok := tb.Get(r, at(1100)); ok {
			t.Fatalf("%+v: still has %+v after ResetID", r.Policy, b)
		}
	}
	if d := tb.Apply(small, at(1100)); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after ResetID: %+v, want a fresh bucket of 2 allowed 2", d)
	}
	for _, r := range []Request{otherNS, adhoc, otherID} {
		if b, ok := tb.Get(r, at(1100)); !ok || b.Count == 0 {
			t.Fatalf("ResetID touched %q in namespace %q: %+v, %v", r.ID, r.Namespace, b, ok)
		}
	}
	fresh := New(Config{})
	restoreAll(t, fresh, collect(t, tb.Changes), at(1100))
	if got, want := fmt.Sprint(snapshotOf(fresh, at(1100))), fmt.Sprint(snapshotOf(tb, at(1100))); got != want {
		t.Fatalf("replayed:\n%s\nwant\n%s", got, want)
	}

	// Buckets that can change no decision any more (a token bucket full
	// again, a fixed window ended), not yet swept: deleted, not counted, as
	// redis-cell's key is gone once its bucket is full.
	quiet := Request{ID: "q", Policy: Policy{Algorithm: TokenBucket, Scale: time.Second, Limit: 1, Burst: 2}, Hits: 1, Namespace: ns}
	ended := Request{ID: "q", Policy: Policy{Scale: time.Second, Limit: 5}, Hits: 1, Namespace: ns}
	tb.Apply(quiet, at(2000)) // full again at 3000
	tb.Apply(ended, at(2000)) // window 2 ends at 3000
	if n := tb.ResetID(ns, "q", at(2999)); n != 2 {
		t.Fatalf("ResetID before they are quiet: %d, want 2", n)
	}
	tb.Apply(quiet, at(2999)) // full again at 3999
	tb.Apply(ended, at(2999)) // window 2 ends at 3000
	before := tb.Len()
	if n := tb.ResetID(ns, "q", at(3500)); n != 1 || tb.Len() != before-2 {
		t.Fatalf("ResetID once the window ended: %d counted, %d of %d buckets left; want the token bucket counted, both deleted", n, tb.Len(), before)
	}
	tb.Apply(quiet, at(3500)) // full again at 4500
	if n := tb.ResetID(ns, "q", at(4500)); n != 0 || tb.Len() != before-2 {
		t.Fatalf("ResetID once the bucket is full: %d counted, %d of %d buckets left; want none counted, it deleted", n, tb.Len(), before-1)
	}
}
