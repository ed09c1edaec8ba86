package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// bigBatch is MaxCheckAll checks of the largest kind a client can send: ids
// of table.MaxIDLen bytes, half of them under the longest namespace.
func bigBatch() []table.Request {
	reqs := make([]table.Request, MaxCheckAll)
	for i := range reqs {
		p := fmt.Sprintf("%d-", i)
		reqs[i] = table.Request{ID: p + strings.Repeat("x", table.MaxIDLen-len(p)), Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 1}
		if i%2 == 1 {
			reqs[i].Namespace = strings.Repeat("n", table.MaxNamespaceLen)
		}
	}
	return reqs
}

// TestLargestBatchFitsTheSmallestSegment: with segments of the smallest
// size, one batch of the largest checks is journaled (its records fit), the
// shard goes on journaling, and a restart finds every count.
func TestLargestBatchFitsTheSmallestSegment(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Shards: 1, DataDir: t.TempDir(), JournalSync: mode, SegmentSize: journal.MinSegmentSize, SweepInterval: -1}
			s := startSystem(t, cfg)
			reqs := bigBatch()
			decs, ok, err := s.CheckAll(context.Background(), reqs)
			if err != nil || !ok {
				t.Fatalf("CheckAll of %d checks with %d-byte ids: got allowed %v, %v; want allowed", len(reqs), table.MaxIDLen, ok, err)
			}
			for i, d := range decs {
				if d.Count != 1 {
					t.Fatalf("check %d: count %d, want 1", i, d.Count)
				}
			}
			if d := mustCheck(t, s, reqs[0]); d.Count != 2 {
				t.Fatalf("a later check: count %d, want 2", d.Count)
			}
			if st := s.Stats(); st.JournalErrors != 0 || st.FailedClosed != 0 {
				t.Fatalf("stats: %d journal errors, %d batches refused; want 0 and 0", st.JournalErrors, st.FailedClosed)
			}
			s = restart(t, s, cfg)
			decs, ok, err = s.CheckAll(context.Background(), reqs)
			if err != nil || !ok {
				t.Fatalf("CheckAll after the restart: got allowed %v, %v; want allowed", ok, err)
			}
			for i, d := range decs {
				want := int64(2)
				if i == 0 {
					want = 3
				}
				if d.Count != want {
					t.Fatalf("check %d after the restart: count %d, want %d", i, d.Count, want)
				}
			}
		})
	}
}

// peek returns the count of id's bucket under hit(id, limit), counting nothing.
func peek(t *testing.T, s *System, id string, limit int64) int64 {
	t.Helper()
	req := hit(id, limit)
	req.Hits = 0
	return mustCheck(t, s, req).Count
}

// pending returns how many buckets' changes shard i has yet to journal.
func pending(s *System, i int) int {
	sh := s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.table.Pending()
}

