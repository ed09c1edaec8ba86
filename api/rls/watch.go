package rls

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/filewatch"
)

// The triggers of a reload, as reported in ReloadResult.Trigger.
const (
	// TriggerStart is the reload NewWatcher makes before it returns.
	TriggerStart = "start"
	// TriggerFile is a reload after a file changed.
	TriggerFile = "file"
	// TriggerSignal is the trigger the daemon passes to Reload on SIGHUP.
	TriggerSignal = "signal"
)

// DefaultDebounce is how long a Watcher waits after the last file-system
// event of a burst before it reloads, so that one save is one reload.
const DefaultDebounce = 100 * time.Millisecond

// A reload reads the config again settleDelay after each read, until two
// reads agree, at most maxSettleReads times, so that a file written in
// place (truncate, then write) is seen finished.
const (
	settleDelay    = 100 * time.Millisecond
	maxSettleReads = 10
)

// ReloadResult reports one attempt to reload a Watcher's config.
type ReloadResult struct {
	// Changed reports whether the attempt put a new Config in the Store:
	// false when it failed, or when the files (names and bytes) are those
	// of the Config in force.
	Changed bool
	// Domains and Files are the counts of the Config in force after the
	// attempt (0 without one).
	Domains, Files int
	// Err says why the config was not applied: a file could not be read,
	// the directory holds no config file (ErrNoFiles), the files kept
	// changing (ErrUnsettled), a file is invalid (a *ConfigError naming the
	// file, the line and the field), or the Watcher is closed (ErrClosed).
	// The Store then keeps its Config. Nil when the config is in force.
	Err error
	// Trigger is what caused the attempt: TriggerStart, TriggerFile, or the
	// string given to Reload, such as TriggerSignal.
	Trigger string
}

// Watcher keeps a Store in step with the config at a path, a file or a
// directory (see Load): it reloads when the files change and when Reload
// is called (the daemon calls it on SIGHUP).
//
// It watches the directory (the file's, or the directory itself) rather
// than the files, so that it sees a file replaced by rename, as editors
// do, and a Kubernetes ConfigMap's "..data" symlink swap; for a directory
// every event in it counts. A burst of events is one reload,
// DefaultDebounce after the last. Changes behind links that lead out of
// the directory are not seen: send SIGHUP.
//
// A reload reads every file; unless their names and bytes are those of
// the Config in force, it reads them again 100 ms later, and again, until
// two reads agree (at most 10 reads), so that a file being written in
// place is seen once its writer has finished. Then, if every file is
// valid, the new Config replaces the old one whole (Store.Swap): a check
// sees one or the other. A config that cannot be read, does not settle or
// does not parse leaves the Config in force. Every attempt is reported to
// onResult.
//
// A Watcher is safe for concurrent use.
type Watcher struct {
	path     string // absolute and clean
	st       *Store
	onResult func(ReloadResult)
	settle   time.Duration
	sleep    filewatch.SleepFunc
	fw       *filewatch.Watcher
}

// watchTiming is a Watcher's clock: the debounce of file events, the
// settle delay between reads, and how it waits.
type watchTiming struct {
	debounce, settle time.Duration
	sleep            filewatch.SleepFunc
}

// NewWatcher starts watching the config at path for st. It reloads once
// before it returns (TriggerStart), which changes nothing when st holds
// the config of the files as they are (the daemon Loads it first, so that
// a bad config refuses the start); a failure of that reload is reported
// like any other. NewWatcher fails only when the directory cannot be
// watched.
//
// onResult, if not nil, is called with the result of every reload
// attempt, one at a time, in order, from the goroutine that made it (the
// Watcher's own, or Reload's caller), and never after Close returns. It
// must not call Reload or Close. logger, if nil, discards; it is told of
// failures of the file-system events.
func NewWatcher(path string, st *Store, onResult func(ReloadResult), logger *slog.Logger) (*Watcher, error) {
	return newWatcher(path, st, onResult, logger, watchTiming{debounce: DefaultDebounce, settle: settleDelay, sleep: filewatch.Sleep})
}

// newWatcher is NewWatcher with the clock given.
func newWatcher(path string, st *Store, onResult func(ReloadResult), logger *slog.Logger, clock watchTiming) (*Watcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("rls: watch %s: %w", path, err)
	}
	w := &Watcher{path: abs, st: st, onResult: onResult, settle: clock.settle, sleep: clock.sleep}
	if w.fw, err = filewatch.New(abs, clock.debounce, func() { w.Reload(TriggerFile) }, logger); err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	w.Reload(TriggerStart)
	w.fw.Start()
	return w, nil
}

// Reload reloads the config now, reports the result to onResult and
// returns it; trigger is reported as ReloadResult.Trigger. It waits for the
// files to settle (see Watcher), so it may take a few hundred
// milliseconds. After Close, and when Close interrupts it, it returns a
// result whose Err matches ErrClosed, without reporting it.
func (w *Watcher) Reload(trigger string) ReloadResult {
	var res ReloadResult
	ran := w.fw.Do(func(stop <-chan struct{}) {
		res = w.reload(stop, trigger)
		if !errors.Is(res.Err, ErrClosed) && w.onResult != nil {
			w.onResult(res)
		}
	})
	if !ran {
		res = w.result(trigger)
		res.Err = fmt.Errorf("rls: reload %s: %w", w.path, ErrClosed)
	}
	return res
}

// result is the result of an attempt that changed nothing.
func (w *Watcher) result(trigger string) ReloadResult {
	res := ReloadResult{Trigger: trigger}
	if c := w.st.Config(); c != nil {
		res.Domains, res.Files = len(c.domains), len(c.files)
	}
	return res
}

// reload makes one attempt, under the watcher's lock; stop is closed by Close.
func (w *Watcher) reload(stop <-chan struct{}, trigger string) ReloadResult {
	res := w.result(trigger)
	cur := w.st.Config()
	files, err := readFiles(w.path)
	if err != nil {
		res.Err = err
		return res
	}
	sum := digestOf(files)
	if cur != nil && sum == cur.digest {
		return res
	}
	agreed, err := filewatch.Settle(stop, w.sleep, w.settle, maxSettleReads, sum[:], func() ([]byte, error) {
		again, err := readFiles(w.path)
		if err != nil {
			return nil, err
		}
		files = again
		s := digestOf(again)
		return s[:], nil
	})
	switch {
	case errors.Is(err, filewatch.ErrStopped):
		res.Err = fmt.Errorf("rls: reload %s: %w", w.path, ErrClosed)
		return res
	case errors.Is(err, filewatch.ErrUnsettled):
		res.Err = fmt.Errorf("rls: reload %s: %w: %d reads %v apart all differed", w.path, ErrUnsettled, maxSettleReads, w.settle)
		return res
	case err != nil:
		res.Err = err
		return res
	}
	if cur != nil && [32]byte(agreed) == cur.digest {
		return res
	}
	c, err := Parse(files...)
	if err != nil {
		res.Err = err
		return res
	}
	w.st.Swap(c)
	res.Changed, res.Domains, res.Files = true, len(c.domains), len(c.files)
	return res
}

// Close stops watching and waits for the event loop to return; a reload
// in progress finishes first (one waiting for the files to settle stops
// waiting and applies nothing), and onResult is not called after Close
// returns. It is idempotent and returns the error of closing the
// file-system watcher.
func (w *Watcher) Close() error { return w.fw.Close() }
