package journal

import "testing"

// TestDataEnd: in a mapping of 3 zero pages and 5 bytes, one nonzero byte
// at each offset near the page and word boundaries, and a second one
// before it, gives the offset after the later one, whatever from is (from
// itself when the nonzero bytes are all before it).
func TestDataEnd(t *testing.T) {
	t.Parallel()
	const size = 3*4096 + 5
	b := make([]byte, size)
	if got := dataEnd(b, 0); got != 0 {
		t.Fatalf("all zero: got %d, want 0", got)
	}
	if got := dataEnd(b, 100); got != 100 {
		t.Fatalf("all zero from 100: got %d, want 100", got)
	}
	var offs []int
	for _, edge := range []int{0, 8, 4096, 2 * 4096, 3 * 4096, size} {
		for d := -9; d <= 9; d++ {
			if o := edge + d; o >= 0 && o < size {
				offs = append(offs, o)
			}
		}
	}
	for _, o := range offs {
		b[o] = 0x80
		for _, from := range []int{0, 1, 7, 8, 4095, 4096, 4097, o, o + 1} {
			want := int64(o + 1)
			if from > o {
				want = int64(from)
			}
			if got := dataEnd(b, int64(from)); got != want {
				t.Fatalf("byte %d set, from %d: got %d, want %d", o, from, got, want)
			}
			if o > 0 {
				b[o/2] = 1 // an earlier nonzero byte changes nothing
				if got := dataEnd(b, int64(from)); got != want {
					t.Fatalf("bytes %d and %d set, from %d: got %d, want %d", o/2, o, from, got, want)
				}
				b[o/2] = 0
			}
		}
		b[o] = 0
	}
}
