package rules

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/filewatch"
)

// The triggers of a reload, as reported in ReloadResult.Trigger.
const (
	// TriggerStart is the reload NewWatcher makes before it returns.
	TriggerStart = "start"
	// TriggerFile is a reload after the file changed.
	TriggerFile = "file"
	// TriggerSignal is the trigger the daemon passes to Reload on SIGHUP.
	TriggerSignal = "signal"
)

// DefaultDebounce is how long a Watcher waits after the last file-system
// event of a burst before it reloads, so that one save is one reload.
const DefaultDebounce = 100 * time.Millisecond

// A reload reads the file again settleDelay after each read, until two
// reads agree, at most maxSettleReads times: a writer that does not rename
// (truncate, then write) is then seen finished, not half way.
const (
	settleDelay    = 100 * time.Millisecond
	maxSettleReads = 10
)

// ReloadResult reports one attempt to reload a Watcher's file.
type ReloadResult struct {
	// Version is the Store's version after the attempt: the new version when
	// Changed, else the version that was current.
	Version uint64
	// Rules is the number of rules in the Store after the attempt.
	Rules int
	// Changed reports whether the attempt installed a new rule set. It is
	// false when the file failed, or when its bytes, or its rules, are those
	// already in force.
	Changed bool
	// Err says why the file was not applied: it could not be read (wrapping
	// the *fs.PathError), it kept changing (ErrUnsettled), it is invalid
	// (wrapping an *Error, matching ErrInvalid, with the path in the
	// message; a file with no rule that does not say "rules: []" is one) or
	// the Watcher is closed (ErrClosed). The Store then keeps its rule set.
	// Nil when the file is in force, whether or not it changed anything.
	Err error
	// Trigger is what caused the attempt: TriggerStart, TriggerFile, or the
	// string given to Reload, such as TriggerSignal.
	Trigger string
}

// Watcher keeps a Store in step with a rules file: it reloads the file when
// the file changes and when Reload is called (the daemon calls it on SIGHUP).
//
// It watches the file's directory (with fsnotify), not the file, so that it
// sees the file replaced by rename, as editors and atomic writers do, and a
// Kubernetes ConfigMap's symlink swap (the "..data" link the file points
// through). Events for other names in the directory are ignored. A burst of
// events is debounced: the reload happens DefaultDebounce after the last.
//
// A reload reads the file; unless the bytes are those it applied last (and
// the Store has not changed since), it reads the file again 100 ms later,
// and again, until two reads agree (at most 10 reads), so that a file being
// written in place is seen once the writer has finished. Then, when the file
// parses, it replaces the Store's rules with the file's (Store.Replace). It
// changes nothing, and keeps the version, when the file's rules are the
// Store's rules. A file that cannot be read, does not settle or does not
// parse keeps the last good rule set, and so does a file with no rule unless
// it says "rules: []" (an empty file is more likely one caught between
// truncate and write than a wish to drop every rule). Every attempt is
// reported to onResult (which the daemon logs). Rules put or deleted through the Store
// since the last reload are overwritten by the next reload that applies the
// file.
//
// A Watcher is safe for concurrent use.
type Watcher struct {
	path     string // absolute and clean
	st       *Store
	onResult func(ReloadResult)
	settle   time.Duration
	sleep    filewatch.SleepFunc
	fw       *filewatch.Watcher

	// Under the watcher's lock (fw.Do):
	applied bool     // whether sum and version are set
	sum     [32]byte // SHA-256 of the bytes applied last
	version uint64   // the Store's version after they were applied
}

// NewWatcher starts watching the rules file at path for st. It reloads the
// file once before it returns (trigger TriggerStart); a failure of that reload
// is reported like any other and is not an error of NewWatcher, so the file
// may be missing or broken at start and fixed later. NewWatcher fails only
// when the directory cannot be watched.
//
// onResult, if not nil, is called with the result of every reload attempt,
// one at a time, in order, from the goroutine that made it (the Watcher's own,
// or Reload's caller). It must not call Reload or Close. logger, if nil,
// discards; it is told of failures of the file-system events.
func NewWatcher(path string, st *Store, onResult func(ReloadResult), logger *slog.Logger) (*Watcher, error) {
	return newWatcher(path, st, onResult, logger, watchTiming{debounce: DefaultDebounce, settle: settleDelay, sleep: filewatch.Sleep})
}

