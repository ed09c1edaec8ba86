package main

// End-to-end tests of durability: the built daemon, real files, SIGKILL.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// peekCount returns the count of id's bucket, without counting a hit.
func (d *daemon) peekCount(t *testing.T, id string, scaleMs, limit int64) int64 {
	t.Helper()
	r := d.check(t, id, scaleMs, limit, 0)
	dec, ok := decodeDecision(t, r)
	if !ok {
		t.FailNow()
	}
	return dec.Count
}

// TestE2ECountsSurviveSIGKILL: 50 hits with a limit of 100 in an hour, then
// SIGKILL; the daemon started again on the same data directory counts the
// next hit as the 51st.
func TestE2ECountsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scale := stableScaleMs(time.Now())
	d := startDaemon(t, "--data-dir", dir)
	for i := range 50 {
		if r := d.check(t, "alice", scale, 100, 1); r.status != http.StatusOK {
			t.Fatalf("hit %d: got %v, want 200", i+1, r)
		}
	}
	d.kill()
	d = startDaemon(t, "--data-dir", dir)
	r := d.check(t, "alice", scale, 100, 1)
	if dec, ok := decodeDecision(t, r); !ok || r.status != http.StatusOK || dec.Count != 51 {
		t.Fatalf("first hit after SIGKILL and restart: got %v, want 200 with count 51", r)
	}
}

// killRuns is how many kill -9 cycles TestE2EKillUnderLoad runs: 20, or
// RATELIMITD_KILL_RUNS for a long run.
func killRuns(t *testing.T) int {
	if s := os.Getenv("RATELIMITD_KILL_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RATELIMITD_KILL_RUNS=%q: want a positive integer", s)
		}
		return n
	}
	return 20
}

// TestE2EKillUnderLoad: a load client hits a set of keys and records every
// acknowledged (200) hit; the daemon is SIGKILLed in the middle of the load,
// again and again, on one data directory and in one window. After every
// restart, each key's count is at least the hits acknowledged so far (no
// allowed-then-forgotten hit) and at most the hits sent (nothing invented),
// and the daemon always starts. The sync mode rotates through all three.
func TestE2EKillUnderLoad(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	scale := stableScaleMs(time.Now())
	const keys, workers, limit = 24, 4, 1 << 40
	acked := make([]int64, keys)
	sent := make([]int64, keys)
	modes := []string{"none", "interval", "always"}
	runs := killRuns(t)
	for run := range runs {
		d := startDaemon(t, "--data-dir", dir, "--journal-sync", modes[run%len(modes)])
		for k := range keys {
			if got := d.peekCount(t, fmt.Sprint("key-", k), scale, limit); got < acked[k] || got > sent[k] {
				t.Fatalf("run %d (seed %d), key-%d after restart: count %d, want between %d acknowledged and %d sent", run, seed, k, got, acked[k], sent[k])
			}
		}
		// The load: each worker sends hits to random keys until the
		// daemon dies (bounded in count), recording what was answered 200.
		var mu sync.Mutex
		var wg sync.WaitGroup
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
		for w := range workers {
			wrng := rand.New(rand.NewPCG(seed, uint64(run*workers+w+1)))
			wg.Go(func() {
				for range 20_000 {
					k := wrng.IntN(keys)
					mu.Lock()
					sent[k]++
					mu.Unlock()
					resp, err := client.Get(d.base + checkQuery(fmt.Sprint("key-", k), scale, limit, 1))
					if err != nil {
						return // the daemon is gone
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						mu.Lock()
						acked[k]++
						mu.Unlock()
					}
				}
			})
		}
		<-time.After(time.Duration(50+rng.IntN(200)) * time.Millisecond) // let the load run, then kill it mid-flight
		d.kill()
		wg.Wait()
		client.CloseIdleConnections()
	}
	d := startDaemon(t, "--data-dir", dir)
	var total int64
	for k := range keys {
		got := d.peekCount(t, fmt.Sprint("key-", k), scale, limit)
		if got < acked[k] || got > sent[k] {
			t.Fatalf("key-%d at the end: count %d, want between %d acknowledged and %d sent", k, got, acked[k], sent[k])
		}
		total += acked[k]
	}
	if total == 0 {
		t.Fatal("no hit was acknowledged in any run: the load never reached the daemon")
	}
	t.Logf("%d kill -9 cycles, %d acknowledged hits, all recovered", runs, total)
}

