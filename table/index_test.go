package table

import (
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"time"
)

// lookup returns the slot the index holds for fingerprint fp that satisfies
// match, or false.
func (x *index) lookup(fp uint32, match func(slot uint32) bool) (uint32, bool) {
	if x.n == 0 {
		return 0, false
	}
	for i := fp & x.mask; x.e[i] != 0; i = (i + 1) & x.mask {
		if e := x.e[i]; uint32(e>>32) == fp && match(uint32(e)-1) {
			return uint32(e) - 1, true
		}
	}
	return 0, false
}

// TestIndexAgainstAMap adds and deletes random entries, many sharing a home
// position (fingerprints drawn from a small set, so probe runs are long and
// wrap around the end), and after every step checks every live entry is
// found and every deleted one is not.
func TestIndexAgainstAMap(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var x index
	live := map[uint32]uint32{} // slot → fp
	var dead []uint32
	nextSlot := uint32(0)
	for step := range 20_000 {
		if len(live) == 0 || rng.IntN(100) < 55 {
			fp := uint32(rng.IntN(200)) * 0x01000193 // many equal low bits
			if rng.IntN(4) == 0 {
				fp = uint32(minIndexCap - 1 - rng.IntN(3)) // homes at the end: runs wrap
			}
			x.add(fp, nextSlot)
			live[nextSlot] = fp
			nextSlot++
		} else {
			for slot, fp := range live {
				x.del(fp, slot)
				delete(live, slot)
				dead = append(dead, slot)
				break
			}
		}
		if x.n != len(live) {
			t.Fatalf("step %d (seed %d): got n %d, want %d", step, seed, x.n, len(live))
		}
		if step%97 != 0 {
			continue
		}
		for slot, fp := range live {
			if got, ok := x.lookup(fp, func(s uint32) bool { return s == slot }); !ok || got != slot {
				t.Fatalf("step %d (seed %d): slot %d (fp %#x) not found", step, seed, slot, fp)
			}
		}
		for _, slot := range dead[max(0, len(dead)-50):] {
			if _, ok := x.lookup(0, func(s uint32) bool { return s == slot }); ok {
				t.Fatalf("step %d (seed %d): deleted slot %d still found", step, seed, slot)
			}
		}
	}
	if len(x.e) < 2*minIndexCap {
		t.Fatalf("the index never grew: capacity %d", len(x.e))
	}
	for slot, fp := range live {
		x.del(fp, slot)
	}
	for i, e := range x.e {
		if e != 0 {
			t.Fatalf("entry %d left after deleting everything: %#x", i, e)
		}
	}
}

// TestIndexLosesNothingUnderChurn drives a table through windows that
// expire, buckets that move (token buckets) and resets, and checks after
// each round that the index holds exactly the buckets of the tree.
func TestIndexLosesNothingUnderChurn(t *testing.T) {
	t.Parallel()
	tb := New(Config{MaxBuckets: 3000, Evict: true})
	now := time.UnixMilli(1_700_000_000_000)
	algs := []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket}
	for round := range 40 {
		for i := range 2000 {
			req := Request{
				ID:     "id-" + string(rune('a'+i%26)) + time.Duration(i).String(),
				Policy: Policy{Scale: time.Duration(1+i%3) * time.Second, Limit: 5, Algorithm: algs[i%len(algs)]},
				Hits:   1,
			}
			tb.Apply(req, now)
			if i%50 == 0 {
				tb.Reset(req, now)
			}
		}
		now = now.Add(700 * time.Millisecond)
		tb.DeleteExpired(now, 500)
		if tb.ix.n != tb.tree.Len() {
			t.Fatalf("round %d: index holds %d buckets, tree %d", round, tb.ix.n, tb.tree.Len())
		}
		tb.tree.Scan(func(it item) bool {
			s := tb.slots.at(it.slot())
			g := tb.byID[it.gid()]
			if got, ok := tb.find(g, it.bucket, hashOf(tb, s.id), s.id); !ok || got != it {
				t.Fatalf("round %d: bucket %+v of %q: index found %+v, %v", round, it, s.id, got, ok)
			}
			return true
		})
	}
}

func hashOf(t *Table, id string) uint64 { return maphash.String(t.seed, id) }
