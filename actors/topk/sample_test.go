package topk

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestSamplerRange(t *testing.T) {
	t.Parallel()
	for _, rate := range []int{-1, 3, 48, MaxSample - 1, MaxSample + 1, 2 * MaxSample} {
		if _, err := NewSampler(SampleConfig{Rate: rate, Seed: 1}); !errors.Is(err, ErrConfig) {
			t.Errorf("NewSampler(%d): %v, want ErrConfig", rate, err)
		}
	}
	for _, above := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := NewSampler(SampleConfig{Rate: 16, Above: above}); !errors.Is(err, ErrConfig) {
			t.Errorf("NewSampler(Above %v): %v, want ErrConfig", above, err)
		}
	}
	for _, rate := range []int{1, 2, 8, 32, MaxSample} {
		s, err := NewSampler(SampleConfig{Rate: rate, Seed: 1})
		if err != nil || s.Rate() != rate {
			t.Errorf("NewSampler(%d): rate %d, %v", rate, s.Rate(), err)
		}
		if s, err = NewSampler(SampleConfig{Rate: rate, Above: 1000}); err != nil || s.Rate() != 1 {
			t.Errorf("NewSampler(%d, above 1000): rate %d, %v; want 1 until the checks come faster", rate, s.Rate(), err)
		}
	}
}

