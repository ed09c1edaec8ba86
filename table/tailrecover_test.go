package table

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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
	rng, seed := seeded(t, 5)
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
	// recovered is what a recovery from the log gives now, at now.
	recovered := func() []string {
		fresh := New(Config{BucketTTL: cfg.BucketTTL})
		restoreAll(t, fresh, snap, at(now))
		for i := from; i < len(l.recs); i++ {
			if err := fresh.RestoreTail(l.recs[i], l.tails[i], at(now)); err != nil {
				t.Fatalf("seed %d: restore record %d (%x, tail %x): %v", seed, i, l.recs[i], l.tails[i], err)
			}
		}
		fresh.RestoreDone()
		return snapshotOf(fresh, at(now))
	}
	// The states a bucket may be recovered in while a ChangesTo has
	// failed: the table after the last batch ChangesTo took whole, then
	// after each change since, outside a unit (a homed bucket's change is
	// written as it is made, so a process killed in a batch whose record
	// failed recovers some of its hits: hits never answered, counted).
	since := [][]string{nil}
	for batch := range batches {
		fails := rng.IntN(8) == 0
		record := func() {
			if fails || len(since) > 1 {
				since = append(since, snapshotOf(tb, at(now)))
			}
		}
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
			if !unit {
				record()
				if rng.IntN(3) == 0 {
					now += int64(rng.IntN(20))
				}
			}
		}
		if unit {
			endUnit(rng, tb)
			record()
		}
		if rng.IntN(6) == 0 {
			tb.DeleteExpired(at(now), rng.IntN(10))
			record()
		}
		if fails {
			l.fail = errors.New("disk full")
		}
		if err := tb.ChangesTo(l); err != nil {
			// What the failed append did not take stays pending, for the
			// next batch's call. A process killed now recovers each
			// bucket in one of the states since the last whole write.
			failed++
			recoveredFromOneOf(t, fmt.Sprintf("batch %d (seed %d), after a failed append", batch, seed), recovered(), snapshotOf(tb, at(now)), since)
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
		live := snapshotOf(tb, at(now))
		if got := recovered(); !slices.Equal(got, live) {
			t.Fatalf("batch %d (seed %d): recovered\n%q\nwant\n%q", batch, seed, got, live)
		}
		since = [][]string{live}
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

// recoveredFromOneOf checks that every bucket of got or live (snapshotOf
// lines at one time) is as live or one of states has it, a bucket absent
// from got as absent from one of them. A bucket expired by then is in
// neither and is not looked at.
func recoveredFromOneOf(t *testing.T, what string, got, live []string, states [][]string) {
	t.Helper()
	key := func(line string) string { // the bucket: its id, limit, window and group
		l, r, _ := strings.Cut(line, "|")
		r, _, _ = strings.Cut(r, " aux")
		l, _, _ = strings.Cut(l, "=")
		return l + "|" + r
	}
	byKey := func(lines []string) map[string]string {
		m := make(map[string]string, len(lines))
		for _, line := range lines {
			m[key(line)] = line
		}
		return m
	}
	rec, cur := byKey(got), byKey(live)
	in := []map[string]string{cur} // as it is now, too
	for _, st := range states {
		in = append(in, byKey(st))
	}
	for _, m := range []map[string]string{rec, cur} {
		for k := range m {
			ok := false
			for _, st := range in {
				ok = ok || st[k] == rec[k]
			}
			if !ok {
				t.Fatalf("%s: bucket %s recovered as %q, a state it never had since the last whole write (%d states)", what, k, rec[k], len(states))
			}
		}
	}
}
