package rules

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// waitTimeout bounds every wait for a reload; no test sleeps.
const waitTimeout = 10 * time.Second

// results collects what a Watcher reports.
type results struct {
	mu     sync.Mutex
	all    []ReloadResult
	signal chan struct{} // receives a value, without blocking, after each result
}

func newResults() *results { return &results{signal: make(chan struct{}, 1)} }

// add is the onResult callback.
func (rs *results) add(r ReloadResult) {
	rs.mu.Lock()
	rs.all = append(rs.all, r)
	rs.mu.Unlock()
	select {
	case rs.signal <- struct{}{}:
	default:
	}
}

// waitFor returns the first result reported after the first `from` results
// that satisfies ok, waiting at most waitTimeout for it.
func (rs *results) waitFor(t *testing.T, from int, what string, ok func(ReloadResult) bool) ReloadResult {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		rs.mu.Lock()
		for _, r := range rs.all[min(from, len(rs.all)):] {
			if ok(r) {
				rs.mu.Unlock()
				return r
			}
		}
		rs.mu.Unlock()
		select {
		case <-rs.signal:
		case <-deadline.C:
			rs.mu.Lock()
			defer rs.mu.Unlock()
			t.Fatalf("no result %s within %v; got %+v", what, waitTimeout, rs.all)
		}
	}
}

// count returns the number of results so far.
func (rs *results) count() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.all)
}

const (
	fileV1 = "rules:\n  - {name: a, scale: 1s, limit: 1, match: {prefix: /a}}\n"
	fileV2 = "rules:\n  - {name: a, scale: 1s, limit: 2, match: {prefix: /a}}\n  - {name: b, scale: 1m, limit: 5}\n"
	fileV3 = "rules:\n  - {name: c, scale: 1s, limit: 3}\n"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startWatcher writes fileV1 to a new directory, builds a Store from it and
// watches it.
func startWatcher(t *testing.T) (string, *Store, *Watcher, *results) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fileV1)
	rules, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := mustStore(t, rules...)
	rs := newResults()
	w, err := NewWatcher(path, st, rs.add, nil)
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return path, st, w, rs
}

func limitOf(st *Store, name string) int64 {
	r, ok := st.Current().Get(name)
	if !ok {
		return -1
	}
	return r.Limit
}

func TestWatcherStart(t *testing.T) {
	t.Parallel()
	_, st, _, rs := startWatcher(t)
	got := rs.waitFor(t, 0, "from start", func(r ReloadResult) bool { return r.Trigger == TriggerStart })
	// The Store already holds the file's rules: nothing changes.
	if got.Err != nil || got.Changed || got.Version != 1 || got.Rules != 1 || st.Current().Version() != 1 {
		t.Errorf("got %+v, version %d; want no change at version 1 with 1 rule", got, st.Current().Version())
	}
}

func TestWatcherFileChanges(t *testing.T) {
	t.Parallel()
	path, st, _, rs := startWatcher(t)

	// A change is applied.
	n := rs.count()
	writeFile(t, path, fileV2)
	got := rs.waitFor(t, n, "applying v2", func(r ReloadResult) bool { return r.Changed })
	if got.Trigger != TriggerFile || got.Err != nil || got.Version != 2 || got.Rules != 2 {
		t.Errorf("got %+v, want a file reload to version 2 with 2 rules", got)
	}
	if limitOf(st, "a") != 2 || limitOf(st, "b") != 5 {
		t.Errorf("got rules %+v, want those of v2", st.Current().Rules())
	}
	if r, ok := st.Match("GET", "h", "/a/x"); !ok || r.Limit != 2 {
		t.Errorf("Match after reload = %+v, %v; want a with limit 2", r, ok)
	}

	// A broken file is reported and the Store keeps its rules.
	n = rs.count()
	writeFile(t, path, "rules:\n  - {name: a, scale: 1s, limit: -1}\n")
	got = rs.waitFor(t, n, "with an error", func(r ReloadResult) bool { return r.Err != nil })
	if !errors.Is(got.Err, ErrInvalid) || got.Changed || got.Version != 2 || got.Trigger != TriggerFile {
		t.Errorf("got %+v, want an ErrInvalid at version 2", got)
	}
	var e *Error
	if !errors.As(got.Err, &e) || e.Field != "limit" || e.Line != 2 {
		t.Errorf("got %v, want an *Error about limit on line 2", got.Err)
	}
	if st.Current().Version() != 2 || limitOf(st, "a") != 2 {
		t.Errorf("got version %d rules %+v, want v2 kept", st.Current().Version(), st.Current().Rules())
	}

	// Replacing the file by rename, as editors do, is seen.
	n = rs.count()
	tmp := filepath.Join(filepath.Dir(path), ".rules.yaml.tmp")
	writeFile(t, tmp, fileV3)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	got = rs.waitFor(t, n, "applying v3 after a rename", func(r ReloadResult) bool { return r.Changed })
	if got.Err != nil || got.Version != 3 || limitOf(st, "c") != 3 || limitOf(st, "a") != -1 {
		t.Errorf("got %+v and rules %+v, want v3 at version 3", got, st.Current().Rules())
	}
	if _, ok := st.Match("GET", "h", "/a/x"); ok {
		t.Error("Match(/a/x) found a rule after a was removed from the file")
	}

	// Writing the same bytes again changes nothing.
	n = rs.count()
	writeFile(t, path, fileV3)
	got = rs.waitFor(t, n, "after rewriting the same bytes", func(r ReloadResult) bool { return r.Trigger == TriggerFile })
	if got.Err != nil || got.Changed || got.Version != 3 {
		t.Errorf("got %+v, want no change at version 3", got)
	}

	// Other files in the directory are ignored; the file's deletion is
	// reported and keeps the rules.
	n = rs.count()
	writeFile(t, filepath.Join(filepath.Dir(path), "unrelated.txt"), "x")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	got = rs.waitFor(t, n, "after deleting the file", func(r ReloadResult) bool { return r.Err != nil })
	if !errors.Is(got.Err, os.ErrNotExist) || st.Current().Version() != 3 {
		t.Errorf("got %+v at version %d, want ErrNotExist and version 3 kept", got, st.Current().Version())
	}
}