// TestSamplerEvery: the zero Sampler and rate 1 skip no check, weigh each
// by its own hits, and are always due.
func TestSamplerEvery(t *testing.T) {
	t.Parallel()
	one, err := NewSampler(SampleConfig{Rate: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Sampler{"zero": {}, "rate 1": &one} {
		if s.Rate() != 1 {
			t.Errorf("%s: Rate %d", name, s.Rate())
		}
		for i := range int64(1000) {
			if !s.Due() {
				t.Fatalf("%s: not due at check %d", name, i)
			}
			if s.Skip() {
				t.Fatalf("%s: skipped check %d", name, i)
			}
			if w := s.Weigh(i+1, t0); w != i+1 {
				t.Fatalf("%s: Weigh(%d) = %d", name, i+1, w)
			}
		}
	}
}

// TestSamplerLaw: at rates 2, 8, 16, 32 (k-bit fields that fill a word,
// and those that do not) and 1024, over 20,000 picks' worth of checks, the
// picks are 1 in rate within five standard deviations, each weighs rate
// times its hits, Due tells the pick ahead, and a pick right after a pick
// is as likely as any (the trials are independent: no enforced spacing).
func TestSamplerLaw(t *testing.T) {
	t.Parallel()
	for _, rate := range []int{2, 8, 16, 32, MaxSample} {
		seed := rand.Uint64()
		s, err := NewSampler(SampleConfig{Rate: rate, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		n := 20_000 * rate
		picks, afterPick := 0, 0
		last := false
		for i := range n {
			due := s.Due()
			w := int64(0)
			if !s.Skip() {
				w = s.Weigh(3, t0)
			}
			if (w != 0) != due {
				t.Fatalf("rate %d, check %d: Due %v, weight %d", rate, i, due, w)
			}
			if w != 0 && w != 3*int64(rate) {
				t.Fatalf("rate %d, check %d: weight %d, want %d", rate, i, w, 3*rate)
			}
			if w != 0 {
				picks++
				if last {
					afterPick++
				}
			}
			last = w != 0
		}
		p := 1 / float64(rate)
		within := func(what string, got, trials int) {
			mean, sd := p*float64(trials), math.Sqrt(float64(trials)*p*(1-p))
			if math.Abs(float64(got)-mean) > 5*sd {
				t.Errorf("rate %d (seed %d): %s: %d of %d, want %.0f ± %.0f", rate, seed, what, got, trials, mean, 5*sd)
			}
		}
		within("picks", picks, n)
		within("picks right after a pick", afterPick, picks)
	}
}

// TestSamplerAdapts: a Sampler of rate 32 above 1,000 checks a second
// picks every check, each of weight 1, while they come 100 a second; from
// the end of the epoch (at most 4,096 checks) that a burst of checks all
// at one instant starts in it samples, picks weighing 32, and Sampled says so; back to 100 a
// second, it picks every check again from the end of a second's epoch,
// and a second later Sampled is false for the time since then.
func TestSamplerAdapts(t *testing.T) {
	t.Parallel()
	s, err := NewSampler(SampleConfig{Rate: 32, Above: 1000, Seed: rand.Uint64()})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	admit := func() int64 {
		if s.Skip() {
			return 0
		}
		return s.Weigh(1, now)
	}
	for i := range 5000 {
		now = now.Add(10 * time.Millisecond)
		if w := admit(); w != 1 {
			t.Fatalf("slow check %d: weight %d, want 1", i, w)
		}
	}
	if s.Sampled(t0) {
		t.Fatal("Sampled after exact counting")
	}
	now = now.Add(time.Millisecond)
	burst := now
	var sum, picks int64
	exact := 0 // the burst's first checks, counted exactly to the end of their epoch
	for i := range 100_000 {
		w := admit()
		switch {
		case w == 1 && exact == i:
			exact++
		case w != 0 && w != 32:
			t.Fatalf("burst check %d: weight %d, want 0 or 32 (after %d exact)", i, w, exact)
		}
		if w != 0 {
			picks++
		}
		sum += w
	}
	sd := 5 * math.Sqrt(31*float64(100_000-exact))
	if exact == 0 || exact > sampleEpoch || math.Abs(float64(sum)-100_000) > sd || picks > int64(exact+(100_000-exact)/16) {
		t.Errorf("burst: %d checks counted exactly, then a sampled weight %d over %d picks; want 1..%d, 100000 ± %.0f", exact, sum, picks, sampleEpoch, sd)
	}
	if !s.Sampled(burst) || s.Rate() != 32 {
		t.Errorf("after the burst: Sampled %v, Rate %d; want true, 32", s.Sampled(burst), s.Rate())
	}
	exactSince := time.Time{}
	for i := range 1000 {
		now = now.Add(10 * time.Millisecond)
		w := admit()
		if s.Rate() == 1 && exactSince.IsZero() {
			exactSince = now
		}
		if !exactSince.IsZero() && now.After(exactSince) && w != 1 {
			t.Fatalf("slow check %d, after the rate fell: weight %d, want 1", i, w)
		}
	}
	// The epoch the burst ends in, and the next: a second each, and a
	// pick (every 32 checks, 0.32 s on average) to notice each end.
	if exactSince.IsZero() || exactSince.Sub(burst) > 6*time.Second {
		t.Fatalf("back to exact at %v after the burst (zero: not in 10 s), want within 6 s", exactSince.Sub(burst))
	}
	if s.Sampled(exactSince.Add(time.Nanosecond)) {
		t.Error("Sampled after the rate fell")
	}
}

// TestSamplerSaturates: a picked check of hits whose product with the rate would
// overflow weighs math.MaxInt64.
func TestSamplerSaturates(t *testing.T) {
	t.Parallel()
	s, err := NewSampler(SampleConfig{Rate: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for s.Skip() {
	}
	if w := s.Weigh(math.MaxInt64/2+1, t0); w != math.MaxInt64 {
		t.Errorf("Weigh: %d, want MaxInt64", w)
	}
}

// TestZipfSampledAccuracy is TestZipfAccuracy with the admitted checks
// sampled 1 in 16 per shard (a Sampler each) and the denied ones all
// observed, as a shard does with sampling on; half the ids have no limit,
// so that the heaviest ids are admitted, denied, or both. The
// summaries keep their bound over the weights they were given (checked as
// in TestZipfAccuracy); the true top 10 by hits and by denials are among
// the 20 reported; each count by denials is within Bound of the truth, and
// each by hits within Bound plus five standard deviations of the
// sampling's error (Sampler: √(15·a) for a admitted single hits).
func TestZipfSampledAccuracy(t *testing.T) {
	t.Parallel()
	const ids, shards, rate = zipfIDs, 8, 16
	z := newZipfTraffic(t)
	sketches := make([]*Sketch, shards)
	samplers := make([]Sampler, shards)
	for i := range sketches {
		sketches[i] = newFronted(t, 0, 512)
		var err error
		if samplers[i], err = NewSampler(SampleConfig{Rate: rate, Seed: z.seed + uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	hits, admitted, denials := make([]uint64, ids), make([]uint64, ids), make([]uint64, ids)
	given := map[Metric]map[string]uint64{Hits: {}, Denials: {}} // the weights the sketches were given
	names := z.names
	for i := range z.samples {
		r, _, when := z.next(i)
		// Ids of even rank have a limit, the others none: the heaviest
		// ids are admitted, denied, or both.
		limit := uint64(math.MaxUint64)
		if r%2 == 0 {
			limit = 200 * (1 + (r*7)%13)
		}
		hits[r]++
		denied := hits[r] > limit
		sh := Hash(names[r]) % shards
		w := int64(1)
		if denied {
			denials[r]++
			given[Denials][names[r]+"\x00r"]++
		} else {
			admitted[r]++
			if samplers[sh].Skip() {
				continue
			}
			w = samplers[sh].Weigh(1, t0)
		}
		given[Hits][names[r]+"\x00r"] += uint64(w)
		sketches[sh].Observe(names[r], "r", w, denied, when)
	}
	now := at(z.span)
	for _, c := range []struct {
		m     Metric
		exact []uint64
	}{{Hits, hits}, {Denials, denials}} {
		v := top(c.m, FifteenMinutes, true, now, sketches...)
		checkExact(t, v, given[c.m], DefaultCapacity)
		want := make([]int, 0, ids)
		for r, f := range c.exact {
			if f > 0 {
				want = append(want, r)
			}
		}
		slices.SortFunc(want, func(a, b int) int { return cmp.Or(cmp.Compare(c.exact[b], c.exact[a]), cmp.Compare(a, b)) })
		got := map[string]Entry{}
		for _, e := range v.Top(20) {
			got[e.ID] = e
		}
		worst := 0.0 // the largest deviation by hits beyond Bound's range, in standard deviations
		for rank, r := range want[:10] {
			id, truth := names[r], c.exact[r]
			e, ok := got[id]
			if !ok {
				t.Errorf("%v: true #%d %q (%d) is not in the top 20: %+v", c.m, rank+1, id, truth, v.Top(20))
				continue
			}
			slack := 0.0
			if c.m == Hits && admitted[r] > 0 {
				sd := math.Sqrt((rate - 1) * float64(admitted[r]))
				slack = 5 * sd
				out := max(float64(truth)-float64(e.Count), float64(e.Count)-float64(truth+v.Bound()), 0)
				worst = max(worst, out/sd)
			}
			lo, hi := float64(truth)-slack, float64(truth+v.Bound())+slack
			if float64(e.Count) < lo || float64(e.Count) > hi {
				t.Errorf("%v: #%d %q: Count %d, want %.0f..%.0f (true %d, %d admitted)", c.m, rank+1, id, e.Count, lo, hi, truth, admitted[r])
			}
		}
		t.Logf("%v: total %d, bound %d, #1 %q %d (%d admitted), #10 %q %d; worst deviation %.2f sd", c.m, v.Total(), v.Bound(),
			names[want[0]], c.exact[want[0]], admitted[want[0]], names[want[9]], c.exact[want[9]], worst)
	}
}

// BenchmarkSampler measures Skip, and Weigh when picked, per check at the
// rates 1, 16 and 64.
func BenchmarkSampler(b *testing.B) {
	for _, rate := range []int{1, 16, 64} {
		b.Run("rate="+strconv.Itoa(rate), func(b *testing.B) {
			s, err := NewSampler(SampleConfig{Rate: rate, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			var sum int64
			for b.Loop() {
				if !s.Skip() {
					sum += s.Weigh(1, t0)
				}
			}
			if sum == 0 {
				b.Fatal("nothing picked")
			}
		})
	}
}
