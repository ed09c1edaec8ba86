//go:build linux

package resp

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ratelimitd/ratelimitd/api/sockio"
)

// The event loops. A loop serves many connections from one goroutine:
// it waits for them in an epoll set of its own (level-triggered), and for
// each one ready reads once, answers the whole frames read (their checks
// in one pass, as on the goroutine path) and writes the replies, before it
// waits again. Against a goroutine per connection, a request so costs one
// read instead of two (the second, which finds nothing, is what a
// goroutine needs before it may park), and no park, wake-up or poller
// round of the runtime: the wait is amortized over every connection ready
// at once. A loop decides checks itself, so a check that waits stalls
// every connection of its loop: Options.ConnGoroutines is for a Checker
// whose checks may wait on the network.
//
// A loop owns its connections' descriptors: only it reads, writes and
// closes them. Other goroutines (Shutdown, Close) shut a socket down,
// under the connection's mutex while the descriptor is open, and wake the
// loop, which then closes it. The timeouts are kept by the loop: at each
// tick it closes the connections past their read, idle, write or linger
// deadline.

// loop is one event loop and the connections it serves.
type loop struct {
	srv  *Server
	epfd int // its epoll set, non-blocking
	efd  int // an eventfd in the set, by which other goroutines wake it
	// file is the set as a file of the runtime's poller, which wait waits
	// on through rc: readable when an event is ready.
	file  *os.File
	rc    syscall.RawConn
	armed time.Time // file's read deadline
	got   int       // what look found
	// lookFn is look, bound once: a method value made per wait escapes.
	lookFn func(fd uintptr) bool

	// adds are the connections handed over and not yet in the set, under
	// srv.mu.
	adds []*frameConn
	// asked is set when a connection asks to be closed or drained.
	asked atomic.Bool
	done  chan struct{} // closed when run returns

	conns  map[int]*frameConn // by descriptor; the loop's own
	events []syscall.EpollEvent
	now    time.Time // read once per wait
	tick   time.Duration
	next   time.Time // the next scan for timeouts
	sink   []byte    // what a lingering close reads away
}

// startLoops starts n event loops; none if the system refuses one (the
// connections are then served by goroutines).
func (s *Server) startLoops(n int) []*loop {
	var loops []*loop
	for range n {
		lp, err := newLoop(s)
		if err != nil {
			s.log.Warn("resp: no event loop; serving each connection on a goroutine", "err", err)
			for _, l := range loops {
				l.closeFDs()
			}
			return nil
		}
		loops = append(loops, lp)
	}
	for _, lp := range loops {
		go lp.run()
	}
	return loops
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		_ = syscall.Close(epfd)
		return nil, e
	}
	lp := &loop{srv: s, epfd: epfd, efd: int(r), conns: make(map[int]*frameConn), events: make([]syscall.EpollEvent, 256), done: make(chan struct{})}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		lp.closeFDs()
		return nil, err
	}
	lp.file = os.NewFile(uintptr(epfd), "epoll")
	lp.lookFn = lp.look
	if lp.rc, err = lp.file.SyscallConn(); err != nil {
		lp.closeFDs()
		return nil, err
	}
	if err := lp.ctl(syscall.EPOLL_CTL_ADD, lp.efd, syscall.EPOLLIN); err != nil {
		lp.closeFDs()
		return nil, err
	}
	// A scan for timeouts a few times within the shortest one, at most
	// every 250 ms: a connection outlives its deadline by less than that.
	lp.tick = 250 * time.Millisecond
	for _, d := range []time.Duration{s.opts.ReadTimeout, s.opts.IdleTimeout, s.opts.WriteTimeout, lingerTime} {
		if d > 0 {
			lp.tick = min(lp.tick, max(d/5, time.Millisecond))
		}
	}
	return lp, nil
}

func (lp *loop) closeFDs() {
	_ = syscall.Close(lp.efd)
	if lp.file != nil {
		_ = lp.file.Close()
	} else {
		_ = syscall.Close(lp.epfd)
	}
}

func (lp *loop) ctl(op, fd int, events uint32) error {
	ev := syscall.EpollEvent{Events: events, Fd: int32(fd)}
	return syscall.EpollCtl(lp.epfd, op, fd, &ev)
}

