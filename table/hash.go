package table

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"time"
)

// HashKey is the secret key of a keyed id hash (HashKey.Hash): SipHash-1-3
// with a 128-bit key, a pseudo-random function of the id for whoever does
// not know the key, so that nobody can craft ids that collide in a table's
// index. A key kept beside a data directory gives the same hash in every
// process, which lets one hash of an id pick its shard and find it in the
// shard's table.
type HashKey [16]byte

// NewHashKey returns a random key (crypto/rand).
func NewHashKey() HashKey {
	var k HashKey
	_, _ = rand.Read(k[:]) // never fails since Go 1.24
	return k
}

// Hash returns the SipHash-1-3 of id under k.
func (k *HashKey) Hash(id string) uint64 {
	return sipHash(binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:]), id, 1, 3)
}

// sipHash is SipHash-c-d of s under the key (k0, k1).
func sipHash(k0, k1 uint64, s string, c, d int) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	n := len(s)
	for ; len(s) >= 8; s = s[8:] {
		m := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		v3 ^= m
		for range c {
			v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		}
		v0 ^= m
	}
	last := uint64(n) << 56
	for i := range len(s) {
		last |= uint64(s[i]) << (8 * i)
	}
	v3 ^= last
	for range c {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	v0 ^= last
	v2 ^= 0xff
	for range d {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// sipRound is one SipRound of the state (v0, v1, v2, v3).
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13) ^ v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16) ^ v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21) ^ v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17) ^ v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// Hash returns the hash of id that t's index is keyed by: Config.HashKey's
// Hash if the table has a key, else maphash under Config.HashSeed (or a
// seed of its own). A caller that needs the hash of an id anyway (to pick a
// shard) computes it once, with the same key or seed, and hands it to
// ApplyHashed.
func (t *Table) Hash(id string) uint64 { return t.hashID(id) }

// ApplyHashed is Apply for a caller that has the hash of req.ID already:
// h must be t.Hash(req.ID), which the table computes again where it takes
// a bucket out of its index (a bucket made under another hash could not be
// found there: a broken invariant, which panics). It saves Apply's hashing
// of the id.
func (t *Table) ApplyHashed(req Request, h uint64, now time.Time) Decision {
	var d Decision
	var win int64
	t.apply(&d, &win, &req, h, now.UnixNano())
	return d
}

// ReserveHashed is Reserve with the hash of req.ID, as for ApplyHashed.
func (t *Table) ReserveHashed(req Request, h uint64, now time.Time) Reservation {
	var r Reservation
	t.ReserveHashedTo(&r, &req, h, now)
	return r
}

// ApplyHashedTo and ReserveHashedTo are ApplyHashed and ReserveHashed
// answering into d or r, for a caller that holds req and the answer in
// memory: neither is copied on the way (measured in the actors package's
// BenchmarkCheck, p=1 and p=64: +5.5% checks/s). req is not changed.
func (t *Table) ApplyHashedTo(d *Decision, req *Request, h uint64, now time.Time) {
	var win int64
	t.apply(d, &win, req, h, now.UnixNano())
}

// ReserveHashedTo: see ApplyHashedTo.
func (t *Table) ReserveHashedTo(r *Reservation, req *Request, h uint64, now time.Time) {
	t.ReserveHashedAt(r, req, h, now.UnixNano())
}

// ReserveHashedAt is ReserveHashedTo at the time unixNano (now.UnixNano()),
// for a caller whose clock reads nanoseconds without a time.Time: the
// System clock reads them in about 55 ns against 75 ns for
// Now().UnixNano() on the bench machine (actors/clock's
// BenchmarkSystemClock).
func (t *Table) ReserveHashedAt(r *Reservation, req *Request, h uint64, unixNano int64) {
	t.apply(&r.Decision, &r.Window, req, h, unixNano)
}