// TestE2ESecondDaemonOnADataDir: a second daemon on a data directory in use
// exits 1 with a message naming the directory; the first serves on.
func TestE2ESecondDaemonOnADataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, "--data-dir", dir)
	code, _, stderr := runDaemonOnce(t, "--listen", "127.0.0.1:0", "--data-dir", dir)
	if code != exitFailure || !strings.Contains(stderr, "in use") || !strings.Contains(stderr, dir) {
		t.Fatalf("second daemon: got exit %d, stderr:\n%s\nwant exit 1 saying %s is in use", code, stderr, dir)
	}
	if r := d.get(t, "/healthz"); r.status != http.StatusOK {
		t.Fatalf("first daemon after the second failed: got %v, want 200", r)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, or skips the
// test when it cannot (not root, no mount).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes zeros to path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for range 1 << 20 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v, want ENOSPC", path, err)
			}
			return
		}
	}
	t.Fatalf("filling %s: no ENOSPC after 4 GiB", path)
}

// TestE2EFullDisk: on a full disk the journal cannot roll to a new segment.
// With the default policy the shard fails closed (503 with Retry-After,
// counted), never crashing (no SIGBUS: segments are fallocated); after space
// is freed it serves again; and after SIGKILL every acknowledged hit is
// still there. With --on-journal-error open it answers from memory.
func TestE2EFullDisk(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"closed", "open"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			mnt := mountTmpfs(t, 1<<20)
			dataDir := filepath.Join(mnt, "data")
			flags := []string{"--data-dir", dataDir, "--shards", "1", "--journal-segment-size", "64KiB", "--snapshot-threshold", "1GiB", "--on-journal-error", policy}
			scale := stableScaleMs(time.Now())
			d := startDaemon(t, flags...)
			filler := filepath.Join(mnt, "filler")
			fill(t, filler)

			// Distinct ids until the segment is full and the roll fails.
			var acked []string
			refused := 0
			for i := 0; i < 20_000 && refused == 0; i++ {
				id := fmt.Sprint("flood-", i)
				r := d.check(t, id, scale, 10, 1)
				switch r.status {
				case http.StatusOK:
					acked = append(acked, id)
				case http.StatusServiceUnavailable:
					if policy == "open" {
						t.Fatalf("check %d with --on-journal-error open: got %v, want 200", i, r)
					}
					if r.header.Get("Retry-After") == "" {
						t.Fatalf("503 without Retry-After: %v", r)
					}
					refused++
				default:
					t.Fatalf("check %d on a full disk: got %v, want 200 or 503", i, r)
				}
				if policy == "open" && i > 3000 {
					break // well past one 64 KiB segment
				}
			}
			errs, _ := d.metric(t, "ratelimitd_journal_errors_total")
			failed, _ := d.metric(t, "ratelimitd_journal_failed_batches_total")
			if errs == 0 || failed == 0 || (policy == "closed" && refused == 0) {
				t.Fatalf("full disk: %d refused, journal_errors_total %v, failed_batches_total %v; want all > 0 (refusals only when closed)", refused, errs, failed)
			}
			if !strings.Contains(d.logs.String(), "no space left on device") {
				t.Errorf("the log does not say the disk is full:\n%s", d.logs)
			}

			// Space comes back: the journal takes batches again.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(pollTimeout)
			for i := 0; ; i++ {
				id := fmt.Sprint("after-", i)
				r := d.check(t, id, scale, 10, 1)
				if r.status == http.StatusOK {
					acked = append(acked, id)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after freeing space: still %v", r)
				}
			}
			errsBefore, _ := d.metric(t, "ratelimitd_journal_errors_total")
			for i := range 50 {
				id := fmt.Sprint("later-", i)
				if r := d.check(t, id, scale, 10, 1); r.status != http.StatusOK {
					t.Fatalf("check %d once space is back: got %v, want 200", i, r)
				}
				acked = append(acked, id)
			}
			if errsAfter, _ := d.metric(t, "ratelimitd_journal_errors_total"); errsAfter != errsBefore {
				t.Fatalf("journal errors went on after space came back: %v → %v", errsBefore, errsAfter)
			}

			d.kill()
			d = startDaemon(t, flags...)
			for _, id := range acked {
				if got := d.peekCount(t, id, scale, 10); got != 1 {
					t.Fatalf("%s after SIGKILL: got count %d, want 1 (acknowledged)", id, got)
				}
			}
		})
	}
}

