package rls

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// waitTimeout bounds every wait for a reload; no test sleeps.
const waitTimeout = 10 * time.Second

// reloads collects what a Watcher reports.
type reloads struct {
	mu     sync.Mutex
	all    []ReloadResult
	signal chan struct{}
}

func newReloads() *reloads { return &reloads{signal: make(chan struct{}, 1)} }

func (r *reloads) add(res ReloadResult) {
	r.mu.Lock()
	r.all = append(r.all, res)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

func (r *reloads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

// waitFor returns the first result after the first from that satisfies ok.
func (r *reloads) waitFor(t *testing.T, from int, what string, ok func(ReloadResult) bool) ReloadResult {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, res := range r.all[min(from, len(r.all)):] {
			if ok(res) {
				r.mu.Unlock()
				return res
			}
		}
		r.mu.Unlock()
		select {
		case <-r.signal:
		case <-deadline.C:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("no reload %s within %v; got %+v", what, waitTimeout, r.all)
		}
	}
}

// put writes data to path by rename, as editors do.
func put(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// domainConfig is a config file of domain with a limit of rpu per hour on key k.
func domainConfig(domain string, rpu int) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: " + itoa(rpu) + "}\n"
}

// startWatching loads path into a Store and watches it with a short
// debounce and the real settle wait.
func startWatching(t *testing.T, path string) (*Store, *Watcher, *reloads) {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(c)
	rs := newReloads()
	w, err := newWatcher(path, st, rs.add, nil, watchTiming{debounce: 20 * time.Millisecond, settle: 20 * time.Millisecond, sleep: func(stop <-chan struct{}, d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-stop:
			return false
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return st, w, rs
}

// limitOf returns the requests_per_unit of domain's key k in st, or -1.
func limitOf(st *Store, domain string) int {
	m := st.Config().match(domain, ds("k=v"))
	if m.limit == nil {
		return -1
	}
	return int(m.limit.RequestsPerUnit)
}

// TestWatcherFile: the start reload changes nothing; an edit is applied
// whole; a broken file keeps the config in force, reported with the file,
// line and field; SIGHUP's Reload applies the fixed file.
func TestWatcherFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	put(t, path, domainConfig("a", 5))
	st, w, rs := startWatching(t, path)
	start := rs.waitFor(t, 0, "at start", func(r ReloadResult) bool { return r.Trigger == TriggerStart })
	if start.Err != nil || start.Changed || start.Domains != 1 || start.Files != 1 {
		t.Errorf("start reload %+v, want no change with 1 domain in 1 file", start)
	}
	first := st.Config()

	n := rs.count()
	put(t, path, domainConfig("a", 7))
	got := rs.waitFor(t, n, "after an edit", func(r ReloadResult) bool { return r.Changed })
	if got.Err != nil || got.Trigger != TriggerFile || limitOf(st, "a") != 7 || st.Config() == first {
		t.Errorf("after an edit: %+v, limit %d; want the file's limit 7 in a new Config", got, limitOf(st, "a"))
	}

	n = rs.count()
	put(t, path, "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	got = rs.waitFor(t, n, "after a broken edit", func(r ReloadResult) bool { return r.Err != nil })
	var ce *ConfigError
	if !errors.As(got.Err, &ce) || ce.File != path || ce.Line != 4 || ce.Field != "descriptors[0].rate_limit.unit" || got.Changed {
		t.Errorf("broken edit: %+v, want a *ConfigError at %s:4 about descriptors[0].rate_limit.unit", got, path)
	}
	if limitOf(st, "a") != 7 {
		t.Errorf("after a broken edit the limit is %d, want 7 (the last good config)", limitOf(st, "a"))
	}

	// The file is fixed in place; Reload, as on SIGHUP, applies it.
	if err := os.WriteFile(path, []byte(domainConfig("b", 9)), 0o644); err != nil {
		t.Fatal(err)
	}
	// (Its own write event may have reloaded it first: then Reload finds
	// it in force.)
	if got = w.Reload(TriggerSignal); got.Err != nil || got.Trigger != TriggerSignal {
		t.Fatalf("Reload of the fixed file: %+v", got)
	}
	if limitOf(st, "b") != 9 || !slices.Equal(st.Config().Domains(), []string{"b"}) {
		t.Errorf("after the fix the domains are %v (b's limit %d), want [b] alone with 9", st.Config().Domains(), limitOf(st, "b"))
	}
}

// TestWatcherDirectory: files added, replaced and removed in a directory,
// a ConfigMap's ..data swap, and an emptied directory (refused).
func TestWatcherDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	put(t, filepath.Join(dir, "a.yaml"), domainConfig("a", 1))
	st, _, rs := startWatching(t, dir)

	n := rs.count()
	put(t, filepath.Join(dir, "b.yml"), domainConfig("b", 2))
	rs.waitFor(t, n, "a new file", func(r ReloadResult) bool { return r.Changed && r.Files == 2 })
	if limitOf(st, "a") != 1 || limitOf(st, "b") != 2 {
		t.Errorf("after adding b.yml: a %d, b %d; want 1 and 2", limitOf(st, "a"), limitOf(st, "b"))
	}

	// A second file defining a domain again: refused, naming both files.
	n = rs.count()
	put(t, filepath.Join(dir, "c.yaml"), domainConfig("a", 3))
	got := rs.waitFor(t, n, "a duplicate domain", func(r ReloadResult) bool { return r.Err != nil })
	var ce *ConfigError
	if !errors.As(got.Err, &ce) || ce.File != filepath.Join(dir, "c.yaml") || ce.Field != "domain" || ce.Line != 1 {
		t.Errorf("duplicate domain: %+v, want a *ConfigError at c.yaml:1 about domain", got)
	}
	if limitOf(st, "a") != 1 || st.Config().Files()[1] != filepath.Join(dir, "b.yml") {
		t.Errorf("after the refused file: a %d, files %v; want the config of a.yaml and b.yml", limitOf(st, "a"), st.Config().Files())
	}
	n = rs.count()
	if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	rs.waitFor(t, n, "the duplicate removed", func(r ReloadResult) bool { return r.Err == nil })

	// Removing a file removes its domain.
	n = rs.count()
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	rs.waitFor(t, n, "a removed file", func(r ReloadResult) bool { return r.Changed && r.Files == 1 })
	if limitOf(st, "a") != -1 || limitOf(st, "b") != 2 {
		t.Errorf("after removing a.yaml: a %d, b %d; want none and 2", limitOf(st, "a"), limitOf(st, "b"))
	}

	// The last file removed: no config file, refused; b stays.
	n = rs.count()
	if err := os.Remove(filepath.Join(dir, "b.yml")); err != nil {
		t.Fatal(err)
	}
	got = rs.waitFor(t, n, "an empty directory", func(r ReloadResult) bool { return r.Err != nil })
	if !errors.Is(got.Err, ErrNoFiles) || limitOf(st, "b") != 2 {
		t.Errorf("empty directory: %+v, b %d; want ErrNoFiles and b kept", got, limitOf(st, "b"))
	}
}

// TestWatcherConfigMap: a Kubernetes ConfigMap volume, whose files are
// links through ..data to a timestamped directory, swapped by renaming a
// new ..data link over the old one.
func TestWatcherConfigMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for v, rpu := range map[string]int{"..2024_v1": 1, "..2024_v2": 2} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		put(t, filepath.Join(dir, v, "rls.yaml"), domainConfig("a", rpu))
	}
	if err := os.Symlink("..2024_v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "rls.yaml"), filepath.Join(dir, "rls.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(dir, "rls.yaml")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			// Not parallel: both watch the same volume, one after the other.
			if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("..2024_v1", filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
			st, _, rs := startWatching(t, path)
			if limitOf(st, "a") != 1 {
				t.Fatalf("at start the limit is %d, want 1", limitOf(st, "a"))
			}
			n := rs.count()
			if err := os.Symlink("..2024_v2", filepath.Join(dir, "..data_tmp")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
			rs.waitFor(t, n, "after the ..data swap", func(r ReloadResult) bool { return r.Changed })
			if limitOf(st, "a") != 2 {
				t.Errorf("after the swap the limit is %d, want 2", limitOf(st, "a"))
			}
		})
	}
}

