package main

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/sockio"
)

// capLogInterval is the least time between two log lines of one listener
// about its connection cap: a flood at the cap is one line a minute, with
// the count of the times in between, not one per connection.
const capLogInterval = time.Minute

// connLimiter is a net.Listener that holds at most max connections open at
// once, so that a flood of connections cannot take the descriptors the
// journal needs. Its connState must be the http.Server's ConnState hook: it
// tells which connections are idle keep-alive connections, between two
// requests.
//
// What happens at the cap: before it accepts the next connection, the
// listener closes the connection that has been idle the longest, if any
// (its client, at its next request, reconnects, as it must be ready to do
// whenever a server ends a keep-alive connection). When every connection is
// busy, Accept waits until one closes or goes idle, and new connections
// wait in the kernel's listen backlog (past it, the kernel drops their SYNs
// and the clients retry): back-pressure that costs no descriptor. Refusing
// instead (accept, then close) would spend a descriptor on each refusal at
// the worst moment and answer a reset, which clients take for a failure,
// not for "later". The listener cannot see whether a client is waiting
// without accepting it, so it makes room just before it accepts: at most
// one idle connection is closed ahead of need.
type connLimiter struct {
	net.Listener
	max   int
	name  string // the listener's name in logs and metrics
	log   *slog.Logger
	clock func() time.Time

	mu         sync.Mutex
	wake       *sync.Cond // signalled when a connection closes or goes idle, and at Close
	open       int        // connections accepted and not closed
	reserved   int        // slots taken by Accepts in progress
	idle       idleList   // the longest idle first
	closed     bool
	capReached int64
	idleClosed int64
	logged     time.Time // when the cap was last logged
	unlogged   int64     // times the cap was reached since
}

// limitConns wraps ln in a connLimiter of max connections named name, hooks
// it into srv (which must serve the returned listener) and exports its
// counts through metrics. With tlsConf the returned listener serves TLS
// only, over the capped connections; srv's handshake is then bounded by
// its read and write timeouts, as net/http bounds it.
func limitConns(ln net.Listener, srv *http.Server, max int, name string, log *slog.Logger, prom *metrics.Metrics, tlsConf *tls.Config) net.Listener {
	l := newConnLimiter(ln, max, name, log, time.Now)
	srv.ConnState = l.connState
	prom.ObserveConns(name, l.stats)
	if tlsConf == nil {
		return l
	}
	// srv's TLSConfig turns on HTTP/2 when tlsConf offers h2.
	srv.TLSConfig = tlsConf
	return tls.NewListener(l, tlsConf)
}

// newConnLimiter wraps ln so that it holds at most max connections open.
// clock is the time of the rate limit on its log lines.
func newConnLimiter(ln net.Listener, max int, name string, log *slog.Logger, clock func() time.Time) *connLimiter {
	l := &connLimiter{Listener: ln, max: max, name: name, log: log, clock: clock}
	l.wake = sync.NewCond(&l.mu)
	return l
}

// Accept waits for a free slot, making room at the cap as the type says,
// then accepts the next connection. A TCP connection reads and writes its
// socket by raw I/O (sockio.Wrap): about −8% of the daemon's CPU per GET
// /check_rate, measured as sockio's documentation says.
func (l *connLimiter) Accept() (net.Conn, error) {
	if err := l.acquire(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved--
	if err != nil {
		l.wake.Broadcast()
		return nil, err
	}
	l.open++
	return &limitedConn{Conn: sockio.Wrap(c), l: l}, nil
}

// acquire takes a slot for the next connection.
func (l *connLimiter) acquire() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	reached := false
	for !l.closed && l.open+l.reserved >= l.max {
		if !reached {
			reached = true
			l.capReached++
			l.noteCapLocked()
		}
		if c := l.idle.head; c != nil {
			l.idle.remove(c)
			l.idleClosed++
			l.mu.Unlock()
			_ = c.Close() // takes l.mu to free its slot
			l.mu.Lock()
			continue
		}
		l.wake.Wait()
	}
	if l.closed {
		return net.ErrClosed
	}
	l.reserved++
	return nil
}

// noteCapLocked logs that the cap was reached, at most once per
// capLogInterval, with the times it was reached since the last line.
func (l *connLimiter) noteCapLocked() {
	l.unlogged++
	now := l.clock()
	if !l.logged.IsZero() && now.Sub(l.logged) < capLogInterval {
		return
	}
	l.log.Warn("connection cap reached: closing idle keep-alive connections to make room, else holding new connections in the listen backlog",
		"listener", l.name, "max_conns", l.max, "open", l.open, "times", l.unlogged, "idle_closed_total", l.idleClosed,
		"next_report_after", capLogInterval)
	l.logged, l.unlogged = now, 0
}

// connState is the http.Server's ConnState hook: it keeps the list of idle
// connections.
func (l *connLimiter) connState(nc net.Conn, state http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn() // the server sees the TLS connection around ours
	}
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateIdle:
		if !c.idle && !c.released {
			l.idle.pushBack(c)
			l.wake.Broadcast()
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		l.idle.remove(c)
	}
}

// Close closes the listener and wakes an Accept waiting for a slot, which
// then returns net.ErrClosed. Open connections are not closed.
func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.wake.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// stats reports the listener's counts, for the metrics.
func (l *connLimiter) stats() metrics.ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return metrics.ConnStats{Open: int64(l.open), Max: int64(l.max), CapReached: l.capReached, IdleClosed: l.idleClosed}
}

// limitedConn is a connection of a connLimiter: closing it frees its slot.
// Conn is the accepted connection as sockio.Wrap returns it.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
	// Under l.mu: its links in l.idle, where it is while idle (a list
	// through the connections themselves, so that a request, which makes
	// its connection active and then idle, allocates nothing here).
	prev, next *limitedConn
	idle       bool
	released   bool
}

// idleList is a list of idle connections, linked through them.
type idleList struct{ head, tail *limitedConn }

// pushBack appends c, which is in no list.
func (q *idleList) pushBack(c *limitedConn) {
	c.prev, c.next, c.idle = q.tail, nil, true
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

// remove takes c out of q if it is in it.
func (q *idleList) remove(c *limitedConn) {
	if !c.idle {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next, c.idle = nil, nil, false
}

// Close closes the connection and frees its slot; only the first call
// does anything.
func (c *limitedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		err = c.Conn.Close()
		l := c.l
		l.mu.Lock()
		l.idle.remove(c)
		c.released = true
		l.open--
		l.wake.Broadcast()
		l.mu.Unlock()
	})
	return err
}

// CloseWrite half-closes a TCP connection, as net/http does before closing
// one it answered with an error, so the client reads the answer before the
// reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the TCP connection's ReadFrom (sendfile, splice) for
// net/http's copies.
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
