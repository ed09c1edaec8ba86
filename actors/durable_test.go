package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// restart stops s and starts a System on the same configuration.
func restart(t *testing.T, s *System, cfg Config) *System {
	t.Helper()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	return startSystem(t, cfg)
}

func mustCheck(t *testing.T, s *System, req table.Request) table.Decision {
	t.Helper()
	d, err := s.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("Check(%+v): %v", req, err)
	}
	return d
}

// TestCountsSurviveARestart: 50 hits with a limit of 100 in an hour, a
// restart on the same data directory, and the next hit is the 51st, in each
// sync mode.
func TestCountsSurviveARestart(t *testing.T) {
	t.Parallel()
	forEverySyncMode(t, func(t *testing.T, mode SyncMode) {
		cfg := Config{Shards: 2, DataDir: t.TempDir(), JournalSync: mode}
		s := startSystem(t, cfg)
		for i := range 50 {
			mustCheck(t, s, hit("alice", 100))
			mustCheck(t, s, hit(fmt.Sprint("other-", i), 100))
		}
		s = restart(t, s, cfg)
		if d := mustCheck(t, s, hit("alice", 100)); !d.Allowed || d.Count != 51 {
			t.Fatalf("first hit after the restart: got %+v, want allowed with count 51", d)
		}
		if st := s.Stats(); st.Buckets != 51 {
			t.Fatalf("buckets after the restart: got %d, want 51", st.Buckets)
		}
	})
}

// TestResetIDSurvivesARestart: the buckets ResetID deleted stay deleted
// across a restart, and the id's others keep their counts.
func TestResetIDSurvivesARestart(t *testing.T) {
	t.Parallel()
	cfg := Config{Shards: 2, DataDir: t.TempDir()}
	s := startSystem(t, cfg)
	cell := table.Request{ID: "carl", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Hour, Limit: 5}, Hits: 5, Namespace: "cell"}
	mustCheck(t, s, cell)
	mustCheck(t, s, hit("carl", 10))
	if n, err := s.ResetID(context.Background(), "cell", "carl"); err != nil || n != 1 {
		t.Fatalf("ResetID: %d, %v; want 1", n, err)
	}
	s = restart(t, s, cfg)
	cell.Hits = 0
	if d := mustCheck(t, s, cell); d.Count != 0 || d.Remaining != 5 {
		t.Fatalf("the reset bucket after the restart: %+v, want empty (5 remaining)", d)
	}
	if d := mustCheck(t, s, hit("carl", 10)); d.Count != 2 {
		t.Fatalf("the id's ad-hoc bucket after the restart: %+v, want count 2", d)
	}
}

// TestDeniedStaysDenied: a bucket at its limit is still at its limit after
// a restart; the restart hands out no fresh budget.
func TestDeniedStaysDenied(t *testing.T) {
	t.Parallel()
	cfg := Config{Shards: 1, DataDir: t.TempDir()}
	s := startSystem(t, cfg)
	for range 3 {
		mustCheck(t, s, hit("bob", 3))
	}
	s = restart(t, s, cfg)
	if d := mustCheck(t, s, hit("bob", 3)); d.Allowed || d.Count != 3 {
		t.Fatalf("after the restart: got %+v, want denied at count 3", d)
	}
}

// TestCrashedShardRebuildsFromItsJournal: a shard that panics while a batch
// is decided (by a caller serving itself, or with SyncAlways by the owner)
// is rebuilt from its journal, so the hits acknowledged before the crash
// still count.
func TestCrashedShardRebuildsFromItsJournal(t *testing.T) {
	t.Parallel()
	for _, sync := range []SyncMode{SyncInterval, SyncAlways} {
		t.Run(sync.String(), func(t *testing.T) {
			t.Parallel()
			const shards = 2
			ids := sameShard("victim", shards, 2)
			boom := ids[1]
			s := startSystem(t, Config{Shards: shards, DataDir: t.TempDir(), JournalSync: sync, applyHook: func(r table.Request) {
				if r.ID == boom {
					panic("injected crash")
				}
			}})
			for range 7 {
				mustCheck(t, s, hit(ids[0], 10))
			}
			if _, err := s.Check(context.Background(), hit(boom, 10)); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("check that crashes the shard: got %v, want ErrUnavailable", err)
			}
			if d := mustCheck(t, s, hit(ids[0], 10)); !d.Allowed || d.Count != 8 {
				t.Fatalf("hit after the crash: got %+v, want count 8 (7 before the crash survive)", d)
			}
			if st := s.Stats(); st.Restarts != 1 {
				t.Fatalf("restarts: got %d, want 1", st.Restarts)
			}
		})
	}
}