// TestE2ETornTail: garbage after the last record of a shard's journal is a
// torn tail: the daemon starts, keeps every record before it, keeps the cut
// bytes aside as *.broken, and counts it.
func TestE2ETornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scale := stableScaleMs(time.Now())
	flags := []string{"--data-dir", dir, "--shards", "1"}
	d := startDaemon(t, flags...)
	for range 5 {
		d.check(t, "tail", scale, 10, 1)
	}
	d.stop()
	segs, _ := filepath.Glob(filepath.Join(dir, "shard-000", "seg-*.log"))
	if len(segs) != 1 {
		t.Fatalf("segments: got %v, want one", segs)
	}
	end := lastRecordEnd(t, segs[0])
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A record that was being written when the power went: a length word
	// and garbage where its checksum and payload should be.
	if _, err := f.WriteAt([]byte{64, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3}, end); err != nil {
		t.Fatal(err)
	}
	f.Close()

	d = startDaemon(t, flags...)
	if got := d.peekCount(t, "tail", scale, 10); got != 5 {
		t.Fatalf("count after a torn tail: got %d, want 5", got)
	}
	if v, _ := d.metric(t, "ratelimitd_journal_torn_tails_total"); v != 1 {
		t.Fatalf("ratelimitd_journal_torn_tails_total: got %v, want 1", v)
	}
	if broken, _ := filepath.Glob(filepath.Join(dir, "shard-000", "*.broken*")); len(broken) != 1 {
		t.Fatalf("*.broken files: got %v, want one", broken)
	}
}

// segmentHeaderSize is the size of a segment's header (table/journal/doc.go).
const segmentHeaderSize = 40

// lastRecordEnd returns the offset just past the last record of a segment,
// walking the frames of the format in table/journal/doc.go.
func lastRecordEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(segmentHeaderSize)
	for off+4 <= int64(len(b)) {
		next := nextFrame(b, off)
		if next == 0 {
			return off
		}
		off = next
	}
	t.Fatalf("%s: no end of records", path)
	return 0
}

// nextFrame returns the offset of the frame after the one at off in segment
// b, of the format its header names (table/journal/doc.go), or 0 at the end
// of data.
func nextFrame(b []byte, off int64) int64 {
	if b[8] == 2 { // a uvarint of the payload length + 1, a 2-byte tag, a 4-byte checksum
		l, k := binary.Uvarint(b[off:])
		if l == 0 || k <= 0 {
			return 0
		}
		return off + int64(k) + 6 + int64(l) - 1
	}
	if b[8] == 3 { // the same but for the length's low bit: a tail after the payload
		l, k := binary.Uvarint(b[off:])
		if l < 2 || k <= 0 {
			return 0
		}
		end := off + int64(k) + 6 + int64(l>>1) - 1
		if l&1 == 0 {
			return end
		}
		words := int64(b[off+int64(k)+6]) // before the payload
		return (end+1+31)&^31 + 8*words   // the tail at the next multiple of 32
	}
	n := int64(b[off]) | int64(b[off+1])<<8 | int64(b[off+2])<<16 | int64(b[off+3])<<24
	if n == 0 {
		return 0
	}
	return off + (n+7)&^7
}

// TestE2EDamageInTheMiddle: a flipped byte in an earlier segment refuses the
// start with a message naming the file and the offset and --journal-repair;
// with --journal-repair the daemon starts with the valid prefix.
func TestE2EDamageInTheMiddle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scale := stableScaleMs(time.Now())
	flags := []string{"--data-dir", dir, "--shards", "1", "--journal-segment-size", "64KiB", "--snapshot-threshold", "1GiB"}
	d := startDaemon(t, flags...)
	for i := 0; ; i++ {
		d.check(t, fmt.Sprint("id-", i), scale, 10, 1)
		if segs, _ := filepath.Glob(filepath.Join(dir, "shard-000", "seg-*.log")); len(segs) >= 2 {
			break
		}
		if i > 10_000 {
			t.Fatal("no second segment after 10,000 records")
		}
	}
	d.stop()
	segs, _ := filepath.Glob(filepath.Join(dir, "shard-000", "seg-*.log"))
	first := segs[0]
	f, err := os.OpenFile(first, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The tag of the first record from offset 1000 on (not a byte of a
	// record's tail, which no checksum covers: its owner checks it).
	i, _ := slices.BinarySearch(recordOffsets(t, first), 1000)
	at := recordOffsets(t, first)[i] + 1
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	code, _, stderr := runDaemonOnce(t, append([]string{"--listen", "127.0.0.1:0"}, flags...)...)
	const hint = "start with --journal-repair to cut the journal there, keeping the valid prefix and moving the rest aside to *.broken files"
	if code != exitFailure || !strings.Contains(stderr, filepath.Base(first)) || !strings.Contains(stderr, hint) {
		t.Fatalf("start on a journal damaged in the middle: exit %d, stderr:\n%s\nwant exit 1 naming %s and saying %q", code, stderr, filepath.Base(first), hint)
	}
	d = startDaemon(t, append(flags, "--journal-repair")...)
	if got := d.peekCount(t, "id-0", scale, 10); got != 1 {
		t.Fatalf("id-0 (before the damage) after repair: got count %d, want 1", got)
	}
	if broken, _ := filepath.Glob(filepath.Join(dir, "shard-000", "*.broken*")); len(broken) == 0 {
		t.Fatal("repair left no *.broken file")
	}
}
