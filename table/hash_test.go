package table

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"
)

// TestSipHashVectors: the SipHash-2-4 test vectors of its authors (key 00
// 01 … 0f; the empty message, and 00 01 … 0e), computed by the same code
// as Hash's SipHash-1-3.
func TestSipHashVectors(t *testing.T) {
	t.Parallel()
	k0, k1 := uint64(0x0706050403020100), uint64(0x0f0e0d0c0b0a0908)
	msg := make([]byte, 15)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, c := range []struct {
		msg  string
		want uint64
	}{{"", 0x726fdb47dd0e0e31}, {string(msg), 0xa129ca6149be45e5}} {
		if got := sipHash(k0, k1, c.msg, 2, 4); got != c.want {
			t.Errorf("SipHash-2-4(%x) = %#x, want %#x", c.msg, got, c.want)
		}
	}
}

// TestHashKeyIsStable pins HashKey.Hash: a data directory that keeps its
// key relies on an id hashing the same in every release.
func TestHashKeyIsStable(t *testing.T) {
	t.Parallel()
	var k HashKey
	for i := range k {
		k[i] = byte(i)
	}
	for id, want := range map[string]uint64{"user-42": 0xf6f878287cd6899c, "a": 0x1c2697ab786a6237, "a-longer-id-of-three-words": 0xea5e53ddaf67d8b5} {
		if got := k.Hash(id); got != want {
			t.Errorf("Hash(%q) = %#x, want %#x", id, got, want)
		}
	}
	if New(Config{HashKey: &k}).Hash("user-42") != k.Hash("user-42") {
		t.Error("a table keyed with k hashes otherwise than k")
	}
	if a, b := New(Config{}).Hash("user-42"), New(Config{}).Hash("user-42"); a == b {
		t.Errorf("two unkeyed tables hash alike (%#x): each must have a seed of its own", a)
	}
	seed := maphash.MakeSeed()
	if a, b := New(Config{HashSeed: &seed}).Hash("user-42"), maphash.String(seed, "user-42"); a != b {
		t.Errorf("a table with HashSeed hashes %#x, maphash under the seed %#x", a, b)
	}
}

// TestApplyHashed: with the hash computed once by the caller (keyed or
// not), ApplyHashed, ReserveHashed, their To forms and ReserveHashedAt
// (the time in Unix ns) decide exactly as
// Apply and Reserve, on the same buckets, leave the request as it was, and
// allocate nothing. Not parallel: it counts allocations.
func TestApplyHashed(t *testing.T) {
	key := NewHashKey()
	seed := maphash.MakeSeed()
	for _, cfg := range []Config{{}, {HashSeed: &seed}, {HashKey: &key}, {HashKey: &key, TrackChanges: true}} {
		// One table per form, each given the same checks.
		plain, hashed, to, applied, appliedTo, atNs := New(cfg), New(cfg), New(cfg), New(cfg), New(cfg), New(cfg)
		for i := range 2000 {
			req := Request{ID: fmt.Sprint("id-", i%300), Policy: Policy{Algorithm: Algorithm(i % numAlgorithms), Scale: time.Second, Limit: 7}, Hits: int64(i % 3)}
			now := at(int64(i * 3))
			want := plain.Reserve(req, now)
			got := hashed.ReserveHashed(req, hashed.Hash(req.ID), now)
			if got != want {
				t.Fatalf("keyed %v, check %d %+v: ReserveHashed %+v, Reserve %+v", cfg.HashKey != nil, i, req, got, want)
			}
			asked := req
			gotTo := Reservation{Window: -1, Decision: Decision{Count: -1, Full: true}} // overwritten whole
			to.ReserveHashedTo(&gotTo, &req, to.Hash(req.ID), now)
			if gotTo != want || req != asked {
				t.Fatalf("check %d %+v: ReserveHashedTo %+v (request after it %+v), Reserve %+v", i, asked, gotTo, req, want)
			}
			gotAt := Reservation{Window: -1, Decision: Decision{Count: -1, Full: true}}
			atNs.ReserveHashedAt(&gotAt, &req, atNs.Hash(req.ID), now.UnixNano())
			if gotAt != want || req != asked {
				t.Fatalf("check %d %+v: ReserveHashedAt %+v (request after it %+v), Reserve %+v", i, asked, gotAt, req, want)
			}
			if d := applied.ApplyHashed(req, applied.Hash(req.ID), now); d != want.Decision {
				t.Fatalf("check %d %+v: ApplyHashed %+v, Reserve %+v", i, req, d, want.Decision)
			}
			dTo := Decision{Count: -1, RetryAfter: -1, Full: true}
			appliedTo.ApplyHashedTo(&dTo, &req, appliedTo.Hash(req.ID), now)
			if dTo != want.Decision || req != asked {
				t.Fatalf("check %d %+v: ApplyHashedTo %+v (request after it %+v), Reserve %+v", i, asked, dTo, req, want.Decision)
			}
			w := fmt.Sprint(plain.Buckets(req.ID, now))
			for _, tb := range []*Table{hashed, to, applied, appliedTo, atNs} {
				if g := fmt.Sprint(tb.Buckets(req.ID, now)); g != w {
					t.Fatalf("check %d: buckets %v, want %v", i, g, w)
				}
			}
		}
		req := Request{ID: "id-7", Policy: Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1}
		h := hashed.Hash(req.ID)
		var r Reservation
		for name, f := range map[string]func(){
			"ApplyHashed":     func() { hashed.ApplyHashed(req, h, at(6000)) },
			"ReserveHashedTo": func() { hashed.ReserveHashedTo(&r, &req, h, at(6000)) },
			"ApplyHashedTo":   func() { hashed.ApplyHashedTo(&r.Decision, &req, h, at(6000)) },
			"ReserveHashedAt": func() { hashed.ReserveHashedAt(&r, &req, h, at(6000).UnixNano()) },
		} {
			if n := testing.AllocsPerRun(100, f); n != 0 && !cfg.TrackChanges {
				t.Fatalf("%s: %v allocations per call, want 0", name, n)
			}
		}
	}
}

// TestKeyedTableRestores: records of a keyed table restore into another
// table keyed alike, and into an unkeyed one: the journal holds ids, not
// hashes.
func TestKeyedTableRestores(t *testing.T) {
	t.Parallel()
	key := NewHashKey()
	tb := New(Config{HashKey: &key, TrackChanges: true})
	for i := range 500 {
		tb.Apply(Request{ID: fmt.Sprint("id-", i), Policy: Policy{Scale: time.Hour, Limit: 100}, Hits: int64(1 + i%4)}, at(int64(i)))
	}
	recs := collect(t, tb.Changes)
	for _, cfg := range []Config{{HashKey: &key}, {}} {
		fresh := New(cfg)
		restoreAll(t, fresh, recs, at(500))
		if got, want := snapshotOf(fresh, at(500)), snapshotOf(tb, at(500)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("keyed %v: restored %d buckets, want %d, or states differ", cfg.HashKey != nil, len(got), len(want))
		}
	}
}
