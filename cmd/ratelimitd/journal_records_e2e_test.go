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
	for _, sync := range []string{"interval", "none"} {
		t.Run(sync, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			scale := stableScaleMs(time.Now())
			flags := []string{"--data-dir", dir, "--shards", "2", "--journal-sync", sync}
			d := startDaemon(t, flags...)
			ids := []string{"hot-a", "hot-b", "hot-c", "hot-d"}
			for round := range 40 {
				for _, id := range ids {
					if r := d.check(t, id, scale, 1000, 1); r.status != http.StatusOK {
						t.Fatalf("round %d, %s: got %v, want 200", round, id, r)
					}
				}
			}
			records := 0
			segs, _ := filepath.Glob(filepath.Join(dir, "shard-*", "seg-*.log"))
			for _, seg := range segs {
				records += len(recordOffsets(t, seg))
			}
			if records != 2*len(ids) {
				t.Fatalf("%d records for %d buckets hit 40 times each, want %d (a put and a count with a tail each)", records, len(ids), 2*len(ids))
			}
			d.kill()
			d = startDaemon(t, flags...)
			for _, id := range ids {
				if got := d.peekCount(t, id, scale, 1000); got != 40 {
					t.Fatalf("%s after SIGKILL: count %d, want 40", id, got)
				}
			}
			for range 25 {
				for _, id := range ids {
					d.check(t, id, scale, 1000, 1)
				}
			}
			d.kill()
			d = startDaemon(t, flags...)
			for _, id := range ids {
				if got := d.peekCount(t, id, scale, 1000); got != 65 {
					t.Fatalf("%s after a second SIGKILL: count %d, want 65", id, got)
				}
			}
		})
	}
}