// TestWatcherSettles: a file written in place in two steps is applied
// once the two reads agree, not half way; one that never settles is
// refused.
func TestWatcherSettles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	put(t, path, domainConfig("a", 1))
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(c)
	var mu sync.Mutex
	var writes []string // what each settle wait writes
	sleeps := 0
	sleep := func(stop <-chan struct{}, d time.Duration) bool {
		mu.Lock()
		defer mu.Unlock()
		if sleeps < len(writes) {
			if err := os.WriteFile(path, []byte(writes[sleeps]), 0o644); err != nil {
				t.Error(err)
			}
		}
		sleeps++
		return true
	}
	rs := newReloads()
	w, err := newWatcher(path, st, rs.add, nil, watchTiming{debounce: 24 * time.Hour, settle: settleDelay, sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	full := domainConfig("a", 2)
	script := func(before string, ws ...string) {
		mu.Lock()
		defer mu.Unlock()
		if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
			t.Fatal(err)
		}
		writes, sleeps = ws, 0
	}
	script(full[:20], full)
	if got := w.Reload(TriggerSignal); got.Err != nil || !got.Changed || limitOf(st, "a") != 2 || sleeps != 2 {
		t.Errorf("half written, then finished: %+v, limit %d, %d waits; want the finished file after 2 waits", got, limitOf(st, "a"), sleeps)
	}
	flip := []string{domainConfig("a", 3), domainConfig("a", 4)}
	script(flip[1], flip[0], flip[1], flip[0], flip[1], flip[0], flip[1], flip[0], flip[1], flip[0])
	if got := w.Reload(TriggerSignal); !errors.Is(got.Err, ErrUnsettled) || got.Changed || limitOf(st, "a") != 2 || sleeps != maxSettleReads-1 {
		t.Errorf("never settling: %+v, limit %d, %d waits; want ErrUnsettled with 2 kept after %d waits", got, limitOf(st, "a"), sleeps, maxSettleReads-1)
	}
	// The bytes in force are not read twice.
	script(full)
	if got := w.Reload(TriggerSignal); got.Err != nil || got.Changed || sleeps != 0 {
		t.Errorf("unchanged: %+v after %d waits, want no change and no wait", got, sleeps)
	}
}

