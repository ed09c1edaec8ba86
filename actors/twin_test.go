package actors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestJournaledAgainstAMemoryTwin: a journaled System and one that keeps
// its state in memory only, on one manual clock, answer the same random
// work with the same decisions (single checks, reservations, CheckEach
// and CheckAll batches, refunds, of reservations too, resets, peeks;
// every algorithm; ids whose policies mostly repeat, so that most hits
// are repeat hits rewritten in their journal tails), while the journaled
// one rolls small segments, takes snapshots and starts again, now after a
// clean Stop, now from a copy of its data directory taken between two
// calls (see journaled.restart); with or without a bucket TTL and top
// keys. After each start every bucket is compared by a peek. In each sync
// mode; seeded, the seed printed.
func TestJournaledAgainstAMemoryTwin(t *testing.T) {
	t.Parallel()
	forEverySyncMode(t, journaledTwin)
}

// twinPolicy is what a random id of journaledTwin is checked with.
type twinPolicy struct {
	p  table.Policy
	ns string
}

func journaledTwin(t *testing.T, mode SyncMode) {
	rng, seed := seeded(t, 11)
	ctx := context.Background()
	clk := clocktest.New(time.UnixMilli(1_700_000_000_000))
	randomPolicy := func() twinPolicy {
		alg := table.Algorithm(rng.IntN(4))
		p := table.Policy{Scale: time.Duration(1+rng.IntN(5)) * time.Second, Limit: int64(1 + rng.IntN(30)), Algorithm: alg}
		if alg != table.FixedWindow && alg != table.SlidingWindow && rng.IntN(2) == 0 {
			p.Burst = int64(1 + rng.IntN(10))
		}
		if rng.IntN(4) == 0 {
			return twinPolicy{p, "rule"}
		}
		return twinPolicy{p, ""}
	}
	ids := make([]twinPolicy, 300)
	for i := range ids {
		ids[i] = randomPolicy()
	}
	// Every (id, policy) checked so far, peeked after each start.
	seen := map[string]table.Request{}
	request := func() table.Request {
		k := rng.IntN(len(ids))
		if rng.IntN(3) != 0 {
			k %= 40 // most checks go to a few hot ids
		}
		tp := ids[k]
		if rng.IntN(10) == 0 {
			tp = randomPolicy()
		}
		r := table.Request{ID: fmt.Sprint("id-", k), Policy: tp.p, Namespace: tp.ns, Hits: int64(rng.IntN(4))}
		if r.Hits > 0 {
			seen[fmt.Sprintf("%s|%s|%+v", r.ID, r.Namespace, r.Policy)] = r
		}
		return r
	}

	// Both keep expired buckets a while, or not, and the journaled one
	// tracks its top keys, or not: neither changes a decision.
	ttl := time.Duration(rng.IntN(3)) * time.Second
	mem := startSystem(t, Config{Shards: 4, Clock: clk, SweepInterval: time.Second, BucketTTL: ttl})
	jr := startJournaled(t, Config{Shards: 4, Clock: clk, SweepInterval: time.Second, BucketTTL: ttl, TopKeys: rng.IntN(2) == 0, JournalSync: mode})

	same := func(step int, what string, got, want []table.Decision, reqs []table.Request) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d (seed %d), %s of %+v: journaled %+v, in memory %+v", step, seed, what, reqs[i], got[i], want[i])
			}
		}
	}
	steps := 8000
	if mode == SyncAlways || testing.Short() {
		steps = 2000
	}
	var reserved []table.Request // reservations not yet refunded, with their windows
	var snapshots, journalErrors int64
	for step := range steps {
		if rng.IntN(3) == 0 {
			clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		switch op := rng.IntN(100); {
		case op < 45:
			req := request()
			a, errA := jr.Check(ctx, req)
			b, errB := mem.Check(ctx, req)
			if errA != nil || errB != nil {
				t.Fatalf("step %d: Check: %v, %v", step, errA, errB)
			}
			same(step, "Check", []table.Decision{a}, []table.Decision{b}, []table.Request{req})
		case op < 55:
			req := request()
			a, errA := jr.Reserve(ctx, req)
			b, errB := mem.Reserve(ctx, req)
			if errA != nil || errB != nil || a.Window != b.Window {
				t.Fatalf("step %d (seed %d): Reserve of %+v: window %d %v, %d %v", step, seed, req, a.Window, errA, b.Window, errB)
			}
			same(step, "Reserve", []table.Decision{a.Decision}, []table.Decision{b.Decision}, []table.Request{req})
			if a.Window != 0 {
				req.Window = a.Window
				reserved = append(reserved, req)
			}
		case op < 65:
			reqs := make([]table.Request, 1+rng.IntN(8))
			for i := range reqs {
				reqs[i] = request()
			}
			a, b := make([]table.Decision, len(reqs)), make([]table.Decision, len(reqs))
			if err := errors.Join(jr.CheckEach(ctx, reqs, a), mem.CheckEach(ctx, reqs, b)); err != nil {
				t.Fatalf("step %d: CheckEach: %v", step, err)
			}
			same(step, "CheckEach", a, b, reqs)
		case op < 85:
			reqs := make([]table.Request, 1+rng.IntN(8))
			for i := range reqs {
				reqs[i] = request()
			}
			a, okA, errA := jr.CheckAll(ctx, reqs)
			b, okB, errB := mem.CheckAll(ctx, reqs)
			if errA != nil || errB != nil || okA != okB {
				t.Fatalf("step %d (seed %d): CheckAll of %+v: %v %v, %v %v", step, seed, reqs, okA, errA, okB, errB)
			}
			same(step, "CheckAll", a, b, reqs)
		case op < 93:
			req := request()
			req.Hits++
			if len(reserved) > 0 && rng.IntN(2) == 0 {
				// The hits of a reservation, given back to its window.
				k := rng.IntN(len(reserved))
				req = reserved[k]
				reserved = slices.Delete(reserved, k, k+1)
			}
			a, errA := jr.Refund(ctx, req)
			b, errB := mem.Refund(ctx, req)
			if errA != nil || errB != nil {
				t.Fatalf("step %d: Refund: %v, %v", step, errA, errB)
			}
			same(step, "Refund", []table.Decision{a}, []table.Decision{b}, []table.Request{req})
		case op < 97:
			req := request()
			a, errA := jr.Reset(ctx, req)
			b, errB := mem.Reset(ctx, req)
			if errA != nil || errB != nil || a != b {
				t.Fatalf("step %d (seed %d): Reset of %+v: %d %v, %d %v", step, seed, req, a, errA, b, errB)
			}
		default:
			req := request()
			a, errA := jr.ResetID(ctx, req.Namespace, req.ID)
			b, errB := mem.ResetID(ctx, req.Namespace, req.ID)
			if errA != nil || errB != nil || a != b {
				t.Fatalf("step %d (seed %d): ResetID(%q, %q): %d %v, %d %v", step, seed, req.Namespace, req.ID, a, errA, b, errB)
			}
		}
		if rng.IntN(steps/8) != 0 {
			continue
		}
		st := jr.Stats()
		snapshots, journalErrors = snapshots+st.Snapshots, journalErrors+st.JournalErrors
		jr.restart(t, rng.IntN(2) == 0)
		keys := make([]string, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			req := seen[k]
			req.Hits = 0
			a, errA := jr.Check(ctx, req)
			b, errB := mem.Check(ctx, req)
			if errA != nil || errB != nil {
				t.Fatalf("step %d: peek: %v, %v", step, errA, errB)
			}
			same(step, fmt.Sprintf("a peek after start %d (%d from a copy)", jr.starts, jr.copies), []table.Decision{a}, []table.Decision{b}, []table.Request{req})
		}
	}
	st := jr.Stats()
	snapshots, journalErrors = snapshots+st.Snapshots, journalErrors+st.JournalErrors
	t.Logf("%d steps, %d starts (%d from a copy), %d buckets seen, %d snapshots, %d journal errors", steps, jr.starts, jr.copies, len(seen), snapshots, journalErrors)
	if journalErrors != 0 {
		t.Fatalf("%d journal errors", journalErrors)
	}
}

