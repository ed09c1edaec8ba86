package apitest

import (
	"bytes"
	"log/slog"
	"sync"
	"sync/atomic"
)

// LogBuffer collects what a logger writes, for a test to read while the
// code under test goes on logging; safe for concurrent use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger returns a text logger, every level included, writing to l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TokenFailures counts the calls of an OnTokenFailure hook (admin and
// dashboard Options): Hook is the hook.
type TokenFailures struct {
	Wrong, Limited atomic.Int64
}

// Hook counts one refused token, limited or wrong.
func (c *TokenFailures) Hook(limited bool) {
	if limited {
		c.Limited.Add(1)
	} else {
		c.Wrong.Add(1)
	}
}