// TestJournalHealsAndCatchesUp: while a shard's journal cannot create its
// segment (a directory stands where the file must go), 20 batches fail —
// refused with ErrJournal (FailClosed) or answered from memory (FailOpen),
// holding more than a segment's worth of changes; once the obstacle is
// gone, the next batch journals them all, and a restart finds every hit.
func TestJournalHealsAndCatchesUp(t *testing.T) {
	t.Parallel()
	for _, policy := range []JournalErrorPolicy{FailClosed, FailOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			blocker := filepath.Join(shardDir(dir, 0), "seg-0000000000000001.log.tmp")
			if err := os.MkdirAll(blocker, 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Shards: 1, DataDir: dir, SegmentSize: journal.MinSegmentSize, OnJournalError: policy, SweepInterval: -1}
			s := startSystem(t, cfg)
			const batches, size = 20, 100
			id := func(b, i int) string { return fmt.Sprintf("batch-%02d-check-%03d-%s", b, i, strings.Repeat("p", 40)) }
			for b := range batches {
				reqs := make([]table.Request, size)
				for i := range reqs {
					reqs[i] = hit(id(b, i), 10)
				}
				_, ok, err := s.CheckAll(context.Background(), reqs)
				switch {
				case policy == FailClosed && !errors.Is(err, ErrJournal):
					t.Fatalf("batch %d while the journal fails: got %v, want ErrJournal", b, err)
				case policy == FailOpen && (err != nil || !ok):
					t.Fatalf("batch %d while the journal fails: got allowed %v, %v; want allowed from memory", b, ok, err)
				}
			}
			st := s.Stats()
			failed := st.FailedClosed + st.FailedOpen
			if st.JournalErrors != batches || failed != batches {
				t.Fatalf("stats while failing: %+v; want %d journal errors and %d failed batches", st, batches, batches)
			}
			if n := pending(s, 0); n != batches*size {
				t.Fatalf("unjournaled buckets: %d, want %d", n, batches*size)
			}

			if err := os.Remove(blocker); err != nil {
				t.Fatal(err)
			}
			if d := mustCheck(t, s, hit("after", 10)); !d.Allowed || d.Count != 1 {
				t.Fatalf("first check once the journal can work: got %+v, want allowed with count 1", d)
			}
			if n := pending(s, 0); n != 0 {
				t.Fatalf("unjournaled buckets after the journal healed: %d, want 0", n)
			}
			if st := s.Stats(); st.JournalErrors != batches {
				t.Fatalf("journal errors after healing: %d, want %d", st.JournalErrors, batches)
			}

			s = restart(t, s, cfg)
			for b := range batches {
				for i := range size {
					if got := peek(t, s, id(b, i), 10); got != 1 {
						t.Fatalf("%s after the restart: count %d, want 1", id(b, i), got)
					}
				}
			}
			if got := peek(t, s, "after", 10); got != 1 {
				t.Fatalf("after, after the restart: count %d, want 1", got)
			}
		})
	}
}

// breakShardDir makes shard i's journal directory unusable (a file takes
// its place) and returns the function that puts it back.
func breakShardDir(t *testing.T, dataDir string, i int) (repair func()) {
	t.Helper()
	d := shardDir(dataDir, i)
	if err := os.Rename(d, d+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(d+".away", d); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRebuildRetriesTheJournal: a shard that crashes when its journal
// cannot be read (its directory is gone) serves without it — refusing
// every check (FailClosed) or answering from memory (FailOpen) — and tries
// the journal again a second later: once it can be read, the shard
// rebuilds from it and journals again, and the hits made meanwhile are
// counted on top of the journaled ones and journaled too.
func TestRebuildRetriesTheJournal(t *testing.T) {
	t.Parallel()
	for _, policy := range []JournalErrorPolicy{FailClosed, FailOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			clock := clocktest.New(time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000))
			cfg := Config{Shards: 1, DataDir: dir, Clock: clock, OnJournalError: policy, SweepInterval: -1,
				applyHook: func(r table.Request) {
					if r.ID == "boom" {
						panic("injected crash")
					}
				}}
			s := startSystem(t, cfg)
			for range 5 {
				mustCheck(t, s, hit("a", 100))
			}
			repair := breakShardDir(t, dir, 0)
			if _, err := s.Check(context.Background(), hit("boom", 100)); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("the crashing check: got %v, want ErrUnavailable", err)
			}
			for i, id := range []string{"a", "a", "a", "b", "b"} {
				d, err := s.Check(context.Background(), hit(id, 100))
				switch {
				case policy == FailClosed && !errors.Is(err, ErrJournal):
					t.Fatalf("check %d (%s) without a journal: got %+v, %v; want ErrJournal", i, id, d, err)
				case policy == FailOpen && (err != nil || !d.Allowed):
					t.Fatalf("check %d (%s) without a journal: got %+v, %v; want allowed from memory", i, id, d, err)
				}
			}
			repair()
			// Until a second has passed the shard does not try again.
			d, err := s.Check(context.Background(), hit("c", 100))
			if policy == FailClosed && !errors.Is(err, ErrJournal) || policy == FailOpen && (err != nil || d.Count != 1) {
				t.Fatalf("a check right after the repair: got %+v, %v; want it still served without the journal", d, err)
			}
			if st := s.Stats(); st.FailedClosed+st.FailedOpen != 6 || (policy == FailOpen) != (st.FailedOpen == 6) {
				t.Fatalf("stats without a journal: %+v; want 6 failed batches, counted under the policy", st)
			}
			clock.Advance(rebuildRetry)
			// a: 5 journaled, 3 made without the journal (answered or
			// refused, they count, as when a journal fails to take a batch),
			// and this one.
			const wantA, wantB, wantC = 9, 3, 1
			if d := mustCheck(t, s, hit("a", 100)); d.Count != wantA {
				t.Fatalf("a once the journal can be read: count %d, want %d", d.Count, wantA)
			}
			if d := mustCheck(t, s, hit("b", 100)); d.Count != wantB {
				t.Fatalf("b once the journal can be read: count %d, want %d", d.Count, wantB)
			}
			if st := s.Stats(); st.Restarts != 1 {
				t.Fatalf("restarts: got %d, want 1", st.Restarts)
			}
			s = restart(t, s, cfg)
			if got := peek(t, s, "a", 100); got != wantA {
				t.Fatalf("a after the restart: count %d, want %d", got, wantA)
			}
			if got := peek(t, s, "b", 100); got != wantB {
				t.Fatalf("b after the restart: count %d, want %d", got, wantB)
			}
			if got := peek(t, s, "c", 100); got != wantC {
				t.Fatalf("c after the restart: count %d, want %d", got, wantC)
			}
			if st := s.Stats(); st.Buckets != 3 {
				t.Fatalf("buckets after the restart: %d, want 3", st.Buckets)
			}
		})
	}
}

