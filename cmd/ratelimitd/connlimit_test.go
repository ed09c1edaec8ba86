package main

import (
	"errors"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// limiterUnderTest is a connLimiter on a loopback listener, with a goroutine
// that accepts from it as http.Server.Serve does.
type limiterUnderTest struct {
	t         *testing.T
	l         *connLimiter
	accepted  chan net.Conn
	acceptErr chan error
	logs      *lockedBuffer

	mu  sync.Mutex
	now time.Time
}

func startLimiter(t *testing.T, max int) *limiterUnderTest {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &limiterUnderTest{t: t, accepted: make(chan net.Conn, 16), acceptErr: make(chan error, 1), logs: &lockedBuffer{}, now: time.Unix(1_800_000_000, 0)}
	u.l = newConnLimiter(ln, max, "test", slog.New(slog.NewTextHandler(u.logs, nil)), u.clock)
	go func() {
		for {
			c, err := u.l.Accept()
			if err != nil {
				u.acceptErr <- err
				return
			}
			u.accepted <- c
		}
	}()
	t.Cleanup(func() { u.l.Close() })
	return u
}

func (u *limiterUnderTest) clock() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.now
}

func (u *limiterUnderTest) advance(d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.now = u.now.Add(d)
}

// dial connects a client; at the cap the connection waits in the backlog.
func (u *limiterUnderTest) dial() net.Conn {
	u.t.Helper()
	c, err := net.DialTimeout("tcp", u.l.Addr().String(), 5*time.Second)
	if err != nil {
		u.t.Fatal(err)
	}
	u.t.Cleanup(func() { c.Close() })
	return c
}

// next returns the next connection accepted, waiting at most 10 s.
func (u *limiterUnderTest) next() net.Conn {
	u.t.Helper()
	select {
	case c := <-u.accepted:
		u.t.Cleanup(func() { c.Close() })
		return c
	case err := <-u.acceptErr:
		u.t.Fatalf("Accept: %v", err)
	case <-time.After(10 * time.Second):
		u.t.Fatal("no connection accepted within 10s")
	}
	return nil
}

// none asserts that nothing more was accepted.
func (u *limiterUnderTest) none(why string) {
	u.t.Helper()
	select {
	case <-u.accepted:
		u.t.Fatalf("a connection was accepted %s", why)
	default:
	}
}

// waitFor polls the limiter's stats until ok, at most 10 s.
func (u *limiterUnderTest) waitFor(what string, ok func(metrics.ConnStats) bool) {
	u.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := u.l.stats()
		if ok(s) {
			return
		}
		if time.Now().After(deadline) {
			u.t.Fatalf("%s: not reached within 10s; stats %+v", what, s)
		}
		<-time.After(time.Millisecond) // a poll interval, not synchronization
	}
}

// want asserts the limiter's exact counts.
func (u *limiterUnderTest) want(step string, want metrics.ConnStats) {
	u.t.Helper()
	if got := u.l.stats(); got != want {
		u.t.Fatalf("%s: got stats %+v, want %+v", step, got, want)
	}
}

// assertClosedByServer asserts that the server closed the client's
// connection c.
func assertClosedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("%s: client read got %d bytes, %v; want EOF (closed by the server)", what, n, err)
	}
}

// TestConnLimiterBlocksAtCap: with every connection busy, Accept waits at
// the cap (the new connection waits in the backlog) until one closes.
func TestConnLimiterBlocksAtCap(t *testing.T) {
	t.Parallel()
	u := startLimiter(t, 2)
	u.dial()
	u.dial()
	a, b := u.next(), u.next()
	u.waitFor("the cap reached", func(s metrics.ConnStats) bool { return s.CapReached == 1 })
	u.want("two open", metrics.ConnStats{Open: 2, Max: 2, CapReached: 1})
	u.dial() // completes in the backlog
	u.none("at the cap with no idle connection")

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := u.next()
	u.waitFor("the cap reached again", func(s metrics.ConnStats) bool { return s.CapReached == 2 })
	u.want("after a close", metrics.ConnStats{Open: 2, Max: 2, CapReached: 2})
	// Closing twice frees one slot, not two.
	if err := b.Close(); err == nil {
		t.Error("a second Close returned no error")
	}
	u.want("after a second Close", metrics.ConnStats{Open: 2, Max: 2, CapReached: 2})
	_ = a.Close()
	_ = c.Close()
	u.waitFor("all closed", func(s metrics.ConnStats) bool { return s.Open == 0 })
}

