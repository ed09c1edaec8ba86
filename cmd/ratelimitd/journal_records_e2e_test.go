//go:build unix

package main

// End-to-end tests of the journal's record sizes and damage rules: the
// built daemon, real files, SIGKILL.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EBigBatchSmallSegments: with the smallest segments and one shard, a
// POST batch of 300 checks with 400-byte ids (over 64 KiB of changes) is
// journaled and answered 200, later checks too, and after SIGKILL and a
// restart every count is there.
func TestE2EBigBatchSmallSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scale := stableScaleMs(time.Now())
	flags := []string{"--data-dir", dir, "--shards", "1", "--journal-segment-size", "64KiB"}
	d := startDaemon(t, flags...)
	ids := make([]string, 300)
	checks := make([]string, len(ids))
	for i := range ids {
		p := fmt.Sprintf("big-%03d-", i)
		ids[i] = p + strings.Repeat("x", 400-len(p))
		checks[i] = fmt.Sprintf(`{"id":%q,"scale":%d,"limit":10}`, ids[i], scale)
	}
	body := "[" + strings.Join(checks, ",") + "]"
	for round := range 2 {
		r, ok := d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(body))
		if !ok || r.status != http.StatusOK {
			t.Fatalf("POST batch %d of %d checks with 400-byte ids: got %v, want 200", round+1, len(ids), r)
		}
	}
	for i := range 20 {
		if r := d.check(t, fmt.Sprint("later-", i), scale, 10, 1); r.status != http.StatusOK {
			t.Fatalf("check %d after the batches: got %v, want 200", i, r)
		}
	}
	if v, _ := d.metric(t, "ratelimitd_journal_errors_total"); v != 0 {
		t.Fatalf("ratelimitd_journal_errors_total: %v, want 0", v)
	}
	d.kill()
	d = startDaemon(t, flags...)
	for _, id := range ids {
		if got := d.peekCount(t, id, scale, 10); got != 2 {
			t.Fatalf("%.12s... after SIGKILL: count %d, want 2", id, got)
		}
	}
	for i := range 20 {
		if got := d.peekCount(t, fmt.Sprint("later-", i), scale, 10); got != 1 {
			t.Fatalf("later-%d after SIGKILL: count %d, want 1", i, got)
		}
	}
}

// recordOffsets returns the offsets of the records of a segment, walking
// the frames of the format in table/journal/doc.go.
func recordOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for off := int64(segmentHeaderSize); off+4 <= int64(len(b)); {
		next := nextFrame(b, off)
		if next == 0 {
			return offs
		}
		offs = append(offs, off)
		off = next
	}
	t.Fatalf("%s: no end of records", path)
	return nil
}

// TestE2EFlippedByteInTheNewestSegment: a byte flipped in a record of the
// only segment, with acknowledged records after it, is not a torn tail: the
// daemon refuses to start, naming the file and the offset; with
// --journal-repair it starts with the records before the damage.
func TestE2EFlippedByteInTheNewestSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scale := stableScaleMs(time.Now())
	flags := []string{"--data-dir", dir, "--shards", "1"}
	d := startDaemon(t, flags...)
	for i := range 6 {
		if r := d.check(t, fmt.Sprint("flip-", i), scale, 10, 1); r.status != http.StatusOK {
			t.Fatalf("check %d: got %v, want 200", i, r)
		}
	}
	d.stop()
	segs, _ := filepath.Glob(filepath.Join(dir, "shard-000", "seg-*.log"))
	if len(segs) != 1 {
		t.Fatalf("segments: got %v, want one", segs)
	}
	offs := recordOffsets(t, segs[0])
	if len(offs) != 6 {
		t.Fatalf("%d records, want 6 (one per check)", len(offs))
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := offs[2] + 16 + 3 // in the payload of the third record
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	code, _, stderr := runDaemonOnce(t, append([]string{"--listen", "127.0.0.1:0"}, flags...)...)
	if code != exitFailure || !strings.Contains(stderr, filepath.Base(segs[0])) || !strings.Contains(stderr, fmt.Sprint("offset ", offs[2])) {
		t.Fatalf("start on a flipped byte before valid records: exit %d, stderr:\n%s\nwant exit 1 naming %s at offset %d", code, stderr, filepath.Base(segs[0]), offs[2])
	}
	d = startDaemon(t, append(flags, "--journal-repair")...)
	for i := range 6 {
		want := int64(0)
		if i < 2 {
			want = 1
		}
		if got := d.peekCount(t, fmt.Sprint("flip-", i), scale, 10); got != want {
			t.Fatalf("flip-%d after the repair: count %d, want %d", i, got, want)
		}
	}
	if broken, _ := filepath.Glob(filepath.Join(dir, "shard-000", "*.broken*")); len(broken) != 1 {
		t.Fatalf("*.broken files: got %v, want one", broken)
	}
}