// ask makes the loop look at its connections' requests (closing,
// draining): woken scans them only then, not at every connection added.
func (lp *loop) ask() {
	lp.asked.Store(true)
	lp.wake()
}

// ended is closed once the loop has ended, its descriptors closed.
func (lp *loop) ended() <-chan struct{} { return lp.done }

// wake makes the loop look at its adds.
func (lp *loop) wake() {
	one := uint64(1)
	_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(lp.efd), uintptr(unsafe.Pointer(&one)), 8)
}

// detach takes nc's descriptor for a loop: a duplicate, the connection
// itself closed, so that the runtime's poller forgets it. It returns -1
// when nc is not a plain TCP connection.
func detach(nc net.Conn) int {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return -1
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if err := rc.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e == 0 {
			fd = int(r)
		}
	}); err != nil || fd < 0 {
		return -1
	}
	_ = tc.Close()
	return fd
}

// handOver gives c to one of the loops, round robin. s.mu is held.
func (s *Server) handOver(c *frameConn) {
	lp := s.loops[s.nextLoop%uint64(len(s.loops))]
	s.nextLoop++
	c.lp = lp
	lp.adds = append(lp.adds, c)
	lp.wake()
}

// run serves the loop's connections until the server closes and none is
// left.
func (lp *loop) run() {
	defer close(lp.done)
	s := lp.srv
	lp.now = time.Now()
	lp.next = lp.now.Add(lp.tick)
	for {
		n := lp.wait()
		lp.now = time.Now()
		for i := range n {
			ev := &lp.events[i]
			fd := int(ev.Fd)
			if fd == lp.efd {
				lp.woken()
				continue
			}
			if c := lp.conns[fd]; c != nil {
				lp.ready(c, ev.Events)
			}
		}
		if !lp.now.Before(lp.next) {
			lp.scan()
			lp.next = lp.now.Add(lp.tick)
		}
		s.mu.Lock()
		done := s.isClosed && len(lp.conns) == 0 && len(lp.adds) == 0
		s.mu.Unlock()
		if done {
			lp.closeFDs()
			return
		}
	}
}

// wait returns how many events it put in lp.events: at once when some are
// ready, else once one is, or at the next tick (then 0). The loop waits
// as any goroutine waits for a socket, in the runtime's poller, where its
// epoll set is registered: no thread blocks in epoll_wait, and a look
// that finds events costs the scheduler nothing.
func (lp *loop) wait() int {
	if !lp.armed.Equal(lp.next) {
		_ = lp.file.SetReadDeadline(lp.next)
		lp.armed = lp.next
	}
	lp.got = 0
	if err := lp.rc.Read(lp.lookFn); err != nil {
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			lp.srv.log.Error("resp: an event loop's wait failed", "err", err)
			time.Sleep(time.Millisecond)
		}
		return 0
	}
	return lp.got
}

// look is the loop's epoll_wait, without waiting: it reports whether it
// found events (lp.got of them), or failed; the poller waits otherwise.
func (lp *loop) look(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&lp.events[0])), uintptr(len(lp.events)), 0, 0, 0)
		switch e {
		case 0:
			lp.got = int(r)
			return r > 0
		case syscall.EINTR:
			continue
		}
		lp.srv.log.Error("resp: epoll_wait failed", "err", e)
		return true
	}
}

// woken takes the connections handed over into the set, and closes those
// Close or Shutdown asked to.
func (lp *loop) woken() {
	var v uint64
	_, _, _ = syscall.RawSyscall(syscall.SYS_READ, uintptr(lp.efd), uintptr(unsafe.Pointer(&v)), 8)
	s := lp.srv
	s.mu.Lock()
	adds := lp.adds
	lp.adds = nil
	s.mu.Unlock()
	for _, c := range adds {
		c.lastActive = lp.now
		lp.conns[c.fd] = c
		if err := lp.ctl(syscall.EPOLL_CTL_ADD, c.fd, syscall.EPOLLIN|syscall.EPOLLRDHUP); err != nil {
			s.log.Warn("resp: epoll_ctl failed; closing the connection", "err", err)
			lp.close(c)
		}
	}
	if !lp.asked.Swap(false) {
		return
	}
	for _, c := range lp.conns {
		c.mu.Lock()
		closing, draining := c.closing, c.draining
		c.mu.Unlock()
		switch {
		case closing:
			lp.close(c)
		case draining:
			lp.settle(c)
		}
	}
}