// TestDataDirIsLocked: a second System on a data directory in use fails
// with a message naming the directory; after the first stops, it starts.
func TestDataDirIsLocked(t *testing.T) {
	t.Parallel()
	cfg := Config{Shards: 1, DataDir: t.TempDir()}
	s := startSystem(t, cfg)
	_, err := Start(context.Background(), cfg)
	if !errors.Is(err, journal.ErrLocked) || !strings.Contains(err.Error(), cfg.DataDir) {
		t.Fatalf("second Start on one data directory: got %v, want ErrLocked naming %s", err, cfg.DataDir)
	}
	restart(t, s, cfg)
}

// TestShardCountComesFromTheDataDir: an id's shard depends on the number of
// shards, so a data directory keeps its count: Shards 0 adopts it, and a
// different explicit count is refused with a message saying what to do.
func TestShardCountComesFromTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startSystem(t, Config{Shards: 3, DataDir: dir})
	mustCheck(t, s, hit("carol", 10))
	s = restart(t, s, Config{DataDir: dir})
	if n := s.Stats().Shards; n != 3 {
		t.Fatalf("shards with Shards 0 on a 3-shard directory: got %d, want 3", n)
	}
	if d := mustCheck(t, s, hit("carol", 10)); d.Count != 2 {
		t.Fatalf("carol after the restart: got count %d, want 2", d.Count)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Config{Shards: 5, DataDir: dir})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "holds 3 shards") {
		t.Fatalf("Start with 5 shards on a 3-shard directory: got %v, want ErrConfig saying it holds 3", err)
	}
}

// TestSnapshotsCompactTheJournal: with a small threshold the owners write
// snapshots and drop the segments they cover, and a restart recovers every
// count from snapshot plus segments.
func TestSnapshotsCompactTheJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{Shards: 2, DataDir: dir, SegmentSize: 64 << 10, SnapshotThreshold: 64 << 10, SweepInterval: -1}
	s := startSystem(t, cfg)
	// Enough buckets that their first records (each with a tail, its
	// home) fill a segment; a snapshot's roll sends every bucket's next
	// hit to a new record, whose tail its later hits rewrite.
	const ids, rounds = 2000, 12
	for range rounds {
		for i := range ids {
			mustCheck(t, s, hit(fmt.Sprint("user-", i), 1000))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Snapshots < 2 && time.Now().Before(deadline) {
		mustCheck(t, s, hit("tick", 1<<40)) // a batch lets an owner see its snapshot done
	}
	st := s.Stats()
	if st.Snapshots < 2 || st.SnapshotErrors != 0 {
		t.Fatalf("stats: got %d snapshots, %d errors; want ≥ 2 and 0", st.Snapshots, st.SnapshotErrors)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "shard-*", "snap-*.snap"))
	if len(snaps) == 0 {
		t.Fatalf("no snapshot file under %s", dir)
	}
	s = restart(t, s, cfg)
	for i := range ids {
		if d := mustCheck(t, s, hit(fmt.Sprint("user-", i), 1000)); d.Count != rounds+1 {
			t.Fatalf("user-%d after the restart: got count %d, want %d", i, d.Count, rounds+1)
		}
	}
}

// TestExpiredBucketsAreNotRecovered: a window that ended while the daemon
// was down does not come back.
func TestExpiredBucketsAreNotRecovered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := clocktest.New(time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%1000))
	cfg := Config{Shards: 1, DataDir: dir, Clock: clock, SweepInterval: -1}
	s := startSystem(t, cfg)
	mustCheck(t, s, table.Request{ID: "short", Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 2})
	mustCheck(t, s, hit("long", 5))
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	s = startSystem(t, cfg)
	if n := s.Stats().Buckets; n != 1 {
		t.Fatalf("buckets recovered a second later: got %d, want 1 (the hour window only)", n)
	}
}