// watchTiming is a Watcher's clock: the debounce of file events, the
// settle delay between reads, and how it waits.
type watchTiming struct {
	debounce, settle time.Duration
	sleep            filewatch.SleepFunc
}

// newWatcher is NewWatcher with the clock given.
func newWatcher(path string, st *Store, onResult func(ReloadResult), logger *slog.Logger, clock watchTiming) (*Watcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("rules: watch %s: %w", path, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		path:     abs,
		st:       st,
		onResult: onResult,
		settle:   clock.settle,
		sleep:    clock.sleep,
	}
	if w.fw, err = filewatch.New(abs, clock.debounce, func() { w.Reload(TriggerFile) }, logger.With("path", abs)); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	w.Reload(TriggerStart)
	w.fw.Start()
	return w, nil
}

// Reload reloads the file now, reports the result to onResult and returns it.
// trigger is reported as ReloadResult.Trigger; the daemon passes
// TriggerSignal on SIGHUP. It waits for the file to settle (see Watcher), so
// it may take a few hundred milliseconds. After Close, and when Close
// interrupts it, it returns a result whose Err matches ErrClosed, without
// reporting it.
func (w *Watcher) Reload(trigger string) ReloadResult {
	var res ReloadResult
	ran := w.fw.Do(func(stop <-chan struct{}) {
		res = w.reload(stop, trigger)
		if !errors.Is(res.Err, ErrClosed) && w.onResult != nil {
			w.onResult(res)
		}
	})
	if !ran {
		cur := w.st.Current()
		return ReloadResult{Version: cur.Version(), Rules: cur.Len(), Err: fmt.Errorf("rules: reload %s: %w", w.path, ErrClosed), Trigger: trigger}
	}
	return res
}

// reload makes one attempt, under the watcher's lock; stop is closed by Close.
func (w *Watcher) reload(stop <-chan struct{}, trigger string) ReloadResult {
	cur := w.st.Current()
	res := ReloadResult{Version: cur.Version(), Rules: cur.Len(), Trigger: trigger}
	data, err := os.ReadFile(w.path)
	if err != nil {
		res.Err = fmt.Errorf("rules: reload: %w", err)
		return res
	}
	sum := sha256.Sum256(data)
	if w.applied && sum == w.sum && cur.Version() == w.version {
		return res
	}
	if data, err = w.settled(stop, data); err != nil {
		res.Err = fmt.Errorf("rules: reload %s: %w", w.path, err)
		return res
	}
	if sum = sha256.Sum256(data); w.applied && sum == w.sum && cur.Version() == w.version {
		return res
	}
	rules, err := parseFile(data)
	if err != nil {
		res.Err = fmt.Errorf("rules: reload %s: %w", w.path, err)
		return res
	}
	s, changed, err := w.st.replaceIfChanged(rules)
	if err != nil { // Parse validated rules as NewSet does: not expected
		res.Err = fmt.Errorf("rules: reload %s: %w", w.path, err)
		return res
	}
	w.applied, w.sum, w.version = true, sum, s.Version()
	res.Version, res.Rules, res.Changed = s.Version(), s.Len(), changed
	return res
}

// settled reads the file again, w.settle after each read, until a read
// agrees with the one before, starting from data, the first read; it returns
// the bytes two reads agreed on.
func (w *Watcher) settled(stop <-chan struct{}, data []byte) ([]byte, error) {
	data, err := filewatch.Settle(stop, w.sleep, w.settle, maxSettleReads, data, func() ([]byte, error) { return os.ReadFile(w.path) })
	switch {
	case errors.Is(err, filewatch.ErrStopped):
		return nil, ErrClosed
	case errors.Is(err, filewatch.ErrUnsettled):
		return nil, fmt.Errorf("%w: %d reads %v apart all differed", ErrUnsettled, maxSettleReads, w.settle)
	}
	return data, err
}

// Close stops watching and waits for the event loop to return; a reload in
// progress finishes first (one waiting for the file to settle stops waiting
// and applies nothing), and onResult is not called after Close returns.
// It is idempotent and returns the error of closing the fsnotify watcher.
func (w *Watcher) Close() error { return w.fw.Close() }
