package journal

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// umask returns the process's umask, read from /proc (setting it to read it
// would race with the tests running in parallel), or skips the test.
func umask(t *testing.T) fs.FileMode {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status to read the umask from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatalf("Umask line %q: %v", sc.Text(), err)
			}
			return fs.FileMode(m)
		}
	}
	t.Skip("no Umask line in /proc/self/status")
	return 0
}

// checkMode fails unless path's permission bits are want.
func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s: mode %#o, want %#o", filepath.Base(path), got, want)
	}
}

// TestFilesArePrivate: a journal holds its clients' ids, so everything it
// makes is for its owner alone: the directories it creates are 0700 and
// its files (segments and their temporary files, snapshots, evidence, the
// lock file, WriteFileAtomic's) 0600, before the umask.
func TestFilesArePrivate(t *testing.T) {
	t.Parallel()
	mask := umask(t)
	dir, file := 0o700&^mask, 0o600&^mask
	root := filepath.Join(t.TempDir(), "data")
	lock, err := LockDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	checkMode(t, root, dir)
	checkMode(t, filepath.Join(root, lockFileName), file)
	if err := WriteFileAtomic(root, "META", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	checkMode(t, filepath.Join(root, "META"), file)

	jdir := filepath.Join(root, "shard-000", "journal")
	opts := testOptions(SyncAlways)
	var tmpModes []fs.FileMode
	opts.hooks = &testHooks{fallocate: func(f *os.File, size int64) error {
		if st, err := f.Stat(); err == nil {
			tmpModes = append(tmpModes, st.Mode().Perm())
		}
		return allocate(f, size)
	}}
	j, _, _ := mustOpen(t, jdir, opts)
	checkMode(t, filepath.Dir(jdir), dir)
	checkMode(t, jdir, dir)
	appendAll(t, j, testPayloads(1, 10))
	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, testPayloads(11, 3))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(tmpModes) != 2 || tmpModes[0] != file || tmpModes[1] != file {
		t.Errorf("segments being made: modes %#o, want two of %#o", tmpModes, file)
	}
	for _, pattern := range []string{"seg-*.log", "snap-*.snap"} {
		ms, _ := filepath.Glob(filepath.Join(jdir, pattern))
		if len(ms) != 1 {
			t.Fatalf("%s: %v, want one file", pattern, ms)
		}
		checkMode(t, ms[0], file)
	}
	// Evidence of a torn tail.
	seg, _ := filepath.Glob(filepath.Join(jdir, "seg-*.log"))
	b, err := os.ReadFile(seg[0])
	if err != nil {
		t.Fatal(err)
	}
	b[dataEnd(b, 0)+3] = 0xee
	if err := os.WriteFile(seg[0], b, 0); err != nil {
		t.Fatal(err)
	}
	_, _, rec := mustOpen(t, jdir, opts)
	if rec.TornTails != 1 {
		t.Fatalf("Recovery %+v: want a torn tail", rec)
	}
	checkMode(t, seg[0]+brokenSuffix, file)
}

// TestWideModesAreTightened: a data directory made with wider modes (by an
// older version, or by hand) loses its group and other permissions when it
// is locked or opened, and so do the lock file and the segments and
// snapshot a successful Open keeps; other files are left alone (the
// directory keeps other users out).
func TestWideModesAreTightened(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	jdir := filepath.Join(root, "shard-000")
	writeJournal(t, jdir, testOptions(SyncNone), testPayloads(1, 5))
	j, _, _ := mustOpen(t, jdir, testOptions(SyncNone))
	w, err := j.StartSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range testPayloads(1, 5) {
		if err := w.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, testPayloads(6, 2))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jdir, "notes.txt"), []byte("foreign"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, lockFileName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(jdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Chmod(filepath.Join(jdir, e.Name()), 0o664); err != nil {
			t.Fatal(err)
		}
	}
	for path, mode := range map[string]fs.FileMode{root: 0o775, jdir: 0o755, filepath.Join(root, lockFileName): 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}

	lock, err := LockDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	checkMode(t, root, 0o700)
	checkMode(t, filepath.Join(root, lockFileName), 0o600)
	checkMode(t, jdir, 0o755) // Open's to tighten

	_, got, _ := mustOpen(t, jdir, testOptions(SyncNone))
	checkRecords(t, got, testPayloads(1, 7))
	checkMode(t, jdir, 0o700)
	for _, e := range ents {
		want := fs.FileMode(0o600)
		if e.Name() == "notes.txt" {
			want = 0o664
		}
		checkMode(t, filepath.Join(jdir, e.Name()), want)
	}
}
