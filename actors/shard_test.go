package actors

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestLowHashPicksIDHashShard checks that lowHash agrees with idHash in
// the bits that pick a shard among at most 16, for ids of every length up
// to 64 bytes and every byte value, and that a System routes each id to
// shardOf's shard whatever its number of shards (a power of two up to 16
// by lowHash, others by idHash), with top keys and without.
func TestLowHashPicksIDHashShard(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"", "a", "user-0", "\x00", "\xff\xfe"}
	for n := range 64 {
		for range 50 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			ids = append(ids, string(b))
		}
	}
	for i := range 1000 {
		ids = append(ids, "user-"+strconv.Itoa(i))
	}
	for _, id := range ids {
		if got, want := lowHash(id)&lowHashMask, idHash(id)&lowHashMask; got != want {
			t.Fatalf("%q: lowHash's low bits %#x, idHash's %#x", id, got, want)
		}
	}
	for _, shards := range []int{1, 2, 4, 6, 8, 16, 32} {
		for _, top := range []bool{false, true} {
			sys, err := Start(context.Background(), Config{Shards: shards, TopKeys: top, SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if got, want := sys.shardIndexOf(id), shardOf(id, shards); got != want {
					t.Fatalf("%d shards, top keys %v: shardIndexOf(%q) = %d, want %d", shards, top, id, got, want)
				}
			}
			if err := sys.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzLowHash checks lowHash against idHash on any id.
func FuzzLowHash(f *testing.F) {
	f.Add("user-0")
	f.Add("")
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := lowHash(id)&lowHashMask, idHash(id)&lowHashMask; got != want {
			t.Fatalf("%q: lowHash's low bits %#x, idHash's %#x", id, got, want)
		}
	})
}
