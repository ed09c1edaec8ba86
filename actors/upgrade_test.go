package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// legacyDataDir is a data directory written by the release before the
// compact journal format (commit b61a78d, by testdata/datadir-v1/
// generate_test.go.txt): 4 shards, each a snapshot and a segment after it,
// holding buckets of every algorithm, with and without a rule namespace,
// some reset (deleted), some reset and counted again, some expired.
// expected.json holds what System.Buckets answered for every id on that
// release, at the time it ends.
const legacyDataDir = "testdata/datadir-v1"

// copyTree copies the directory tree from into to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// legacyExpected reads the legacy data directory's expected.json: the end
// time and every id's buckets, of its 450 ids.
func legacyExpected(t *testing.T) (time.Time, map[string]json.RawMessage) {
	t.Helper()
	now, want, _ := expectedAt(t, legacyDataDir)
	if len(want) != 450 {
		t.Fatalf("expected.json: %d ids, want 450", len(want))
	}
	return now, want
}

// checkBuckets compares what s holds for every id of want with want.
func checkBuckets(t *testing.T, s *System, want map[string]json.RawMessage) (buckets int) {
	t.Helper()
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		got, err := s.Buckets(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		buckets += len(got)
		var w []table.Bucket
		if err := json.Unmarshal(want[id], &w); err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(w)
		if !bytes.Equal(gb, wb) {
			t.Errorf("Buckets(%q):\ngot  %s\nwant %s", id, gb, wb)
		}
	}
	return buckets
}

// TestRecoverLegacyDataDir: a data directory written by the previous
// release recovers with every bucket intact (count, previous count, TAT,
// stamps), nothing deleted comes back, and the system goes on counting
// across two more restarts, its new records written after the old ones.
func TestRecoverLegacyDataDir(t *testing.T) {
	t.Parallel()
	now, want := legacyExpected(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join(legacyDataDir, "data"), dir)
	cfg := Config{Shards: 4, DataDir: dir, Clock: clocktest.New(now), SweepInterval: -1, SegmentSize: 64 << 10}
	s := startSystem(t, cfg)
	if got := checkBuckets(t, s, want); got != 505 {
		t.Fatalf("%d buckets recovered, want 505", got)
	}
	if st := s.Stats(); st.Buckets != 505 {
		t.Fatalf("Stats().Buckets = %d, want 505", st.Buckets)
	}
	// fw-30 holds 4 hits of 4 (i%9+1 = 4, counted 30%4+1 = 3 times, and
	// once more at the end): 16; the reset fw-3 starts afresh.
	hits := []struct {
		req  table.Request
		want int64
	}{
		{table.Request{ID: "fw-30", Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 4}, 20},
		{table.Request{ID: "fw-3", Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 4}, 4},
		{table.Request{ID: "sw-7", Namespace: "api", Policy: table.Policy{Algorithm: table.SlidingWindow, Scale: time.Minute, Limit: 500}, Hits: 1}, 0},
	}
	for round := range 2 {
		for i, h := range hits {
			d := mustCheck(t, s, h.req)
			if h.want != 0 && d.Count != h.want+int64(round)*h.req.Hits {
				t.Errorf("round %d: %s: count %d, want %d", round, h.req.ID, d.Count, h.want+int64(round)*h.req.Hits)
			}
			hits[i].want = d.Count
		}
		s = restart(t, s, cfg)
		for _, h := range hits {
			req := h.req
			req.Hits = 0
			if d := mustCheck(t, s, req); d.Count != h.want {
				t.Errorf("round %d, after a restart: %s: count %d, want %d", round, req.ID, d.Count, h.want)
			}
		}
	}
}

// dataDirV2 is a data directory written by the release before segment
// format 2 (record format 2, with references; segments of format 1), by
// testdata/datadir-v2/generate_test.go.txt, with what System.Buckets
// answered for every id at the time it ends.
const dataDirV2 = "testdata/datadir-v2"

// expectedAt reads dir/expected.json: the end time and every id's buckets.
func expectedAt(t *testing.T, dir string) (time.Time, map[string]json.RawMessage, int) {
	t.Helper()
	blob, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Now     time.Time
		Buckets map[string]json.RawMessage
	}
	if err := json.Unmarshal(blob, &want); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, raw := range want.Buckets {
		var bs []table.Bucket
		if err := json.Unmarshal(raw, &bs); err != nil {
			t.Fatal(err)
		}
		n += len(bs)
	}
	return want.Now, want.Buckets, n
}

