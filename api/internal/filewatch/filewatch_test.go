package filewatch

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitTimeout bounds every wait for a change; no test sleeps.
const waitTimeout = 10 * time.Second

// start watches path with a short debounce; each onChange is a value on the channel.
func start(t *testing.T, path string) (*Watcher, <-chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 64)
	w, err := New(path, 10*time.Millisecond, func() { changed <- struct{}{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	w.Start()
	return w, changed
}

// waitChange waits for one onChange, failing t after waitTimeout.
func waitChange(t *testing.T, changed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(waitTimeout):
		t.Fatalf("%s: no change seen within %v", what, waitTimeout)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDirectoryEvents: a watched directory counts every event in it: a
// new file, a rename into place, a removal, and a ConfigMap's "..data"
// symlink swap.
func TestDirectoryEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, changed := start(t, dir)
	if !w.isDir || w.dir != dir {
		t.Fatalf("watching %s: isDir %v, dir %s; want the directory itself", dir, w.isDir, w.dir)
	}
	write(t, filepath.Join(dir, "a.yaml"), "a")
	waitChange(t, changed, "a new file")
	write(t, filepath.Join(dir, ".b.tmp"), "b")
	if err := os.Rename(filepath.Join(dir, ".b.tmp"), filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a rename into place")
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "a removal")

	// A ConfigMap volume: c.yaml -> ..data/c.yaml, ..data -> ..v1, swapped
	// to ..v2 by renaming a new link over it.
	for _, v := range []string{"..v1", "..v2"} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, v, "c.yaml"), v)
	}
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "c.yaml"), filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "the ConfigMap's links")
	for len(changed) > 0 {
		<-changed
	}
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "the ..data swap")
	if b, err := os.ReadFile(filepath.Join(dir, "c.yaml")); err != nil || string(b) != "..v2" {
		t.Errorf("c.yaml after the swap = %q, %v; want ..v2", b, err)
	}
}

// TestFileRelevantNames: for a file, only its own name and the links on
// its way count, and Refresh follows a new link.
func TestFileRelevantNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "..v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "..v1", "rules.yaml"), "x")
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.Symlink(filepath.Join("..data", "rules.yaml"), path); err != nil {
		t.Fatal(err)
	}
	w, err := New(path, time.Hour, func() {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for name, want := range map[string]bool{
		path:                                     true,
		filepath.Join(dir, "..data"):             true,
		filepath.Join(dir, "..v1"):               false, // behind ..data: its swap is the event
		filepath.Join(dir, "other.yaml"):         false,
		filepath.Join(dir, "..data_tmp"):         false,
		filepath.Join(dir, "sub", "x"):           false,
		filepath.Join(t.TempDir(), "rules.yaml"): false,
	} {
		if got := w.relevant(name); got != want {
			t.Errorf("relevant(%s) = %v, want %v", name, got, want)
		}
	}
}

// TestDoAndClose: Do runs one f at a time until Close; Close without
// Start returns, closes Done, and is idempotent.
func TestDoAndClose(t *testing.T) {
	t.Parallel()
	w, err := New(t.TempDir(), time.Hour, func() {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	if !w.Do(func(<-chan struct{}) { ran++ }) || ran != 1 {
		t.Fatalf("Do before Close: ran %d, want 1", ran)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if w.Do(func(<-chan struct{}) { ran++ }) || ran != 1 {
		t.Errorf("Do after Close ran f (%d runs), want none", ran)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := New(filepath.Join(t.TempDir(), "missing", "f.yaml"), time.Hour, func() {}, nil); err == nil {
		t.Error("New in a missing directory succeeded, want an error")
	}
}

// TestSettle: reads until two agree; gives up after maxReads, on stop, or
// on a read error.
func TestSettle(t *testing.T) {
	t.Parallel()
	reads := func(seq ...string) func() ([]byte, error) {
		i := 0
		return func() ([]byte, error) {
			if i >= len(seq) {
				return nil, os.ErrNotExist
			}
			i++
			return []byte(seq[i-1]), nil
		}
	}
	var waits int
	sleep := func(<-chan struct{}, time.Duration) bool { waits++; return true }
	stop := make(chan struct{})
	got, err := Settle(stop, sleep, time.Millisecond, 10, []byte("a"), reads("ab", "abc", "abc"))
	if err != nil || string(got) != "abc" || waits != 3 {
		t.Errorf("Settle = %q, %v after %d waits; want abc after 3", got, err, waits)
	}
	waits = 0
	if _, err := Settle(stop, sleep, time.Millisecond, 3, []byte("a"), reads("b", "c", "c")); !errors.Is(err, ErrUnsettled) || waits != 2 {
		t.Errorf("Settle of 3 differing reads = %v after %d waits, want ErrUnsettled after 2", err, waits)
	}
	if _, err := Settle(stop, sleep, time.Millisecond, 3, []byte("a"), reads()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Settle with a failing read = %v, want its error", err)
	}
	close(stop)
	if _, err := Settle(stop, Sleep, time.Hour, 3, []byte("a"), reads("a")); !errors.Is(err, ErrStopped) {
		t.Errorf("Settle after stop = %v, want ErrStopped", err)
	}
}
