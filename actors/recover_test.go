package actors

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// recoveryShards and recoveryBuckets size the data directories of the
// recovery tests: more shards than this machine has procs, so that
// recoverAll runs them in parallel and in turn.
const (
	recoveryShards  = 8
	recoveryBuckets = 20_000
)

// recoveryDir writes a data directory of recoveryBuckets buckets in
// recoveryShards shards at now (see writeRecoveryData) and returns it with
// the count each id must have.
func recoveryDir(t *testing.T, now time.Time) (string, map[string]int64) {
	t.Helper()
	dir := t.TempDir()
	ids := writeRecoveryData(t, dir, recoveryShards, recoveryBuckets, 1<<20, now)
	want := make(map[string]int64, recoveryBuckets)
	for _, shard := range ids {
		for k, id := range shard {
			want[id] = 1
			if k < len(shard)/10 {
				want[id] = 2 // hit again in the segment after the snapshot
			}
		}
	}
	return dir, want
}

// checkCounts peeks at every id of want and compares its count.
func checkCounts(t *testing.T, s *System, want map[string]int64) {
	t.Helper()
	bad := 0
	for id, n := range want {
		d, err := s.Check(context.Background(), table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 100}})
		if err != nil {
			t.Fatalf("peek %s: %v", id, err)
		}
		if d.Count != n {
			if bad++; bad <= 5 {
				t.Errorf("%s: count %d, want %d", id, d.Count, n)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d ids recovered with a wrong count", bad, len(want))
	}
}

// newestSegment returns the path of the newest segment file of shard i.
func newestSegment(t *testing.T, dir string, i int) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(shardDir(dir, i), "seg-*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("shard %d: no segment file (%v)", i, err)
	}
	return segs[len(segs)-1] // the names sort by sequence number
}

// dataLen returns the offset after the last nonzero byte of b.
func dataLen(b []byte) int {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}

// TestParallelRecoveryKeepsEveryCount: a data directory of 8 shards, each
// a snapshot and a segment of later hits, recovers with every bucket and
// every count (1, or 2 for the ids hit again after the snapshot), and
// recovering it again gives the same.
func TestParallelRecoveryKeepsEveryCount(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC)
	dir, want := recoveryDir(t, now)
	cfg := Config{DataDir: dir, Shards: recoveryShards, SweepInterval: -1, Clock: clocktest.New(now)}
	for round := range 2 {
		s := startSystem(t, cfg)
		if st := s.Stats(); st.Buckets != recoveryBuckets || st.TornTails != 0 {
			t.Fatalf("round %d: %d buckets, %d torn tails; want %d and 0", round, st.Buckets, st.TornTails, recoveryBuckets)
		}
		checkCounts(t, s, want)
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestParallelRecoveryOfDamagedSegments: in an 8-shard data directory,
// bytes after the last record of one shard's segment are a torn tail: cut,
// kept aside byte for byte in a .broken file, with every count intact; a
// damaged record with valid records after it refuses the start with a
// CorruptError naming the segment and the record's offset.
func TestParallelRecoveryOfDamagedSegments(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC)
	t.Run("torn tail", func(t *testing.T) {
		t.Parallel()
		dir, want := recoveryDir(t, now)
		seg := newestSegment(t, dir, 3)
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		last := dataLen(b)
		end := (last + 7) &^ 7                 // the frames of this segment are 8-byte aligned
		torn := bytes.Repeat([]byte{0xa5}, 24) // a frame whose writer was cut off
		copy(b[end:], torn)
		if err := os.WriteFile(seg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := startSystem(t, Config{DataDir: dir, Shards: recoveryShards, SweepInterval: -1, Clock: clocktest.New(now)})
		if st := s.Stats(); st.Buckets != recoveryBuckets || st.TornTails != 1 {
			t.Fatalf("%d buckets, %d torn tails; want %d and 1", st.Buckets, st.TornTails, recoveryBuckets)
		}
		evidence, err := os.ReadFile(seg + ".broken")
		if err != nil || !bytes.Equal(evidence, torn) {
			t.Fatalf("%s.broken: %x, %v; want %x", seg, evidence, err, torn)
		}
		cut, err := os.ReadFile(seg)
		if err != nil || len(cut) != len(b) || dataLen(cut) != last {
			t.Fatalf("segment after the cut: %d bytes, data to %d (%v); want %d and %d", len(cut), dataLen(cut), err, len(b), last)
		}
		checkCounts(t, s, want)
	})
	t.Run("mid-journal damage", func(t *testing.T) {
		t.Parallel()
		dir, _ := recoveryDir(t, now)
		// Two more records after the segment's first, so that valid
		// records follow the damage.
		j, _, err := journal.Open(shardDir(dir, 5), journal.Options{Sync: journal.SyncNone, SegmentSize: 1 << 20}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tb := table.New(table.Config{TrackChanges: true})
		for _, id := range []string{"late-1", "late-2"} {
			tb.Apply(hit(id, 100), now)
			if err := tb.Changes(j.Append); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		seg := newestSegment(t, dir, 5)
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		const first = 40 // the first record, after the segment header
		b[first+8] ^= 0x01
		if err := os.WriteFile(seg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = Start(context.Background(), Config{DataDir: dir, Shards: recoveryShards, SweepInterval: -1, Clock: clocktest.New(now)})
		var ce *journal.CorruptError
		if !errors.Is(err, journal.ErrCorrupt) || !errors.As(err, &ce) || ce.Path != seg || ce.Offset != first {
			t.Fatalf("Start: %v; want a CorruptError at %s offset %d", err, seg, first)
		}
		if _, err := os.Stat(seg + ".broken"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused start left %s.broken (%v)", seg, err)
		}
	})
}