// TestRecoverDataDirV2: the data directory of segment format 1 with
// references recovers with every bucket intact; the system appends to its
// last segment, rolls to new ones, and after a restart holds both: the old
// buckets and 5,000 new ones, each count exact.
func TestRecoverDataDirV2(t *testing.T) {
	t.Parallel()
	recoverOlderDataDir(t, dataDirV2, 1)
}

// dataDirV3 is a data directory written by the release before segment
// format 3 (record format 2; segments of format 2, without tails), by the
// same generator, testdata/datadir-v3/generate_test.go.txt, run on commit
// 06b7386, with what System.Buckets answered for every id at its end.
const dataDirV3 = "testdata/datadir-v3"

// TestRecoverDataDirV3: the data directory of segment format 2 recovers
// with every bucket intact; the system appends to its last segment in
// format 2 (no tails), rolls to segments of format 3, whose records carry
// tails, and after a restart holds the old buckets and the new ones, each
// count exact, repeat hits written into tails included.
func TestRecoverDataDirV3(t *testing.T) {
	t.Parallel()
	recoverOlderDataDir(t, dataDirV3, 2)
}

// recoverOlderDataDir starts a system on a copy of the data directory in
// dir (450 ids, 505 buckets, written with segments of format oldFormat),
// checks every bucket, adds 5,000 buckets (more than a 64 KiB segment per
// shard holds) and hits on an old one, restarts and checks them all, and
// that the shards rolled to segments of the current format.
func recoverOlderDataDir(t *testing.T, dir string, oldFormat byte) {
	now, want, n := expectedAt(t, dir)
	if len(want) != 450 || n != 505 {
		t.Fatalf("expected.json: %d ids, %d buckets; want 450 and 505", len(want), n)
	}
	data := t.TempDir()
	copyTree(t, filepath.Join(dir, "data"), data)
	cfg := Config{Shards: 4, DataDir: data, Clock: clocktest.New(now), SweepInterval: -1, SegmentSize: 64 << 10}
	s := startSystem(t, cfg)
	if got := checkBuckets(t, s, want); got != n {
		t.Fatalf("%d buckets recovered, want %d", got, n)
	}
	const fresh = 5000 // more than a 64 KiB segment per shard holds
	newID := func(i int) string { return fmt.Sprintf("new-%04d-%s", i, strings.Repeat("x", 40)) }
	for i := range fresh {
		if d := mustCheck(t, s, hit(newID(i), 10)); d.Count != 1 {
			t.Fatalf("new-%04d: count %d, want 1", i, d.Count)
		}
	}
	again := func(i int) bool { return i < 100 || i >= fresh-100 }
	for i := range fresh { // the first hundred (in the old segment: records) and the last (tails) again
		if !again(i) {
			continue
		}
		before := journalRecords(s)
		for range 3 {
			mustCheck(t, s, hit(newID(i), 10))
		}
		if got := journalRecords(s) - before; i >= fresh-100 && got > 1 {
			t.Fatalf("new-%04d: 3 hits appended %d records, want its tail rewritten (1 at most, after a roll)", i, got)
		}
	}
	d := mustCheck(t, s, table.Request{ID: "fw-30", Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 4})
	if d.Count != 20 {
		t.Fatalf("fw-30: count %d, want 20", d.Count)
	}
	s = restart(t, s, cfg)
	for i := range fresh {
		if got, want := peek(t, s, newID(i), 10), int64(1+3*btoi(again(i))); got != want {
			t.Fatalf("new-%04d after a restart: count %d, want %d", i, got, want)
		}
	}
	delete(want, "fw-30") // counted on since; checked below
	if got := checkBuckets(t, s, want); got != n-1 {
		t.Fatalf("%d old buckets after a restart, want %d", got, n-1)
	}
	fw := table.Request{ID: "fw-30", Policy: table.Policy{Scale: time.Hour, Limit: 1000}}
	if d := mustCheck(t, s, fw); d.Count != 20 {
		t.Fatalf("fw-30 after a restart: count %d, want 20", d.Count)
	}
	segs, _ := filepath.Glob(filepath.Join(data, "shard-*", "seg-*.log"))
	versions := map[byte]int{}
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		versions[b[8]]++
	}
	if len(segs) < 8 || versions[oldFormat] != 4 || versions[3] < 4 {
		t.Fatalf("%d segments of formats %v, want at least 2 per shard: the old one (format %d) and a roll (format 3)", len(segs), versions, oldFormat)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
