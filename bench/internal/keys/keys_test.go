package keys

import (
	"slices"
	"testing"
)

func TestID(t *testing.T) {
	if got, want := ID(42), "user-42"; got != want {
		t.Errorf("ID(42) = %q, want %q", got, want)
	}
	ids := IDs(3)
	if want := []string{"user-0", "user-1", "user-2"}; !slices.Equal(ids, want) {
		t.Errorf("IDs(3) = %q, want %q", ids, want)
	}
}

func counts(seq []int32, keys int) []int {
	c := make([]int, keys)
	for _, k := range seq {
		c[k]++
	}
	return c
}

func TestSequenceInRangeAndDeterministic(t *testing.T) {
	for _, d := range []Dist{Uniform, Zipf} {
		for _, keys := range []int{1, 2, 1000, 1_000_000} {
			a := Sequence(d, keys, 10_000, 7)
			b := Sequence(d, keys, 10_000, 7)
			if !slices.Equal(a, b) {
				t.Errorf("%v keys=%d: two sequences from seed 7 differ", d, keys)
			}
			for i, k := range a {
				if k < 0 || int(k) >= keys {
					t.Fatalf("%v keys=%d: seq[%d] = %d, outside [0, %d)", d, keys, i, k, keys)
				}
			}
			if keys > 100 && slices.Equal(a, Sequence(d, keys, 10_000, 8)) {
				t.Errorf("%v keys=%d: seeds 7 and 8 give the same sequence", d, keys)
			}
		}
	}
}

func TestUniformIsFlat(t *testing.T) {
	const keys, n = 100, 1_000_000
	c := counts(Sequence(Uniform, keys, n, 1), keys)
	want := n / keys
	for k, got := range c {
		if got < want*9/10 || got > want*11/10 {
			t.Errorf("key %d drawn %d times, want %d ± 10%%", k, got, want)
		}
	}
}

func TestZipfIsSkewed(t *testing.T) {
	const keys, n = 1000, 1_000_000
	c := counts(Sequence(Zipf, keys, n, 1), keys)
	// P(0)/P(1) = 2^1.1 ≈ 2.14; P(0)/P(9) = 10^1.1 ≈ 12.6.
	if r := float64(c[0]) / float64(c[1]); r < 1.9 || r > 2.4 {
		t.Errorf("count(0)/count(1) = %.2f, want about 2.14", r)
	}
	if r := float64(c[0]) / float64(c[9]); r < 10 || r > 15.5 {
		t.Errorf("count(0)/count(9) = %.2f, want about 12.6", r)
	}
	// The top 1% of keys take far more than 1% of the checks.
	sorted := slices.Clone(c)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	top := 0
	for _, v := range sorted[:keys/100] {
		top += v
	}
	if share := float64(top) / n; share < 0.3 {
		t.Errorf("top 1%% of keys got %.1f%% of the checks, want over 30%%", share*100)
	}
	if c[keys-1] == 0 && c[keys-2] == 0 && c[keys-3] == 0 {
		t.Errorf("the coldest keys were never drawn: counts %v", c[keys-3:])
	}
}

func TestDistString(t *testing.T) {
	for d, want := range map[Dist]string{Uniform: "uniform", Zipf: "zipf(s=1.1)", Dist(9): "Dist(9)"} {
		if got := d.String(); got != want {
			t.Errorf("Dist(%d).String() = %q, want %q", int(d), got, want)
		}
	}
}