// TestWatcherClose: after Close, Reload reports ErrClosed and nothing to
// onResult; Close is idempotent.
func TestWatcherClose(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	put(t, path, domainConfig("a", 1))
	_, w, rs := startWatching(t, path)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	n := rs.count()
	if got := w.Reload(TriggerSignal); !errors.Is(got.Err, ErrClosed) || got.Domains != 1 {
		t.Errorf("Reload after Close = %+v, want ErrClosed with 1 domain in force", got)
	}
	if rs.count() != n {
		t.Error("Reload after Close reported a result")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestReloadUnderLoad: checks running while the config is swapped see the
// old limit or the new one, never a mixture nor a fresh budget: a limit of
// 5 lowered to 3 mid-way, then raised to 8, admits 8 in all.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, mustParse(t, domainConfig("a", 5)), Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				if g == 0 && i == 5 {
					svc.store.Swap(mustParse(t, domainConfig("a", 3)))
				}
				resp, err := svc.ShouldRateLimit(ctx, rq("a", 0, ds("k=v")))
				if err != nil {
					t.Error(err)
					return
				}
				if resp.OverallCode == cOK {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if ok > 5 {
		t.Errorf("%d admitted across a lowering from 5 to 3, want at most 5", ok)
	}
	svc.store.Swap(mustParse(t, domainConfig("a", 8)))
	for range 10 {
		if resp, err := svc.ShouldRateLimit(ctx, rq("a", 0, ds("k=v"))); err == nil && resp.OverallCode == cOK {
			ok++
		}
	}
	if ok != 8 {
		t.Errorf("%d admitted in all after raising the limit to 8, want exactly 8 (the counts carry over)", ok)
	}
}