// TestBadJournalConfig: out-of-range journal settings are refused.
func TestBadJournalConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{JournalSync: 9},
		{JournalSyncInterval: -time.Second},
		{OnJournalError: 7},
		{SegmentSize: -1},
		{SnapshotThreshold: -1},
	} {
		if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Start(%+v): got %v, want ErrConfig", cfg, err)
		}
	}
	// Not a data directory description: refused, never overwritten.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, metaFile), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), Config{DataDir: dir}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), metaFile) {
		t.Fatalf("Start on a directory with a bad META: got %v, want ErrConfig naming it", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, metaFile)); string(b) != "not json" {
		t.Fatalf("META was rewritten: %q", b)
	}
}

// TestFailedStartReleasesTheDataDir: a Start whose recovery fails (one
// shard's journal directory is not a directory) returns the error and
// releases everything it took: the data directory can be started again at
// once, with the journals of every shard, the one recovered before the
// failure included.
func TestFailedStartReleasesTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{Shards: 2, DataDir: dir, SweepInterval: -1}
	s := startSystem(t, cfg)
	ids := [2]string{sameShard("zero", 2, 1)[0], ""}
	for i := 0; ids[1] == ""; i++ {
		if id := fmt.Sprint("one-", i); shardOf(id, 2) != shardOf(ids[0], 2) {
			ids[1] = id
		}
	}
	for _, id := range ids {
		mustCheck(t, s, hit(id, 10))
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	repair := breakShardDir(t, dir, shardOf(ids[1], 2))
	if _, err := Start(context.Background(), cfg); err == nil || errors.Is(err, journal.ErrLocked) {
		t.Fatalf("Start with a shard directory that is a file: got %v, want a recovery error", err)
	}
	repair()
	s = startSystem(t, cfg)
	for _, id := range ids {
		if got := peek(t, s, id, 10); got != 1 {
			t.Fatalf("%s after the failed Start: count %d, want 1", id, got)
		}
	}
}

// journalSize returns the record bytes of shard i's journal.
func journalSize(s *System, i int) int64 {
	sh := s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.j.Size()
}

// TestRepeatHitJournalBytes: a bucket's first check, its own batch, is its
// put; its second, a repeat hit, its count with a tail (its home); each
// later check of the live bucket is its own batch too and rewrites the
// tail: no journal bytes. After a restart (a new table, which binds its
// own references, and the journal's new epoch) the first hit writes the
// bucket's put again, the second a count with a tail, and the next ones
// nothing again; every count survives each restart, in every sync mode.
func TestRepeatHitJournalBytes(t *testing.T) {
	t.Parallel()
	inEverySyncMode(t, 1, func(t *testing.T, s *System, cfg Config) {
		mustCheck(t, s, hit("alice", 1000))
		mustCheck(t, s, hit("alice", 1000))
		before := journalSize(s, 0)
		for range 100 {
			mustCheck(t, s, hit("alice", 1000))
		}
		if got := journalSize(s, 0) - before; got != 0 {
			t.Fatalf("100 repeat hits took %d journal bytes, want 0 (their tail rewritten)", got)
		}
		s = restart(t, s, cfg)
		records := journalRecords(s)
		if d := mustCheck(t, s, hit("alice", 1000)); d.Count != 103 {
			t.Fatalf("after a restart: count %d, want 103", d.Count)
		}
		mustCheck(t, s, hit("alice", 1000))
		if got := journalRecords(s) - records; got != 2 {
			t.Fatalf("the first two hits after a restart appended %d records, want 2", got)
		}
		before = journalSize(s, 0)
		for range 50 {
			mustCheck(t, s, hit("alice", 1000))
		}
		if got := journalSize(s, 0) - before; got != 0 {
			t.Fatalf("50 repeat hits after the restart's first two took %d journal bytes, want 0", got)
		}
		s = restart(t, s, cfg)
		if d := mustCheck(t, s, hit("alice", 1000)); d.Count != 155 {
			t.Fatalf("after a second restart: count %d, want 155", d.Count)
		}
	})
}

