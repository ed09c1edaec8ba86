package journal

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFullDisk fills a 1 MiB tmpfs: the roll that does not fit fails with
// ENOSPC (never SIGBUS), the journal stays usable and reopenable with every
// record accepted, and appends work again once space is freed.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a small tmpfs to fill needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot mount a 1 MiB tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 128<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(SyncAlways)
	j, _, _ := mustOpen(t, dir, opts)
	var accepted [][]byte
	var full error
	var failed []byte // the payload that needed a new segment
	for i := 1; full == nil && i < 100000; i++ {
		p := testPayload(i)
		if err := j.Append(p); err != nil {
			full, failed = err, p
			break
		}
		accepted = append(accepted, p)
		if i%10 == 0 {
			if err := j.Commit(); err != nil {
				t.Fatalf("Commit: %v", err)
			}
		}
	}
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("filling the disk: got %v, want ENOSPC", full)
	}
	t.Logf("disk full after %d records: %v", len(accepted), full)
	if err := j.Append(failed); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk: got %v, want ENOSPC again", err)
	}
	if err := j.Commit(); err != nil {
		t.Fatalf("Commit after ENOSPC: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	j, got, _ := mustOpen(t, dir, opts)
	checkRecords(t, got, accepted)
	if err := j.Append(failed); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append after reopening a full disk: got %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(failed); err != nil {
		t.Fatalf("Append after freeing space: %v", err)
	}
	if err := j.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, _ = mustOpen(t, dir, opts)
	checkRecords(t, got, append(accepted, failed))
}