// TestE2ERepeatHitsSurviveSIGKILL: repeat hits of live buckets, which the
// daemon writes into their journal records' tails in place (no record
// each), survive SIGKILL in the default sync mode and with none: after a
// restart every count is exact, and so after a second SIGKILL with more
// hits written into the new run's tails; the journal grew by a put and a
// count per bucket, not by a record per hit.
func TestE2ERepeatHitsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	inBothSyncModes(t, func(t *testing.T, dir string, scale int64, flags []string) {
		d := startDaemon(t, flags...)
		ids := []string{"hot-a", "hot-b", "hot-c", "hot-d"}
		for round := range 40 {
			for _, id := range ids {
				if r := d.check(t, id, scale, 1000, 1); r.status != http.StatusOK {
					t.Fatalf("round %d, %s: got %v, want 200", round, id, r)
				}
			}
		}
		if records, _ := recordsOnDisk(t, dir); records != 2*len(ids) {
			t.Fatalf("%d records for %d buckets hit 40 times each, want %d (a put and a count with a tail each)", records, len(ids), 2*len(ids))
		}
		d = killAndCount(t, d, flags, ids, scale, 40)
		for range 25 {
			for _, id := range ids {
				d.check(t, id, scale, 1000, 1)
			}
		}
		killAndCount(t, d, flags, ids, scale, 65)
	})
}

// TestE2EBatchedHitsSurviveSIGKILL: the built daemon, hit by HTTP batches
// (POST /check_rate with a JSON array, decided as one unit) of the same 4
// buckets 40 times, journals their puts (a record per shard touched) and
// then one count with a tail per bucket, nothing more: every later batch
// rewrites the tails. After SIGKILL every count is exact, and again after
// 25 more batches and a second SIGKILL.
func TestE2EBatchedHitsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	inBothSyncModes(t, func(t *testing.T, dir string, scale int64, flags []string) {
		d := startDaemon(t, flags...)
		ids := []string{"batch-a", "batch-b", "batch-c", "batch-d"}
		var items []string
		for _, id := range ids {
			items = append(items, fmt.Sprintf(`{"id":%q,"scale":%d,"limit":1000}`, id, scale))
		}
		batch := "[" + strings.Join(items, ",") + "]"
		send := func(n int) {
			t.Helper()
			for round := range n {
				if r, _ := d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(batch)); r.status != http.StatusOK {
					t.Fatalf("batch %d: got %v, want 200", round, r)
				}
			}
		}
		send(40)
		if records, shards := recordsOnDisk(t, dir); records != shards+len(ids) {
			t.Fatalf("%d records for %d buckets hit in 40 batches, want %d (the puts, a record per shard, and a count with a tail per bucket)", records, len(ids), shards+len(ids))
		}
		d = killAndCount(t, d, flags, ids, scale, 40)
		send(25)
		killAndCount(t, d, flags, ids, scale, 65)
	})
}

// inBothSyncModes runs fn in a parallel subtest for the default sync mode
// (interval) and for none, each with its data directory, a window that
// does not end in the next minute, and the daemon's flags for both.
func inBothSyncModes(t *testing.T, fn func(t *testing.T, dir string, scale int64, flags []string)) {
	for _, sync := range []string{"interval", "none"} {
		t.Run(sync, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fn(t, dir, stableScaleMs(time.Now()), []string{"--data-dir", dir, "--shards", "2", "--journal-sync", sync})
		})
	}
}

// recordsOnDisk counts the records in the journal segments under dir, and
// the shards whose segments hold any.
func recordsOnDisk(t *testing.T, dir string) (records, shards int) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "shard-*", "seg-*.log"))
	seen := map[string]bool{}
	for _, seg := range segs {
		if n := len(recordOffsets(t, seg)); n > 0 {
			seen[filepath.Dir(seg)] = true
			records += n
		}
	}
	return records, len(seen)
}

// killAndCount SIGKILLs d, starts the daemon again with flags and checks
// that each of ids (limit 1000) has count want; it returns the new daemon.
func killAndCount(t *testing.T, d *daemon, flags, ids []string, scale, want int64) *daemon {
	t.Helper()
	d.kill()
	d = startDaemon(t, flags...)
	for _, id := range ids {
		if got := d.peekCount(t, id, scale, 1000); got != want {
			t.Fatalf("%s after SIGKILL: count %d, want %d", id, got, want)
		}
	}
	return d
}
