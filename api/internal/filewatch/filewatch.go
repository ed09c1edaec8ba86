// Package filewatch turns the changes of a config file, or of a directory
// of config files, into reloads, for the config formats of ratelimitd
// (api/rules, api/rls). It owns github.com/fsnotify/fsnotify.
//
// A Watcher watches the directory (the file's, or the directory itself),
// not the file, so that it sees a file replaced by rename, as editors and
// atomic writers do, and a Kubernetes ConfigMap's symlink swap (the
// "..data" link the files point through). For a file, events for other
// names in its directory are ignored; for a directory, every event in it
// counts. A burst of events is one call of the owner's onChange, made
// debounce after the last event. Reloads are serialised (Do), and none
// runs once Close has begun. Settle reads a file until two reads agree, so
// that a file written in place is seen once its writer has finished.
package filewatch

import (
	"bytes"
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

// The sentinel errors of the package. Match them with errors.Is.
var (
	// ErrStopped is returned by Settle when stop was closed while it waited.
	ErrStopped = errors.New("filewatch: stopped")
	// ErrUnsettled is returned (wrapped) by Settle when every read differed
	// from the one before.
	ErrUnsettled = errors.New("filewatch: the file kept changing")
)

// Watcher calls its owner's onChange when the watched path may have
// changed. It is safe for concurrent use.
type Watcher struct {
	path     string // absolute and clean
	dir      string // the directory watched
	isDir    bool   // path is that directory: every event in it counts
	fw       *fsnotify.Watcher
	debounce time.Duration
	onChange func()
	log      *slog.Logger
	// names holds the names in dir whose events count, for a file; the
	// event loop reads it without waiting for a reload in progress.
	names atomic.Pointer[map[string]bool]

	mu      sync.Mutex // serialises Do; guards closed and started
	closed  bool
	started bool

	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the event loop returns
	closeOnce sync.Once
	closeErr  error
}

// New watches path, a file or a directory, and will call onChange (from
// the watcher's own goroutine, debounce after the last event of a burst,
// and after an error of the event source, when events may have been lost)
// once Start has started the event loop. onChange typically calls Do.
// logger, if nil, discards. New fails only when the directory cannot be
// watched.
func New(path string, debounce time.Duration, onChange func(), logger *slog.Logger) (*Watcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		path:     abs,
		dir:      filepath.Dir(abs),
		debounce: debounce,
		onChange: onChange,
		log:      logger,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		w.isDir, w.dir = true, abs
	}
	if w.fw, err = fsnotify.NewWatcher(); err != nil {
		return nil, fmt.Errorf("watch %s: %w", abs, err)
	}
	if err := w.fw.Add(w.dir); err != nil {
		w.fw.Close()
		return nil, fmt.Errorf("watch %s: %w", w.dir, err)
	}
	w.Refresh()
	return w, nil
}

// Path returns the absolute path watched.
func (w *Watcher) Path() string { return w.path }

// Start starts the event loop; only the first call does anything, and
// none after Close.
func (w *Watcher) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closed {
		return
	}
	w.started = true
	go w.loop()
}

// Refresh reads again which names of the directory lead to the watched
// file: its own, and the first element of each symlink on the way to the
// real file. Do calls it before every reload, so that a ConfigMap's new
// link is followed.
func (w *Watcher) Refresh() {
	if w.isDir {
		return
	}
	names := linkNames(w.path, w.dir)
	w.names.Store(&names)
}

// Do runs f, unless Close has begun, with the watcher's lock held (so one
// reload runs at a time), after Refresh; f is given the channel Close
// closes, to end its waits early. Do reports whether f ran.
func (w *Watcher) Do(f func(stop <-chan struct{})) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.Refresh()
	f(w.stop)
	return true
}

// loop turns file-system events into debounced calls of onChange until Close.
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
			w.log.Warn("watching the file system failed; reloading to be sure", "err", err)
			timer.Reset(w.debounce)
		case <-timer.C:
			w.onChange()
		}
	}
}

// relevant reports whether an event for name may have changed what is watched.
func (w *Watcher) relevant(name string) bool {
	name = filepath.Clean(name)
	if w.isDir {
		return name == w.dir || filepath.Dir(name) == w.dir
	}
	if filepath.Dir(name) != w.dir {
		return false
	}
	names := w.names.Load()
	return names != nil && (*names)[filepath.Base(name)]
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

// Close stops watching: it ends the waits of a reload in progress (their
// stop channel is closed), waits for that reload to finish, makes every
// later Do a no-op, and waits for the event loop to return. It is
// idempotent and returns the error of closing the event source.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop) // first: it ends a reload's waits
		w.mu.Lock()
		w.closed = true
		started := w.started
		w.mu.Unlock()
		if started {
			<-w.done
		} else {
			close(w.done)
		}
		w.closeErr = w.fw.Close()
	})
	return w.closeErr
}

// Done returns a channel closed once the event loop has returned (by
// Close's return at the latest).
func (w *Watcher) Done() <-chan struct{} { return w.done }

// SleepFunc waits d, or until stop is closed; it reports whether d passed.
type SleepFunc func(stop <-chan struct{}, d time.Duration) bool

// Sleep is the SleepFunc of real time.
func Sleep(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// Settle reads again, delay after each read (waiting with sleep), until a
// read agrees with the one before, starting from first, the first read; it
// returns the bytes two reads agreed on. It gives up after maxReads reads
// in all (ErrUnsettled), when stop is closed during a wait (ErrStopped), or
// with read's error.
func Settle(stop <-chan struct{}, sleep SleepFunc, delay time.Duration, maxReads int, first []byte, read func() ([]byte, error)) ([]byte, error) {
	data := first
	for range maxReads - 1 {
		if !sleep(stop, delay) {
			return nil, ErrStopped
		}
		again, err := read()
		if err != nil {
			return nil, err
		}
		if bytes.Equal(again, data) {
			return data, nil
		}
		data = again
	}
	return nil, fmt.Errorf("%w: %d reads %v apart all differed", ErrUnsettled, maxReads, delay)
}