// TestReplayUnjournaled: the changes answered from a temporary table are
// replayed on the rebuilt one in order, at their times; a refund gives back
// only hits a replayed check counted there, never a journaled one.
func TestReplayUnjournaled(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
	tb := table.New(table.Config{TrackChanges: true})
	for range 5 {
		tb.Apply(hit("full", 5), now) // journaled, at its limit
	}
	tb.Apply(hit("reset", 5), now)
	if err := tb.Changes(func([]byte) error { return nil }); err != nil { // journaled
		t.Fatal(err)
	}
	refund := func(id string, limit, n int64) table.Request {
		r := hit(id, limit)
		r.Hits = n
		return r
	}
	later := now.Add(time.Minute)
	replayUnjournaled(tb, []loggedOp{
		{opCheck, hit("full", 5), now},        // denied here (the temporary table admitted it)
		{opRefund, refund("full", 5, 1), now}, // gives back nothing: no replayed hit to give back
		{opCheck, hit("new", 5), now},
		{opCheck, hit("new", 5), now},
		{opRefund, refund("new", 5, 3), later}, // gives back the 2 replayed hits only
		{opCheck, hit("new", 5), later},
		{opReset, hit("reset", 5), later},
		{opCheck, hit("reset", 5), later},
	})
	for id, want := range map[string]int64{"full": 5, "new": 1, "reset": 1} {
		if b, ok := tb.Get(hit(id, 5), later); !ok || b.Count != want {
			t.Errorf("%s after the replay: got %+v (found %v), want count %d", id, b, ok, want)
		}
	}
	if got := tb.Pending(); got != 3 {
		t.Errorf("changes to journal after the replay: %d, want 3 (new, and reset deleted and counted again)", got)
	}
}

// TestReplayUnjournaledResetID: a ResetID made on the temporary table
// deletes, on the table rebuilt from the journal, the buckets it holds of
// that id in that namespace, and only those.
func TestReplayUnjournaledResetID(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
	tb := table.New(table.Config{TrackChanges: true})
	cell := hit("k", 5)
	cell.Namespace, cell.Hits = "cell", 4
	tb.Apply(cell, now)        // journaled
	tb.Apply(hit("k", 5), now) // the same id, ad hoc: journaled
	cell.Hits = 1
	replayUnjournaled(tb, []loggedOp{
		{opResetID, table.Request{ID: "k", Namespace: "cell"}, now},
		{opCheck, cell, now},
	})
	if b, ok := tb.Get(cell, now); !ok || b.Count != 1 {
		t.Errorf("the namespace's bucket after the replay: %+v (found %v), want count 1", b, ok)
	}
	if b, ok := tb.Get(hit("k", 5), now); !ok || b.Count != 1 {
		t.Errorf("the ad-hoc bucket after the replay: %+v (found %v), want count 1, untouched", b, ok)
	}
}

