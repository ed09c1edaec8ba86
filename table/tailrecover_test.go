package table

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestTailRecoveryAgainstTheLiveTable: a table that journals through
// ChangesTo, as a shard does (records with tails, homes rewritten in
// place, a change of a homed bucket written as it is made), recovers
// exactly from its latest snapshot and the records after it with their
// tails, after every batch of random work that ChangesTo took whole:
// batches of one bucket and of many, units committed and rolled back,
// resets, refunds, peeks, every algorithm, a bounded table that evicts or
// refuses, sweeps, and a journal that rolls to a new segment, fails an
// append now and then, and takes snapshots while the table goes on
// changing (seeded; the seed is printed).
func TestTailRecoveryAgainstTheLiveTable(t *testing.T) {
	t.Parallel()
	withEachIDPrefix(t, recoverTailedTable)
}

func recoverTailedTable(t *testing.T, prefix string) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	cfg := Config{TrackChanges: true, BucketTTL: time.Duration(rng.IntN(3)) * time.Second, MaxBuckets: 20 + rng.IntN(60), Evict: rng.IntN(2) == 0}
	tb := New(cfg)
	l := newMemLog()
	policy := func() (Policy, string) {
		p := Policy{Scale: time.Duration(1+rng.IntN(4)) * 500 * time.Millisecond, Limit: int64(rng.IntN(8)), Algorithm: Algorithm(rng.IntN(numAlgorithms)), Burst: int64(rng.IntN(3)) * 4}
		if rng.IntN(4) == 0 {
			return p, "rule"
		}
		return p, ""
	}
	// Few ids, each with a policy of its own most of the time: most hits
	// are repeat hits of a bucket the journal holds.
	type usual struct {
		p  Policy
		ns string
	}
	ids := make([]usual, 4+rng.IntN(20))
	for i := range ids {
		ids[i].p, ids[i].ns = policy()
	}
	request := func() Request {
		k := rng.IntN(len(ids))
		r := Request{ID: fmt.Sprint(prefix, "k", k), Policy: ids[k].p, Namespace: ids[k].ns, Hits: int64(rng.IntN(3))}
		if rng.IntN(10) == 0 {
			r.Policy, r.Namespace = policy()
		}
		return r
	}

	// The journal as recovery reads it: the snapshot's records, then the
	// records from index from on (those appended after the snapshot's
	// roll), each with its tail as it is now.
	var snap [][]byte
	from := 0
	// A snapshot being written: the records a frozen copy gives, read
	// some batches after the freeze while the table changes.
	var frozen *Frozen
	frozenFrom, thawAt := 0, 0
	batches, failed, snapshots := 300, 0, 0
	if testing.Short() {
		batches = 100
	}
	now := int64(0)
	for batch := range batches {
		unit := rng.IntN(5) == 0
		if unit {
			tb.Begin()
		}
		n := 1 // a batch of one bucket, as most checks come, half the time
		if rng.IntN(2) == 0 {
			n = rng.IntN(12)
		}
		now += int64(rng.IntN(60))
		for range n {
			randomChange(rng, tb, request(), now, unit)
			if !unit && rng.IntN(3) == 0 {
				now += int64(rng.IntN(20))
			}
		}
		if unit {
			endUnit(rng, tb)
		}
		if rng.IntN(6) == 0 {
			tb.DeleteExpired(at(now), rng.IntN(10))
		}
		if rng.IntN(8) == 0 {
			l.fail = errors.New("disk full")
		}
		if err := tb.ChangesTo(l); err != nil {
			// What the failed append did not take stays pending, for the
			// next batch's call; recovery is not compared until then.
			failed++
			continue
		}
		if l.fail != nil {
			l.fail = nil // nothing was appended: the failure never came
		}
		switch {
		case frozen == nil && rng.IntN(30) == 0:
			// StartSnapshot: a roll, then the freeze.
			l.roll()
			frozen, frozenFrom, thawAt = tb.Freeze(at(now)), len(l.recs), batch+1+rng.IntN(5)
		case frozen != nil && batch >= thawAt:
			snap, from = collect(t, frozen.Records), frozenFrom
			tb.Thaw(frozen)
			frozen = nil
			snapshots++
		case rng.IntN(25) == 0:
			l.roll() // a full segment
		}
		fresh := New(Config{BucketTTL: cfg.BucketTTL})
		restoreAll(t, fresh, snap, at(now))
		for i := from; i < len(l.recs); i++ {
			if err := fresh.RestoreTail(l.recs[i], l.tails[i], at(now)); err != nil {
				t.Fatalf("batch %d (seed %d): restore record %d (%x, tail %x): %v", batch, seed, i, l.recs[i], l.tails[i], err)
			}
		}
		fresh.RestoreDone()
		if got, want := snapshotOf(fresh, at(now)), snapshotOf(tb, at(now)); !slices.Equal(got, want) {
			t.Fatalf("batch %d (seed %d): recovered\n%q\nwant\n%q", batch, seed, got, want)
		}
	}
	if frozen != nil {
		tb.Thaw(frozen)
	}
	t.Logf("%d batches, %d failed appends, %d snapshots, %d records, %d with a tail, %d rewrites in place, %d buckets", batches, failed, snapshots, len(l.recs), l.tailed(), tb.rewrites, tb.Len())
}

// tailed returns how many records of l have a tail.
func (l *memLog) tailed() int {
	n := 0
	for _, tl := range l.tails {
		if tl != nil {
			n++
		}
	}
	return n
}