// ready serves a connection the set reported.
func (lp *loop) ready(c *frameConn, events uint32) {
	switch {
	case c.lingering:
		lp.linger(c)
	case len(c.pend) > 0:
		if events&(syscall.EPOLLOUT|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
			lp.writable(c)
		}
	default:
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			lp.close(c)
			return
		}
		c.busy, c.quiet = true, false
		c.mu.Unlock()
		lp.serve(c)
		c.mu.Lock()
		c.busy = false
		c.mu.Unlock()
		lp.settle(c)
	}
}

// serve answers what one read of c brings: its whole frames, as
// serveConn does, then waits for the next readiness (level-triggered, the
// set reports again what this read left).
func (lp *loop) serve(c *frameConn) {
	s := lp.srv
	c.didRead = false
	for c.after == afterNone {
		frames, err := c.frames()
		if err == errWouldBlock {
			return
		}
		if err != nil {
			if c.after == afterNone {
				c.after = afterClose
				if c.drainEOF {
					c.after = afterLinger // the client may be sending: see settle
				}
			}
			return
		}
		more := s.serveFrames(c, c.st, frames)
		c.consume(len(frames))
		c.lastActive = lp.now
		if err := c.flushOut(); err != nil {
			lp.close(c)
			return
		}
		if !more {
			c.after = afterLinger // QUIT, or an inline command that does not parse
		}
		if len(c.pend) > 0 {
			return // back-pressure: nothing more is read until it is written
		}
	}
}

// settle does what c's state calls for once it is not being served: wait
// for room for its replies, linger, close, or go on reading.
func (lp *loop) settle(c *frameConn) {
	if c.fd < 0 || c.lingering {
		return
	}
	c.mu.Lock()
	draining := c.draining
	c.mu.Unlock()
	if draining && c.after == afterNone {
		// Every whole frame read is answered: what is left is a partial
		// one, or nothing. Closing a socket with unread input resets the
		// connection and drops what the client has yet to receive: the
		// connection lingers instead.
		c.after = afterLinger
	}
	if len(c.pend) > 0 {
		c.mu.Lock()
		c.quiet, c.held = false, true
		c.mu.Unlock()
		if !c.watchOut {
			c.watchOut = true
			if err := lp.ctl(syscall.EPOLL_CTL_MOD, c.fd, syscall.EPOLLOUT); err != nil {
				lp.close(c)
			}
		}
		return
	}
	if c.watchOut {
		c.mu.Lock()
		c.held = false
		c.mu.Unlock()
		c.watchOut = false
		if err := lp.ctl(syscall.EPOLL_CTL_MOD, c.fd, syscall.EPOLLIN|syscall.EPOLLRDHUP); err != nil {
			lp.close(c)
			return
		}
	}
	switch c.after {
	case afterClose:
		lp.close(c)
	case afterLinger:
		_ = syscall.Shutdown(c.fd, syscall.SHUT_WR)
		c.lingering, c.lingerLeft, c.lingerUntil = true, lingerBytes, lp.now.Add(lingerTime)
		lp.linger(c)
	default:
		c.setQuiet(true) // waiting for input
	}
}

// setQuiet records whether drain may shut c down at once.
func (c *frameConn) setQuiet(q bool) {
	c.mu.Lock()
	c.quiet = q
	c.mu.Unlock()
}

// writable writes what c's socket did not take before.
func (lp *loop) writable(c *frameConn) {
	n, err := writeSome(c.fd, c.pend)
	if err != nil {
		lp.close(c)
		return
	}
	c.pend = c.pend[:copy(c.pend, c.pend[n:])]
	if len(c.pend) == 0 {
		if cap(c.pend) > maxKeptOut {
			c.pend = nil
		}
		c.pendSince = time.Time{}
	}
	lp.settle(c)
}

