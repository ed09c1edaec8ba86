// Placement: where a virtual shard belongs. Every id hashes to one of a
// cluster's vshards (shardOf, the FNV-1a of the local shards, so that with
// Shards dividing the vshards an id keeps its local shard); each vshard's
// place among the members is decided by rendezvous (highest random
// weight) hashing over a well-mixed 64-bit score, so that members whose
// ids differ in one character still get fair shares, a join moves only the
// vshards the newcomer wins and a leave only the leaver's. Placement says
// where a vshard should be; etcd says where it is (cluster_view.go).

package actors

import "slices"

// mix64 is the splitmix64 finalizer: every input bit flips about half of
// the output bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// memberHash is the 64-bit hash of a member id that its scores derive from.
func memberHash(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return mix64(h)
}

// score is the rendezvous weight of the member of hash mh for vshard v.
func score(mh uint64, v int) uint64 {
	return mix64(mh ^ mix64(uint64(v)*0x9e3779b97f4a7c15+0x632be59bd9b4e019))
}

// placement is the member each vshard belongs on among a set of members.
type placement struct {
	members []string // sorted
	owner   []int32  // by vshard: an index into members, or -1 with no members
}

// place computes the placement of n vshards over members (ids, in any
// order; duplicates count once).
func place(members []string, n int) placement {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	hs := make([]uint64, len(ms))
	for i, m := range ms {
		hs[i] = memberHash(m)
	}
	p := placement{members: ms, owner: make([]int32, n)}
	for v := range p.owner {
		best, bestScore := int32(-1), uint64(0)
		for i, h := range hs {
			if s := score(h, v); best < 0 || s > bestScore {
				best, bestScore = int32(i), s
			}
		}
		p.owner[v] = best
	}
	return p
}

// of returns the member vshard v belongs on, or "" with no members.
func (p *placement) of(v int) string {
	if i := p.owner[v]; i >= 0 {
		return p.members[i]
	}
	return ""
}