// journaled is a System with a journal in small segments, snapshotted
// often, that a test starts again on its data directory, cleanly or as a
// process killed between two calls leaves it; the test's end stops the
// one running.
type journaled struct {
	*System
	cfg            Config
	starts, copies int
}

// startJournaled starts a journaled System on cfg, with a data directory
// of its own, 64 KiB segments and a snapshot each 16 KiB of journal.
func startJournaled(t *testing.T, cfg Config) *journaled {
	t.Helper()
	cfg.DataDir, cfg.SegmentSize, cfg.SnapshotThreshold = t.TempDir(), 64<<10, 16<<10
	cfg.Logger = slog.New(slog.DiscardHandler)
	j := &journaled{cfg: cfg}
	j.start(t)
	t.Cleanup(func() {
		if j.System != nil { // nil after a failed start
			if err := j.Stop(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	return j
}

func (j *journaled) start(t *testing.T) {
	t.Helper()
	s, err := Start(context.Background(), j.cfg)
	if err != nil {
		t.Fatalf("start %d: %v", j.starts+1, err)
	}
	j.System = s
	j.starts++
}

// restart stops the System and starts it again on its data directory or,
// killed, on a copy of it taken before the stop: what a process killed
// then leaves (its writes to the mapped segments are in the page cache).
func (j *journaled) restart(t *testing.T, killed bool) {
	t.Helper()
	if killed {
		dir := t.TempDir()
		copyDataDir(t, j.cfg.DataDir, dir)
		j.cfg.DataDir = dir
		j.copies++
	}
	err := j.Stop(context.Background())
	j.System = nil
	if err != nil {
		t.Fatal(err)
	}
	j.start(t)
}

// copyDataDir copies the files of data directory src into dst as they are
// now, as a process killed now would leave them (a snapshot committed
// meanwhile replaces the older snapshot and the segments it covers): the
// segments and the rest first, a segment removed meanwhile left out, then
// the snapshots, read again from a new listing until one whole listing is
// read, so that the snapshots copied are those of one instant after the
// segments were.
func copyDataDir(t *testing.T, src, dst string) {
	t.Helper()
	files := func(snaps bool) map[string][]byte {
		got := map[string][]byte{}
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), "snap-") != snaps {
				return err
			}
			b, err := os.ReadFile(p)
			switch {
			case errors.Is(err, fs.ErrNotExist) && snaps:
				got = nil // renamed or replaced since the listing
				return filepath.SkipAll
			case errors.Is(err, fs.ErrNotExist):
				return nil
			}
			got[p] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := files(false)
	for {
		snaps := files(true)
		if snaps != nil {
			maps.Copy(all, snaps)
			break
		}
	}
	for p, b := range all {
		rel, err := filepath.Rel(src, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentWorkIsExactAcrossRestarts: goroutines racing single
// checks, CheckEach and CheckAll batches (denied ones among them) on the
// same buckets of every algorithm, on a journaled System whose clock
// stands still, admit at most each bucket's limit, and each bucket counts
// exactly the hits admitted into it (with time still, a token or leaky
// bucket's tokens in use are those hits too); after a clean Stop, or
// from a copy of the data directory taken once they are done, the counts
// are the same; three rounds in each sync mode (seeded).
func TestConcurrentWorkIsExactAcrossRestarts(t *testing.T) {
	t.Parallel()
	forEverySyncMode(t, concurrentWorkAcrossRestarts)
}

func concurrentWorkAcrossRestarts(t *testing.T, mode SyncMode) {
	rng, seed := seeded(t, 13)
	ctx := context.Background()
	reqs := make([]table.Request, 24)
	for i := range reqs {
		p := table.Policy{Scale: time.Hour, Limit: int64(100 + rng.IntN(1800)), Algorithm: table.Algorithm(i % 4)}
		reqs[i] = table.Request{ID: fmt.Sprint("c-", i), Policy: p}
	}
	s := startJournaled(t, Config{Shards: 4, Clock: clocktest.New(time.UnixMilli(1_700_000_000_000)), SweepInterval: -1, JournalSync: mode})
	admitted := make([]atomic.Int64, len(reqs))
	const goroutines, ops = 8, 150
	for round := range 3 {
		seeds := make([]uint64, goroutines)
		for g := range seeds {
			seeds[g] = rng.Uint64()
		}
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seeds[g], 0))
				pick := func(n int) ([]table.Request, []int) {
					batch, which := make([]table.Request, n), make([]int, n)
					for i := range batch {
						which[i] = rng.IntN(len(reqs))
						batch[i] = reqs[which[i]]
						batch[i].Hits = int64(1 + rng.IntN(3))
					}
					return batch, which
				}
				for range ops {
					batch, which := pick(1 + rng.IntN(6))
					switch rng.IntN(3) {
					case 0:
						d, err := s.Check(ctx, batch[0])
						if err != nil {
							t.Errorf("Check: %v", err)
							return
						}
						if d.Allowed {
							admitted[which[0]].Add(batch[0].Hits)
						}
					case 1:
						decs := make([]table.Decision, len(batch))
						if err := s.CheckEach(ctx, batch, decs); err != nil {
							t.Errorf("CheckEach: %v", err)
							return
						}
						for i, d := range decs {
							if d.Allowed {
								admitted[which[i]].Add(batch[i].Hits)
							}
						}
					default:
						_, ok, err := s.CheckAll(ctx, batch)
						if err != nil {
							t.Errorf("CheckAll: %v", err)
							return
						}
						for i := range batch {
							if ok {
								admitted[which[i]].Add(batch[i].Hits)
							}
						}
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		counts := func(what string) {
			t.Helper()
			for i, req := range reqs {
				d, err := s.Check(ctx, req) // a peek: Hits 0
				if err != nil {
					t.Fatal(err)
				}
				if n := admitted[i].Load(); d.Count != n || n > req.Limit {
					t.Fatalf("round %d (seed %d), %s: %+v counts %d, %d admitted (limit %d)", round, seed, what, req, d.Count, n, req.Limit)
				}
			}
		}
		counts("after the work")
		s.restart(t, round%2 == 0)
		counts("after the start")
	}
}

// seeded returns a generator of a new seed on stream, and the seed, which
// it logs so that a failing run can be told from others.
func seeded(t testing.TB, stream uint64) (*rand.Rand, uint64) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, stream)), seed
}