// TestConnLimiterClosesIdle: at the cap, the longest-idle keep-alive
// connection is closed to make room; one that went idle and then active
// again is not, nor a busy or hijacked one.
func TestConnLimiterClosesIdle(t *testing.T) {
	t.Parallel()
	u := startLimiter(t, 3)
	ca := u.dial()
	a := u.next()
	cb := u.dial()
	b := u.next()
	// Below the cap nothing is closed: b goes idle, then a.
	u.l.connState(b, http.StateIdle)
	u.l.connState(a, http.StateIdle)
	u.want("two idle below the cap", metrics.ConnStats{Open: 2, Max: 3})

	// The third connection reaches the cap: b, idle the longest, goes.
	cc := u.dial()
	c := u.next()
	assertClosedByServer(t, cb, "the longest-idle connection")
	u.waitFor("b closed", func(s metrics.ConnStats) bool { return s.IdleClosed == 1 && s.Open == 2 })
	u.want("after b", metrics.ConnStats{Open: 2, Max: 3, CapReached: 1, IdleClosed: 1})
	assertOpen(t, ca, "a, idle, but not the longest")

	// The next one reaches it again: a, the only idle one, goes.
	u.dial()
	d := u.next()
	assertClosedByServer(t, ca, "the next idle connection")
	u.waitFor("a closed", func(s metrics.ConnStats) bool { return s.IdleClosed == 2 && s.Open == 2 })

	// c goes idle and active again below the cap; at the cap nothing is
	// idle, so Accept waits.
	u.l.connState(c, http.StateIdle)
	u.l.connState(c, http.StateActive)
	u.dial()
	u.next()
	u.waitFor("the cap reached a third time", func(s metrics.ConnStats) bool { return s.CapReached == 3 })
	u.dial()
	u.none("at the cap with no idle connection")
	u.want("three busy", metrics.ConnStats{Open: 3, Max: 3, CapReached: 3, IdleClosed: 2})
	assertOpen(t, cc, "c, idle and then active again")

	// A hijacked connection frees its slot when its new owner closes it.
	u.l.connState(d, http.StateHijacked)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	u.next()
	u.waitFor("the cap reached a fourth time", func(s metrics.ConnStats) bool { return s.CapReached == 4 })
	u.want("after the hijacked one closed", metrics.ConnStats{Open: 3, Max: 3, CapReached: 4, IdleClosed: 2})
}

// assertOpen asserts that the server has not closed the client's connection
// c (a read finds no data and no EOF before a short deadline).
func assertOpen(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: client read got %v, want a timeout (the connection still open)", what, err)
	}
	_ = c.SetReadDeadline(time.Time{})
}

// TestConnLimiterCloseWakesAccept: Close ends an Accept waiting at the cap.
func TestConnLimiterCloseWakesAccept(t *testing.T) {
	t.Parallel()
	u := startLimiter(t, 1)
	u.dial()
	u.next()
	u.waitFor("the cap reached", func(s metrics.ConnStats) bool { return s.CapReached == 1 })
	if err := u.l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-u.acceptErr:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: got %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits 10s after Close")
	}
}