// linger reads away what the client of a connection closing with its
// side shut still sends: closing a socket with unread input resets the
// connection, and the client loses what it has not yet received. It
// closes the connection once the client closes its side, or once the
// client has acknowledged every byte sent to it (scan looks again at each
// tick), or after lingerTime. After lingerBytes it reads no more: a reset
// then costs the client nothing once it has every byte.
func (lp *loop) linger(c *frameConn) {
	if lp.sink == nil {
		lp.sink = make([]byte, readChunk)
	}
	for c.lingerLeft > 0 {
		n, err := readSome(c.fd, lp.sink)
		if err == errWouldBlock {
			if unacked(c.fd) == 0 {
				lp.close(c) // nothing unread, nothing unreceived: a clean close
			}
			return
		}
		if err != nil || n == 0 {
			lp.close(c)
			return
		}
		c.lingerLeft -= n
	}
	if unacked(c.fd) == 0 {
		lp.close(c)
		return
	}
	// Input left unread would be reported again and again: wait for
	// nothing but an error or a hang-up.
	if err := lp.ctl(syscall.EPOLL_CTL_MOD, c.fd, 0); err != nil {
		lp.close(c)
	}
}

// unacked returns how many bytes sent on fd its peer has not acknowledged;
// 0 if that cannot be told.
func unacked(fd int) int {
	n, _ := sockio.UnackedFD(fd)
	return n
}

// scan closes the connections past a deadline.
func (lp *loop) scan() {
	o := &lp.srv.opts
	for _, c := range lp.conns {
		switch {
		case c.lingering:
			if !lp.now.Before(c.lingerUntil) || unacked(c.fd) == 0 {
				lp.close(c)
			}
		case len(c.pend) > 0:
			if lp.now.Sub(c.pendSince) >= o.WriteTimeout {
				lp.close(c)
			}
		case c.sc.mid() || c.w > c.r:
			if lp.now.Sub(c.frameStart) >= o.ReadTimeout {
				lp.srv.obs.Conn(ConnTimedOut)
				lp.close(c)
			}
		case o.IdleTimeout > 0 && lp.now.Sub(c.lastActive) >= o.IdleTimeout:
			lp.srv.obs.Conn(ConnTimedOut)
			lp.close(c)
		}
	}
}

// close closes c's descriptor, which takes it out of the set, and forgets c.
func (lp *loop) close(c *frameConn) {
	if c.fd < 0 {
		return
	}
	fd := c.fd
	c.mu.Lock()
	c.fd, c.closed = -1, true
	c.mu.Unlock()
	_ = syscall.Close(fd)
	delete(lp.conns, fd)
	clear(c.st.args)
	lp.srv.forget(c)
}

// readNow is readSocket on a loop: one read per readiness; errWouldBlock
// when it was made, or finds nothing.
func (c *frameConn) readNow(b []byte) (int, error) {
	c.mu.Lock()
	draining := c.draining
	c.mu.Unlock()
	if draining {
		c.drainEOF = true
		return 0, io.EOF
	}
	if c.didRead {
		return 0, errWouldBlock
	}
	c.didRead = true
	n, err := readSome(c.fd, b)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

// writeNow is Write on a loop: what the socket does not take at once
// waits in pend, written when it has room (within WriteTimeout).
func (c *frameConn) writeNow(p []byte) (int, error) {
	if len(c.pend) > 0 {
		c.pend = append(c.pend, p...)
		return len(p), nil
	}
	n, err := writeSome(c.fd, p)
	if err != nil {
		return n, err
	}
	if n < len(p) {
		c.pend = append(c.pend[:0], p[n:]...)
		c.pendSince = c.lp.now
	}
	return len(p), nil
}

// shutdown shuts c's socket down, if it is open, for drain (how
// SHUT_WR: the client reads its replies to the end) or Close (SHUT_RDWR)
// from another goroutine, and wakes its loop to close it. c.mu is held.
func (c *frameConn) shutdown(how int) {
	if c.fd >= 0 {
		_ = syscall.Shutdown(c.fd, how)
	}
	c.lp.ask()
}

// readSome reads what fd holds into b: errWouldBlock when nothing.
func readSome(fd int, b []byte) (int, error) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		switch e {
		case 0:
			return int(r), nil
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, errWouldBlock
		}
		return 0, e
	}
}

// writeSome writes what fd takes of b without waiting.
func writeSome(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
		switch e {
		case 0:
			n += int(r)
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return n, nil
		}
		return n, e
	}
	return n, nil
}

// defaultLoops is how many event loops a server runs: one per processor.
func defaultLoops() int { return runtime.GOMAXPROCS(0) }

// The ways of shutting a loop's socket down (shutdown).
const (
	shutWrite = syscall.SHUT_WR
	shutBoth  = syscall.SHUT_RDWR
)
