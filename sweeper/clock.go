package sweeper

import (
	"sync/atomic"
	"time"
)

// Clock is the time source of the sweeper and of the shard owners. Tests
// inject a manual clock; production uses SystemClock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not happened yet, and reports whether it did.
	Stop() bool
}

// SystemClock returns a Clock that reads the system clock. Its Now reads
// only the monotonic clock, from an anchor on the wall clock taken again
// every second: reading both clocks, as time.Now does, costs a check about
// a tenth of its time. A step of the wall clock (or a suspend) therefore
// shows within a second; a step back cannot reopen a window (the table
// never goes back in time).
func SystemClock() Clock {
	c := &systemClock{}
	now := time.Now()
	c.anchor.Store(&now)
	return c
}

// anchorAge is how long SystemClock counts on the monotonic clock alone.
const anchorAge = time.Second

type systemClock struct {
	anchor atomic.Pointer[time.Time] // a time.Now reading, with its monotonic part
}

func (c *systemClock) Now() time.Time {
	a := c.anchor.Load()
	if d := time.Since(*a); d < anchorAge {
		return a.Add(d)
	}
	now := time.Now()
	c.anchor.Store(&now)
	return now
}

func (*systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
