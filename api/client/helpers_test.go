package client_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/api/client"
)

// longScale is a window no test run sees end (about once a year).
const longScale = 8784 * time.Hour

// newClient returns a client of opts, closed when the test ends. A zero
// Timeout becomes a minute: on a loaded machine a request can take longer
// than the default, and only the tests of timeouts should see one.
func newClient(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	c, err := client.New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deadURL returns the URL of a service nobody listens on: port 0, which
// is never a listening port, so connecting is refused. (The port of a
// closed test server could be taken again meanwhile by a server of a test
// running in parallel.)
func deadURL(testing.TB) string { return "http://127.0.0.1:0" }

// manualClock is a client.Clock on a clocktest.Manual that the server's
// actor system shares: Sleep advances it.
type manualClock struct{ *clocktest.Manual }

var _ client.Clock = manualClock{}

func (m manualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.Advance(d)
	return nil
}

// fakeClock is a client.Clock that records every Sleep and moves its time
// by it, never waiting; once budget has been slept in total, it cancels
// the context of the Wait under test.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	total  time.Duration
	sleeps []time.Duration
	budget time.Duration      // 0: no budget
	cancel context.CancelFunc // called when the budget is spent
}

var _ client.Clock = (*fakeClock)(nil)

// newFakeClock returns a fakeClock reading clockStart that cancels when
// budget has been slept, and the context it cancels.
func newFakeClock(t testing.TB, budget time.Duration) (*fakeClock, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &fakeClock{now: actorstest.ClockStart(), budget: budget, cancel: cancel}, ctx
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	f.total += d
	spent := f.budget > 0 && f.total >= f.budget
	f.mu.Unlock()
	if spent {
		f.cancel()
		return ctx.Err()
	}
	return nil
}

// slept returns the sleeps so far.
func (f *fakeClock) slept() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// logRecorder is a slog.Handler that keeps every record's level and
// message.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// lines returns the records so far, one "LEVEL message" each.
func (l *logRecorder) lines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// decisionJSON is a well-formed allowed decision body, for tiny handlers.
const decisionJSON = `{"allowed":true,"id":"x","count":1,"limit":10,"remaining":9,"reset_ms":1000,"retry_after_ms":0}`

// writeJSON answers status with body as JSON.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// slogOf returns a logger writing to r.
func slogOf(r *logRecorder) *slog.Logger { return slog.New(r) }
