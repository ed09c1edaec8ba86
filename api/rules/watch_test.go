package rules

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	case <-w.fw.Done():
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

// TestWatcherTruncatedFile: a file truncated in place and written after a
// gap, as scripts and editors that do not rename do, never empties the
// Store: the empty file is a failed reload that keeps the last good rules,
// then the new content is applied; only "rules: []" removes every rule.
func TestWatcherTruncatedFile(t *testing.T) {
	t.Parallel()
	path, st, _, rs := startWatcher(t)

	n := rs.count()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	got := rs.waitFor(t, n, "after truncating the file", func(r ReloadResult) bool { return r.Trigger == TriggerFile })
	var e *Error
	if !errors.Is(got.Err, ErrInvalid) || !errors.As(got.Err, &e) || e.Field != "rules" || got.Changed || got.Version != 1 || got.Rules != 1 {
		t.Fatalf("reload of the truncated file: got %+v, want an ErrInvalid about rules, no change, version 1 with 1 rule", got)
	}
	if st.Current().Version() != 1 || limitOf(st, "a") != 1 {
		t.Fatalf("after the truncated file: got version %d rules %+v, want v1 kept", st.Current().Version(), st.Current().Rules())
	}

	// The writer comes back and writes the new content into the same file.
	n = rs.count()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(fileV2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got = rs.waitFor(t, n, "applying v2", func(r ReloadResult) bool { return r.Changed })
	if got.Err != nil || got.Version != 2 || got.Rules != 2 || limitOf(st, "a") != 2 || limitOf(st, "b") != 5 {
		t.Fatalf("after writing v2: got %+v, rules %+v; want v2 at version 2", got, st.Current().Rules())
	}
	rs.mu.Lock()
	for _, r := range rs.all {
		if r.Rules == 0 {
			t.Errorf("a reload left the Store empty in between: %+v (all: %+v)", r, rs.all)
		}
	}
	rs.mu.Unlock()

	// Said explicitly, an empty rule set is applied.
	n = rs.count()
	writeFile(t, path, "rules: []\n")
	got = rs.waitFor(t, n, "applying rules: []", func(r ReloadResult) bool { return r.Changed })
	if got.Err != nil || got.Version != 3 || got.Rules != 0 || st.Current().Len() != 0 {
		t.Errorf("after rules: []: got %+v, want no rule at version 3", got)
	}
}

// scriptedClock is a Watcher clock that never waits: at its i-th sleep it
// writes writes[i] into the file in place (as a writer that does not rename
// would, between two of the Watcher's reads), or leaves the file alone when
// writes[i] is keep or i is past the script.
type scriptedClock struct {
	t      *testing.T
	path   string
	mu     sync.Mutex
	writes []string
	sleeps int
	delays []time.Duration
}

const keep = "\x00keep"

func (c *scriptedClock) sleep(stop <-chan struct{}, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.sleeps
	c.sleeps++
	c.delays = append(c.delays, d)
	if i < len(c.writes) && c.writes[i] != keep {
		if err := os.WriteFile(c.path, []byte(c.writes[i]), 0o644); err != nil {
			c.t.Error(err)
		}
	}
	return true
}

// script sets what the next sleeps write and resets the count.
func (c *scriptedClock) script(writes ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes, c.sleeps, c.delays = writes, 0, nil
}

func (c *scriptedClock) count() (int, []time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sleeps, c.delays
}

// startScriptedWatcher is startWatcher with a scriptedClock and a debounce so
// long that only the test's Reload calls reload the file.
func startScriptedWatcher(t *testing.T) (string, *Store, *Watcher, *results, *scriptedClock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fileV1)
	st := mustStore(t, mustParse(t, fileV1)...)
	clock := &scriptedClock{t: t, path: path}
	rs := newResults()
	w, err := newWatcher(path, st, rs.add, nil, watchTiming{debounce: 24 * time.Hour, settle: settleDelay, sleep: clock.sleep})
	if err != nil {
		t.Fatalf("newWatcher: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return path, st, w, rs, clock
}

func mustParse(t *testing.T, data string) []Rule {
	t.Helper()
	rules, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestWatcherSettles: a reload reads the file until two reads, settleDelay
// apart, agree, so a file written in place is applied once finished, and a
// half-written or empty one in between is never applied nor reported.
func TestWatcherSettles(t *testing.T) {
	t.Parallel()
	halfV2 := fileV2[:strings.Index(fileV2, "  - {name: b")] // the first rule only: valid, but not the file
	tornV2 := fileV2[:len(fileV2)-12]                        // cut inside the second rule: invalid
	tests := []struct {
		name       string
		before     string   // the file when Reload is called
		writes     []string // what each settle sleep writes
		wantSleeps int
		wantErr    error // nil: v2 applied at version 2
		wantField  string
	}{
		{"truncated, then written during the first wait", "", []string{fileV2}, 2, nil, ""},
		{"half written, then finished", halfV2, []string{fileV2}, 2, nil, ""},
		{"torn, then finished", tornV2, []string{fileV2}, 2, nil, ""},
		{"written in two steps", "", []string{halfV2, fileV2}, 3, nil, ""},
		{"still empty after settling", "", nil, 1, ErrInvalid, "rules"},
		{"still torn after settling", tornV2, nil, 1, ErrInvalid, ""},
		{"never settles", "", []string{fileV2, fileV3, fileV2, fileV3, fileV2, fileV3, fileV2, fileV3, fileV2, fileV3}, maxSettleReads - 1, ErrUnsettled, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, st, w, rs, clock := startScriptedWatcher(t)
			if err := os.WriteFile(path, []byte(tt.before), 0o644); err != nil {
				t.Fatal(err)
			}
			n := rs.count()
			clock.script(tt.writes...)
			got := w.Reload(TriggerSignal)
			sleeps, delays := clock.count()
			if sleeps != tt.wantSleeps {
				t.Errorf("got %d settle waits, want %d", sleeps, tt.wantSleeps)
			}
			for _, d := range delays {
				if d != settleDelay {
					t.Errorf("got a settle wait of %v, want %v", d, settleDelay)
				}
			}
			if rs.count() != n+1 {
				t.Errorf("got %d results reported, want 1", rs.count()-n)
			}
			if tt.wantErr == nil {
				if got.Err != nil || !got.Changed || got.Version != 2 || got.Rules != 2 || limitOf(st, "b") != 5 {
					t.Errorf("got %+v, rules %+v; want v2 applied at version 2", got, st.Current().Rules())
				}
				return
			}
			if !errors.Is(got.Err, tt.wantErr) || got.Changed || got.Version != 1 || st.Current().Version() != 1 || limitOf(st, "a") != 1 {
				t.Errorf("got %+v at version %d; want %v with v1 kept", got, st.Current().Version(), tt.wantErr)
			}
			var e *Error
			if tt.wantField != "" && (!errors.As(got.Err, &e) || e.Field != tt.wantField) {
				t.Errorf("got %v, want an *Error about %s", got.Err, tt.wantField)
			}
		})
	}

	// The bytes applied last are not read twice: no wait.
	t.Run("unchanged", func(t *testing.T) {
		t.Parallel()
		_, _, w, _, clock := startScriptedWatcher(t)
		clock.script()
		if got := w.Reload(TriggerSignal); got.Err != nil || got.Changed || got.Version != 1 {
			t.Errorf("got %+v, want no change at version 1", got)
		}
		if sleeps, _ := clock.count(); sleeps != 0 {
			t.Errorf("got %d settle waits for the bytes applied last, want 0", sleeps)
		}
	})
}

// TestWatcherCloseDuringSettle: Close ends a reload's settle wait; the reload
// applies nothing and reports nothing.
func TestWatcherCloseDuringSettle(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fileV1)
	st := mustStore(t, mustParse(t, fileV1)...)
	waiting := make(chan struct{}, 1)
	block := false
	var mu sync.Mutex
	sleep := func(stop <-chan struct{}, d time.Duration) bool {
		mu.Lock()
		b := block
		mu.Unlock()
		if !b {
			return true
		}
		waiting <- struct{}{}
		<-stop
		return false
	}
	rs := newResults()
	w, err := newWatcher(path, st, rs.add, nil, watchTiming{debounce: 24 * time.Hour, settle: settleDelay, sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	block = true
	mu.Unlock()
	writeFile(t, path, fileV2)
	n := rs.count()
	reloaded := make(chan ReloadResult, 1)
	go func() { reloaded <- w.Reload(TriggerSignal) }()
	select {
	case <-waiting:
	case <-time.After(waitTimeout):
		t.Fatal("Reload never waited for the file to settle")
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case got := <-reloaded:
		if !errors.Is(got.Err, ErrClosed) || got.Changed || st.Current().Version() != 1 {
			t.Errorf("Reload interrupted by Close = %+v at version %d, want ErrClosed and v1 kept", got, st.Current().Version())
		}
	case <-time.After(waitTimeout):
		t.Fatal("Reload did not return after Close")
	}
	if rs.count() != n {
		t.Errorf("got %d results reported after Close, want none", rs.count()-n)
	}
}
