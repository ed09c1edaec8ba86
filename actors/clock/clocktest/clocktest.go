// Package clocktest provides a manual clock.Clock for tests: time stands
// still until the test advances it, and timers fire synchronously, in order,
// inside Advance.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock"
)

// Manual is a clock.Clock moved only by Advance. It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	armed  *sync.Cond // signalled whenever a timer is scheduled
	now    time.Time
	seq    int
	timers []*timer
}

var _ clock.Clock = (*Manual)(nil)

// New returns a Manual clock reading start.
func New(start time.Time) *Manual {
	m := &Manual{now: start}
	m.armed = sync.NewCond(&m.mu)
	return m
}

type timer struct {
	m   *Manual
	at  time.Time
	seq int
	f   func()
}

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc schedules f to run inside the Advance that reaches now+d.
func (m *Manual) AfterFunc(d time.Duration, f func()) clock.Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &timer{m: m, at: m.now.Add(d), seq: m.seq, f: f}
	m.timers = append(m.timers, t)
	m.armed.Broadcast()
	return t
}

// Stop cancels the timer; it reports whether the timer was still pending.
func (t *timer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	for i, o := range t.m.timers {
		if o == t {
			t.m.timers = append(t.m.timers[:i], t.m.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Pending returns the number of timers not yet fired or stopped.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// BlockUntil waits until at least n timers are pending.
func (m *Manual) BlockUntil(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.timers) < n {
		m.armed.Wait()
	}
}

// Advance moves the clock forward by d, firing every timer that falls due,
// earliest first, each with the clock set to its due time. Timers scheduled by
// a firing timer fire too if they fall due within d.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	end := m.now.Add(d)
	for {
		sort.Slice(m.timers, func(i, j int) bool {
			a, b := m.timers[i], m.timers[j]
			return a.at.Before(b.at) || a.at.Equal(b.at) && a.seq < b.seq
		})
		if len(m.timers) == 0 || m.timers[0].at.After(end) {
			break
		}
		t := m.timers[0]
		m.timers = m.timers[1:]
		m.now = t.at
		m.mu.Unlock()
		t.f()
		m.mu.Lock()
	}
	m.now = end
	m.mu.Unlock()
}
