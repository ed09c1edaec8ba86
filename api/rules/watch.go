package rules

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
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
// logged and reported to onResult. Rules put or deleted through the Store
// since the last reload are overwritten by the next reload that applies the
// file.
//
// A Watcher is safe for concurrent use.
type Watcher struct {
	path     string // absolute and clean
	dir      string
	st       *Store
	onResult func(ReloadResult)
	log      *slog.Logger
	debounce time.Duration
	settle   time.Duration
	// sleep waits d, or until stop is closed (then it reports false).
	sleep func(stop <-chan struct{}, d time.Duration) bool
	fw    *fsnotify.Watcher
	// names holds the names in dir whose events trigger a reload; the event
	// loop reads it without waiting for a reload in progress.
	names atomic.Pointer[map[string]bool]

	mu      sync.Mutex // serialises reloads; guards the fields below
	closed  bool
	applied bool     // whether sum and version are set
	sum     [32]byte // SHA-256 of the bytes applied last
	version uint64   // the Store's version after they were applied

	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the event loop returns
	closeOnce sync.Once
	closeErr  error
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
// discards.
func NewWatcher(path string, st *Store, onResult func(ReloadResult), logger *slog.Logger) (*Watcher, error) {
	return newWatcher(path, st, onResult, logger, watchTiming{debounce: DefaultDebounce, settle: settleDelay, sleep: sleepOrStop})
}

// watchTiming is a Watcher's clock: the debounce of file events, the
// settle delay between reads, and how it waits.
type watchTiming struct {
	debounce, settle time.Duration
	sleep            func(stop <-chan struct{}, d time.Duration) bool
}

// sleepOrStop waits d, or until stop is closed; it reports whether d passed.
func sleepOrStop(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
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
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("rules: watch %s: %w", abs, err)
	}
	w := &Watcher{
		path:     abs,
		dir:      filepath.Dir(abs),
		st:       st,
		onResult: onResult,
		log:      logger.With("path", abs),
		debounce: clock.debounce,
		settle:   clock.settle,
		sleep:    clock.sleep,
		fw:       fw,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if err := fw.Add(w.dir); err != nil {
		fw.Close()
		return nil, fmt.Errorf("rules: watch %s: %w", w.dir, err)
	}
	w.Reload(TriggerStart)
	go w.loop()
	return w, nil
}

// loop turns file-system events into debounced reloads until Close.
func (w *Watcher) loop() {
	defer close(w.done)
	timer := time.NewTimer(w.debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if w.relevant(ev.Name) {
				timer.Reset(w.debounce)
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			w.log.Warn("rules: watching the rules file", "err", err)
			// Events may have been lost: reload to be sure.
			timer.Reset(w.debounce)
		case <-timer.C:
			w.Reload(TriggerFile)
		}
	}
}

// relevant reports whether an event for name may have changed the file.
func (w *Watcher) relevant(name string) bool {
	name = filepath.Clean(name)
	if filepath.Dir(name) != w.dir {
		return false
	}
	names := w.names.Load()
	return names != nil && (*names)[filepath.Base(name)]
}

// Reload reloads the file now, reports the result to onResult and returns it.
// trigger is reported as ReloadResult.Trigger; the daemon passes
// TriggerSignal on SIGHUP. It waits for the file to settle (see Watcher), so
// it may take a few hundred milliseconds. After Close, and when Close
// interrupts it, it returns a result whose Err matches ErrClosed, without
// reporting it.
func (w *Watcher) Reload(trigger string) ReloadResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		cur := w.st.Current()
		return ReloadResult{Version: cur.Version(), Rules: cur.Len(), Err: fmt.Errorf("rules: reload %s: %w", w.path, ErrClosed), Trigger: trigger}
	}
	res := w.reload(trigger)
	if errors.Is(res.Err, ErrClosed) {
		return res
	}
	switch {
	case res.Err != nil:
		w.log.Error("rules: reload failed; keeping the current rules", "trigger", trigger, "version", res.Version, "rules", res.Rules, "err", res.Err)
	case res.Changed:
		w.log.Info("rules: reloaded", "trigger", trigger, "version", res.Version, "rules", res.Rules)
	default:
		w.log.Debug("rules: reload found no change", "trigger", trigger, "version", res.Version, "rules", res.Rules)
	}
	if w.onResult != nil {
		w.onResult(res)
	}
	return res
}

// reload makes one attempt; w.mu is held.
func (w *Watcher) reload(trigger string) ReloadResult {
	names := linkNames(w.path, w.dir)
	w.names.Store(&names)
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
	if data, err = w.settled(data); err != nil {
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
func (w *Watcher) settled(data []byte) ([]byte, error) {
	for range maxSettleReads - 1 {
		if !w.sleep(w.stop, w.settle) {
			return nil, ErrClosed
		}
		again, err := os.ReadFile(w.path)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(again, data) {
			return data, nil
		}
		data = again
	}
	return nil, fmt.Errorf("%w: %d reads %v apart all differed", ErrUnsettled, maxSettleReads, w.settle)
}

// linkNames returns the names in dir whose events may change the file at
// path: its own, and the first element, within dir, of each symlink on the
// way to the real file (for a Kubernetes ConfigMap volume, "..data").
func linkNames(path, dir string) map[string]bool {
	names := map[string]bool{filepath.Base(path): true}
	p := path
	for range 16 {
		target, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		if rel, err := filepath.Rel(dir, target); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			first, _, _ := strings.Cut(rel, string(filepath.Separator))
			names[first] = true
		}
		p = target
	}
	return names
}

// Close stops watching and waits for the event loop to return; a reload in
// progress finishes first (one waiting for the file to settle stops waiting
// and applies nothing), and onResult is not called after Close returns.
// It is idempotent and returns the error of closing the fsnotify watcher.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop) // first: it ends a reload's settle wait
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		<-w.done
		w.closeErr = w.fw.Close()
	})
	return w.closeErr
}
