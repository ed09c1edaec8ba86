package clock

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// Clock is a time source: every batch of checks reads it once, and the
// sweeping loop arms its timer on it. Tests inject a manual clock
// (clocktest.Manual); production uses System.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// UnixNanoer is a Clock that also reads its time as Unix nanoseconds,
// Now().UnixNano() without building a time.Time: a System decides a
// check from that reading only, so it asks for it where its Clock has it.
type UnixNanoer interface {
	Clock
	UnixNano() int64
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not happened yet, and reports whether it did.
	Stop() bool
}

// Option configures System.
type Option func(*systemClock)

// WithLogger has System log, at Warn, each step of the wall clock it
// sees (with the step, the offset it slews away and how long that takes).
// A nil logger logs nothing, as without the option.
func WithLogger(l *slog.Logger) Option {
	return func(c *systemClock) {
		if l != nil {
			c.log = l
		}
	}
}

// System returns a Clock that follows the system clock without ever
// stepping: its readings advance with the monotonic clock, and approach the
// wall clock by a slew of at most 1 ms per 20 ms elapsed.
//
// Now reads only the monotonic clock, from an anchor taken again every
// second, because reading the wall clock too, as time.Now does, is a
// noticeable part of a check's cost. At each anchor the wall clock is read and the readings'
// offset from it is slewed away: an ordinary NTP adjustment (a few ms)
// within a fraction of a second; a step of the wall clock, logged, in 20
// times the step (a suspend, which Go's monotonic clock does not count on
// Linux, is such a step forward).
// The trade-off: while it slews, windows run up to 1/20 fast or slow, and
// the readings are off the wall clock by what is left of the step. In
// exchange a step forward never ends every window at once, and a step back,
// or the correction of a step forward, never freezes windows until the wall
// clock comes back: readings never go back and never pause.
//
// A new clock (a restarted process) starts on the wall clock; there the
// table's own guard holds: it never goes back to a time earlier than one it
// has seen, journalled ones included.
func System(opts ...Option) Clock {
	return newSystemClock(time.Now, nil, opts...)
}

const (
	// anchorAge is how long System counts on the monotonic clock alone.
	anchorAge = time.Second
	// slewDiv is the inverse of the slew rate: 1 ns of correction per slewDiv ns.
	slewDiv = 20
	// stepMin is the least change of the wall clock against the monotonic
	// one that is logged as a step: what one anchorAge of slewing corrects,
	// a hundred times NTP's largest slew over the same second.
	stepMin = anchorAge / slewDiv
)

// systemClock reads wall for the wall clock and mono for the monotonic one
// (the time since some fixed instant); tests inject both. A nil mono is
// the time since start, read without a call through a func value.
type systemClock struct {
	wall   func() time.Time
	mono   func() time.Duration
	start  time.Time
	log    *slog.Logger
	anchor atomic.Pointer[anchor]
}

// anchor is a reading of the clock, the monotonic time it was taken at, and
// the offset of the wall clock from it then, still to be slewed away.
type anchor struct {
	at   time.Time // without a monotonic reading: compared by wall time
	atNs int64     // at.UnixNano(), kept for UnixNano
	mono time.Duration
	off  time.Duration
}

// after returns the reading d of monotonic time after a, d >= 0.
func (a *anchor) after(d time.Duration) time.Time { return a.at.Add(d + a.slew(d)) }

// slew returns the correction made in d of monotonic time after a, d >= 0:
// d/slewDiv towards the wall clock, until off is made up.
func (a *anchor) slew(d time.Duration) time.Duration {
	if s := d / slewDiv; a.off >= 0 {
		return min(s, a.off)
	} else {
		return max(-s, a.off)
	}
}

func newSystemClock(wall func() time.Time, mono func() time.Duration, opts ...Option) *systemClock {
	c := &systemClock{wall: wall, mono: mono, start: time.Now(), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(c)
	}
	at := wall().Round(0)
	c.anchor.Store(&anchor{at: at, atNs: at.UnixNano(), mono: c.monotonic()})
	return c
}

// Now is the time: the anchor's plus the monotonic time since it, slewed.
func (c *systemClock) Now() time.Time {
	a, d := c.read()
	return a.after(d)
}

// UnixNano is Now().UnixNano() without building the time.Time: the
// reading a check is decided at (see UnixNanoer).
func (c *systemClock) UnixNano() int64 {
	a, d := c.read()
	return a.atNs + int64(d+a.slew(d))
}

// read returns the anchor a reading is taken from and the monotonic time
// since it, d >= 0, re-anchoring first when the anchor is anchorAge old.
// It reads the monotonic clock before the anchor, so that an anchor stored
// after that read never gives an earlier reading than the one it starts
// on. A caller that read the monotonic clock after a re-anchoring one but
// loads the old anchor reads off the new slope by at most a tenth of that
// gap (the nanoseconds between the winner's read and its store); a table's
// own guard absorbs it.
func (c *systemClock) read() (*anchor, time.Duration) {
	m := c.monotonic()
	a := c.anchor.Load()
	if d := m - a.mono; d < anchorAge {
		return a, max(d, 0) // d < 0: a newer anchor than m; its own reading
	}
	return c.reanchor(a, m)
}

// monotonic reads the monotonic clock.
func (c *systemClock) monotonic() time.Duration {
	if c.mono == nil {
		return time.Since(c.start)
	}
	return c.mono()
}

// reanchor replaces anchor a, at least anchorAge old at monotonic time m,
// by one at m, with the wall clock's new offset, and returns the anchor to
// read m from and m's age past it: one caller wins and reads its new
// anchor, the others read the winner's.
func (c *systemClock) reanchor(a *anchor, m time.Duration) (*anchor, time.Duration) {
	d := m - a.mono
	w := c.wall().Round(0)
	at := a.after(d)
	n := &anchor{at: at, atNs: at.UnixNano(), mono: m}
	n.off = w.Sub(n.at)
	if !c.anchor.CompareAndSwap(a, n) {
		o := c.anchor.Load()
		return o, max(m-o.mono, 0)
	}
	if step := n.off - (a.off - a.slew(d)); step >= stepMin || step <= -stepMin {
		c.log.Warn("wall clock stepped; slewing to it", "step", step, "offset", n.off, "catch_up", slewDiv*max(n.off, -n.off))
	}
	return n, 0
}

func (*systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