func TestWatcherReload(t *testing.T) {
	t.Parallel()
	path, st, w, rs := startWatcher(t)

	// Unchanged bytes keep the version.
	got := w.Reload(TriggerSignal)
	if got.Err != nil || got.Changed || got.Version != 1 || got.Trigger != TriggerSignal {
		t.Errorf("got %+v, want no change at version 1", got)
	}

	// A change is applied by Reload, whether or not the file event won the
	// race to apply it first.
	writeFile(t, path, fileV2)
	got = w.Reload(TriggerSignal)
	if got.Err != nil || got.Version != 2 || limitOf(st, "b") != 5 {
		t.Errorf("got %+v, rules %+v; want v2 at version 2", got, st.Current().Rules())
	}
	rs.waitFor(t, 0, "reported from Reload", func(r ReloadResult) bool { return r.Trigger == TriggerSignal && r.Version == 2 })

	// A rule put through the Store is undone by the next reload, without
	// bumping the version twice. (The reload that applies the file may be
	// the debounced one of the write above, if it comes late.)
	if _, err := st.Put(nameRule("extra")); err != nil {
		t.Fatal(err)
	}
	got = w.Reload(TriggerSignal)
	if got.Err != nil || got.Version != 4 || limitOf(st, "extra") != -1 {
		t.Errorf("got %+v, want the file re-applied at version 4", got)
	}
	got = w.Reload(TriggerSignal)
	if got.Err != nil || got.Changed || got.Version != 4 {
		t.Errorf("got %+v, want no change at version 4", got)
	}
}

func TestWatcherFormattingOnlyChange(t *testing.T) {
	t.Parallel()
	path, st, w, _ := startWatcher(t)
	writeFile(t, path, "# the same rules, written differently\n"+fileV1)
	if got := w.Reload(TriggerSignal); got.Err != nil || got.Changed || got.Version != 1 || st.Current().Version() != 1 {
		t.Errorf("got %+v, want no change at version 1", got)
	}
}

// TestWatcherConfigMap swaps a Kubernetes-style ConfigMap volume: the file is
// a symlink through "..data", which is replaced by renaming a new symlink
// over it.
func TestWatcherConfigMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkVersion := func(name, data string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "rules.yaml"), data)
	}
	mkVersion("..2025_01_01_00_00_00.1", fileV1)
	for _, link := range [][2]string{{"..2025_01_01_00_00_00.1", "..data"}, {"..data/rules.yaml", "rules.yaml"}} {
		if err := os.Symlink(link[0], filepath.Join(dir, link[1])); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "rules.yaml")
	rules, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := mustStore(t, rules...)
	rs := newResults()
	w, err := NewWatcher(path, st, rs.add, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	n := rs.count()
	mkVersion("..2025_01_02_00_00_00.2", fileV2)
	if err := os.Symlink("..2025_01_02_00_00_00.2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2025_01_01_00_00_00.1")); err != nil {
		t.Fatal(err)
	}
	got := rs.waitFor(t, n, "after the ..data swap", func(r ReloadResult) bool { return r.Changed })
	if got.Err != nil || got.Version != 2 || limitOf(st, "b") != 5 {
		t.Errorf("got %+v, rules %+v; want v2 at version 2", got, st.Current().Rules())
	}
}

func TestWatcherBadStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	st := mustStore(t, nameRule("kept"))
	rs := newResults()
	// The file is missing at start: reported, not fatal.
	w, err := NewWatcher(path, st, rs.add, nil)
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	defer w.Close()
	got := rs.waitFor(t, 0, "from start", func(r ReloadResult) bool { return r.Trigger == TriggerStart })
	if !errors.Is(got.Err, os.ErrNotExist) || got.Version != 1 || got.Rules != 1 {
		t.Errorf("got %+v, want ErrNotExist with the Store kept", got)
	}
	// Its creation is seen.
	n := rs.count()
	writeFile(t, path, fileV1)
	got = rs.waitFor(t, n, "after creating the file", func(r ReloadResult) bool { return r.Changed })
	if got.Err != nil || got.Version != 2 || limitOf(st, "kept") != -1 || limitOf(st, "a") != 1 {
		t.Errorf("got %+v, rules %+v; want the file's rules at version 2", got, st.Current().Rules())
	}

	if _, err := NewWatcher(filepath.Join(dir, "no-such-dir", "rules.yaml"), st, nil, nil); err == nil {
		t.Error("NewWatcher in a missing directory succeeded, want an error")
	}
}

func TestWatcherClose(t *testing.T) {
	t.Parallel()
	_, st, w, rs := startWatcher(t)
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case <-w.done:
	default:
		t.Error("the event loop still runs after Close returned")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	n := rs.count()
	got := w.Reload(TriggerSignal)
	if !errors.Is(got.Err, ErrClosed) || got.Version != st.Current().Version() {
		t.Errorf("Reload after Close = %+v, want ErrClosed", got)
	}
	if rs.count() != n {
		t.Error("Reload after Close reported a result, want none")
	}
}