// TestBatchedRepeatHitJournalBytes: buckets that only ever come in
// batches of several (CheckEach) get homes too: the first batch appends
// their puts (a record per shard), the second a count with a tail for each
// bucket, and the next batches nothing; every count is exact after a
// restart, after which the same holds again. In every sync mode.
func TestBatchedRepeatHitJournalBytes(t *testing.T) {
	t.Parallel()
	inEverySyncMode(t, 2, func(t *testing.T, s *System, cfg Config) {
		var reqs []table.Request
		shards := map[int]bool{}
		for i := range 8 {
			id := fmt.Sprint("batched-", i)
			shards[shardOf(id, cfg.Shards)] = true
			reqs = append(reqs, hit(id, 1000))
		}
		decs := make([]table.Decision, len(reqs))
		round := 0
		// rounds runs n CheckEach of reqs, each hit admitted with the
		// count of its round, which must append want records in all.
		rounds := func(n, want int, what string) {
			t.Helper()
			records := journalRecords(s)
			for range n {
				round++
				if err := s.CheckEach(context.Background(), reqs, decs); err != nil {
					t.Fatalf("CheckEach %d: %v", round, err)
				}
				for i, d := range decs {
					if !d.Allowed || d.Count != int64(round) {
						t.Fatalf("CheckEach %d, %s: %+v, want allowed with count %d", round, reqs[i].ID, d, round)
					}
				}
			}
			if got := journalRecords(s) - records; got != uint64(want) {
				t.Fatalf("%s appended %d records, want %d", what, got, want)
			}
		}
		for restarts := range 2 {
			rounds(1, len(shards), fmt.Sprintf("after %d restarts, the first CheckEach (puts, a record per shard)", restarts))
			rounds(1, len(reqs), fmt.Sprintf("after %d restarts, the second CheckEach (a count with a tail per bucket)", restarts))
			before := journalSize(s, 0) + journalSize(s, 1)
			rounds(20, 0, fmt.Sprintf("after %d restarts, 20 more CheckEach", restarts))
			if got := journalSize(s, 0) + journalSize(s, 1) - before; got != 0 {
				t.Fatalf("20 more CheckEach of %d buckets took %d journal bytes, want 0 (their tails rewritten)", len(reqs), got)
			}
			s = restart(t, s, cfg)
		}
		rounds(1, len(shards), "after 2 restarts, the first CheckEach")
	})
}

// TestCheckAllRolledBackIsNotJournaled: buckets whose later hits go into
// their journal records' tails (single checks first) take the hits of
// CheckAll units that are kept, and none of those rolled back, across a
// restart, in every sync mode.
func TestCheckAllRolledBackIsNotJournaled(t *testing.T) {
	t.Parallel()
	inEverySyncMode(t, 4, func(t *testing.T, s *System, cfg Config) {
		// A unit applies its checks shard by shard, in ascending order:
		// global's shard before user-N's, so that global is counted
		// before user-N denies the unit.
		userID := "user-1"
		for i := 1; shardOf(userID, cfg.Shards) <= shardOf("global", cfg.Shards); i++ {
			userID = fmt.Sprint("user-", i)
		}
		user := table.Request{ID: userID, Policy: table.Policy{Scale: time.Hour, Limit: 4}, Hits: 1}
		global := table.Request{ID: "global", Policy: table.Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
		for range 2 { // each a put, then a count with a tail
			mustCheck(t, s, user)
			mustCheck(t, s, global)
		}
		ctx := context.Background()
		for i := range 6 { // 2 kept (the user's bucket reaches 4), 4 rolled back
			_, ok, err := s.CheckAll(ctx, []table.Request{global, user})
			if err != nil || ok != (i < 2) {
				t.Fatalf("CheckAll %d: %v, %v; want allowed %v", i, ok, err, i < 2)
			}
		}
		s = restart(t, s, cfg)
		if got := peek(t, s, "global", 100); got != 4 {
			t.Fatalf("global after a restart: count %d, want 4 (2 single checks, 2 units kept)", got)
		}
		if got := peek(t, s, userID, 4); got != 4 {
			t.Fatalf("%s after a restart: count %d, want 4", userID, got)
		}
	})
}

// inEverySyncMode runs fn, in parallel subtests, on a System of shards
// shards journaling with each sync mode, on a fake clock, without sweeps;
// cfg is its Config, for restart.
func inEverySyncMode(t *testing.T, shards int, fn func(t *testing.T, s *System, cfg Config)) {
	forEverySyncMode(t, func(t *testing.T, mode SyncMode) {
		clk := clocktest.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		cfg := Config{Shards: shards, DataDir: t.TempDir(), Clock: clk, SweepInterval: -1, JournalSync: mode}
		fn(t, startSystem(t, cfg), cfg)
	})
}

// forEverySyncMode runs fn in a parallel subtest for each sync mode.
func forEverySyncMode(t *testing.T, fn func(t *testing.T, mode SyncMode)) {
	for _, mode := range []SyncMode{SyncNone, SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, mode)
		})
	}
}
