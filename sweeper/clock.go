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
	start := time.Now()
	return newSystemClock(time.Now, func() time.Duration { return time.Since(start) })
}

// anchorAge is how long SystemClock counts on the monotonic clock alone.
const anchorAge = time.Second

// systemClock reads wall for the wall clock and mono for the monotonic one
// (the time since some fixed instant); tests inject both.
type systemClock struct {
	wall   func() time.Time
	mono   func() time.Duration
	anchor atomic.Pointer[anchor]
}

// anchor is a wall clock reading and the monotonic reading taken with it.
type anchor struct {
	at   time.Time
	mono time.Duration
}

func newSystemClock(wall func() time.Time, mono func() time.Duration) *systemClock {
	c := &systemClock{wall: wall, mono: mono}
	c.anchor.Store(&anchor{at: wall().Round(0), mono: mono()})
	return c
}

func (c *systemClock) Now() time.Time {
	m := c.mono()
	a := c.anchor.Load()
	if d := m - a.mono; d < anchorAge {
		return a.at.Add(d)
	}
	n := &anchor{at: c.wall().Round(0), mono: m}
	c.anchor.Store(n)
	return n.at
}

func (*systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