// TestConnLimiterLog: reaching the cap is logged at once, then at most once
// per capLogInterval, with the times in between.
func TestConnLimiterLog(t *testing.T) {
	t.Parallel()
	u := startLimiter(t, 1)
	capLines := func() []logRecord {
		var recs []logRecord
		for _, line := range strings.Split(strings.TrimSpace(u.logs.String()), "\n") {
			if rec, err := parseLogLine(line); err == nil && strings.HasPrefix(rec["msg"], "connection cap reached") {
				recs = append(recs, rec)
			}
		}
		return recs
	}
	u.dial()
	c := u.next()
	for i := range 3 {
		u.waitFor("the cap reached", func(s metrics.ConnStats) bool { return s.CapReached == int64(i+1) })
		if i == 1 {
			u.advance(capLogInterval - time.Second)
		}
		if i == 2 {
			u.advance(time.Second)
		}
		u.l.connState(c, http.StateIdle) // closed at once to make room
		u.dial()
		c = u.next()
	}
	u.waitFor("the cap reached a fourth time", func(s metrics.ConnStats) bool { return s.CapReached == 4 })
	recs := capLines()
	if len(recs) != 2 {
		t.Fatalf("got %d cap log lines, want 2 (the first, then one a minute later); logs:\n%s", len(recs), u.logs)
	}
	if recs[0]["times"] != "1" || recs[1]["times"] != "3" || recs[1]["listener"] != "test" || recs[1]["max_conns"] != "1" || recs[1]["idle_closed_total"] != "3" {
		t.Errorf("got cap lines %v, want times 1 then 3, listener test, max_conns 1, idle_closed_total 3 at the second", recs)
	}
}

// TestIdleList: connections leave the idle list from anywhere in it, the
// longest idle stays first, and taking out one that is not in it changes
// nothing.
func TestIdleList(t *testing.T) {
	t.Parallel()
	var q idleList
	a, b, c, d := &limitedConn{}, &limitedConn{}, &limitedConn{}, &limitedConn{}
	names := map[*limitedConn]string{a: "a", b: "b", c: "c", d: "d"}
	order := func() string {
		var s, back []string
		for x := q.head; x != nil; x = x.next {
			s = append(s, names[x])
		}
		for x := q.tail; x != nil; x = x.prev {
			back = append([]string{names[x]}, back...)
		}
		if strings.Join(s, "") != strings.Join(back, "") {
			t.Fatalf("forward %v, backward %v", s, back)
		}
		return strings.Join(s, "")
	}
	for _, step := range []struct {
		do   func()
		want string
	}{
		{func() { q.pushBack(a); q.pushBack(b); q.pushBack(c) }, "abc"},
		{func() { q.remove(b) }, "ac"},
		{func() { q.remove(b); q.remove(d) }, "ac"},
		{func() { q.pushBack(b) }, "acb"},
		{func() { q.remove(a) }, "cb"},
		{func() { q.remove(b) }, "c"},
		{func() { q.remove(c) }, ""},
		{func() { q.pushBack(d) }, "d"},
	} {
		step.do()
		if got := order(); got != step.want {
			t.Fatalf("got %q, want %q", got, step.want)
		}
	}
	if a.idle || b.idle || c.idle || !d.idle {
		t.Fatalf("idle flags a %v b %v c %v d %v, want only d", a.idle, b.idle, c.idle, d.idle)
	}
}

// TestConnLimiterRequestAllocatesNothing: a request turns its connection
// active and then idle again; the limiter allocates nothing for it.
// (AllocsPerRun refuses to run in parallel.)
func TestConnLimiterRequestAllocatesNothing(t *testing.T) {
	u := startLimiter(t, 4)
	u.dial()
	c := u.next()
	u.l.connState(c, http.StateIdle)
	if n := testing.AllocsPerRun(100, func() {
		u.l.connState(c, http.StateActive)
		u.l.connState(c, http.StateIdle)
	}); n != 0 {
		t.Errorf("a request's two state changes: %v allocations, want 0", n)
	}
	u.want("one idle connection", metrics.ConnStats{Open: 1, Max: 4})
}