// TestUnjournaledIsBounded: a shard without a journal keeps at most
// maxUnjournaled changes to replay, counts the rest, and skips what
// changes nothing.
func TestUnjournaledIsBounded(t *testing.T) {
	t.Parallel()
	var sh shard
	now := time.Unix(1_700_000_000, 0)
	peekReq := hit("p", 5)
	peekReq.Hits = 0
	sh.keepUnjournaled(&call{op: opCheck, req: peekReq}, now)
	sh.keepUnjournaled(&call{op: opBuckets, req: hit("p", 5)}, now)
	if len(sh.unjournaled) != 0 {
		t.Fatalf("a peek and a Buckets: kept %d, want 0", len(sh.unjournaled))
	}
	for range maxUnjournaled + 3 {
		sh.keepUnjournaled(&call{op: opCheck, req: hit("a", 5)}, now)
	}
	if len(sh.unjournaled) != maxUnjournaled || sh.lost != 3 {
		t.Fatalf("kept %d, lost %d; want %d and 3", len(sh.unjournaled), sh.lost, maxUnjournaled)
	}
}

// processUmask returns the umask, read from /proc (setting it to read it
// would race with the tests running in parallel), or skips the test.
func processUmask(t *testing.T) os.FileMode {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status to read the umask from: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return os.FileMode(m)
		}
	}
	t.Skip("no Umask line in /proc/self/status")
	return 0
}

// TestDataDirIsPrivate: the ids in a data directory are its owner's alone:
// a new one is 0700 with 0700 shard directories and 0600 files (before the
// umask), and an existing one with wider modes is tightened at Start.
func TestDataDirIsPrivate(t *testing.T) {
	t.Parallel()
	mask := processUmask(t)
	mode := func(path string) os.FileMode {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	dir := filepath.Join(t.TempDir(), "data")
	cfg := Config{Shards: 2, DataDir: dir, JournalSync: SyncNone, SweepInterval: -1}
	s := startSystem(t, cfg)
	for i := range 20 {
		mustCheck(t, s, hit(fmt.Sprint("id-", i), 10))
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "shard-*", "seg-*.log"))
	if len(files) != 2 {
		t.Fatalf("segments: %v, want one per shard", files)
	}
	want := map[string]os.FileMode{dir: 0o700 &^ mask, filepath.Join(dir, metaFile): 0o600 &^ mask, filepath.Join(dir, "LOCK"): 0o600 &^ mask,
		shardDir(dir, 0): 0o700 &^ mask, shardDir(dir, 1): 0o700 &^ mask}
	for _, f := range files {
		want[f] = 0o600 &^ mask
	}
	for path, m := range want {
		if got := mode(path); got != m {
			t.Errorf("%s: mode %#o, want %#o", path, got, m)
		}
	}

	for _, path := range []string{dir, shardDir(dir, 0), shardDir(dir, 1)} {
		if err := os.Chmod(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startSystem(t, cfg)
	for _, path := range []string{dir, shardDir(dir, 0), shardDir(dir, 1)} {
		if got := mode(path); got != 0o700 {
			t.Errorf("%s after Start: mode %#o, want 0700", path, got)
		}
	}
	for _, f := range files {
		if got := mode(f); got != 0o600 {
			t.Errorf("%s after Start: mode %#o, want 0600", f, got)
		}
	}
}

// TestStopWithoutAJournalSaysWhatIsLost: a System stopped while a shard
// serves without its journal logs how many changes were never journaled.
func TestStopWithoutAJournalSaysWhatIsLost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	cfg := Config{Shards: 1, DataDir: dir, OnJournalError: FailOpen, SweepInterval: -1, Logger: logger,
		applyHook: func(r table.Request) {
			if r.ID == "boom" {
				panic("injected crash")
			}
		}}
	s := startSystem(t, cfg)
	breakShardDir(t, dir, 0)
	if _, err := s.Check(context.Background(), hit("boom", 10)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the crashing check: got %v, want ErrUnavailable", err)
	}
	mustCheck(t, s, hit("a", 10))
	mustCheck(t, s, hit("b", 10))
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), `msg="changes made while the journal could not be read were never journaled" shard=0 changes=2`) {
		t.Fatalf("no log line saying 2 changes were never journaled:\n%s", logs.String())
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
