package resp

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/api/sockio"
)

// readChunk is the most bytes a connection reads from its socket at once,
// and the size of its read buffer while no frame is longer.
const readChunk = 4096

// maxKeptOut is the most room a connection keeps for its replies between
// reads; a larger buffer, grown for a long pipeline or a long reply, is let
// go once written.
const maxKeptOut = 8 << 10

// After its replies are written, what becomes of a loop's connection.
const (
	afterNone   = iota
	afterClose  // it closes
	afterLinger // it shuts its side and reads away what the client still sends (see fail)
)

// errWouldBlock is a loop's read finding nothing: the connection waits
// for the next readiness.
var errWouldBlock = errors.New("resp: would block")

// frameConn is a client connection. It reads the socket into its own
// buffer and hands the server whole frames in place (frames), which the
// server parses with redcon.ReadNextCommand into arguments that point into
// that buffer: no command is copied and nothing is allocated per command.
// It enforces the argument count, bulk size and inline length limits and
// the read and idle timeouts as the bytes arrive, answers a violation with
// a Redis protocol error and then fails, which closes the connection. A
// frame longer than the buffer grows it (the limits bound a frame), and
// the buffer goes back to readChunk once that frame is served. It also lets
// the server drain the connection: a read after Shutdown began returns
// io.EOF, and a read already waiting is woken to return it. Its socket is
// read and written through rw: on Linux, a plain TCP connection's raw I/O
// (sockio.Socket). The replies of a read wait in out until flushOut.
type frameConn struct {
	// nc is the connection: read only through frames (the scanner), written
	// through Write (the write timeout).
	nc  net.Conn
	srv *Server
	sc  scanner

	buf  []byte
	r, w int // buf[r:w] is read from the socket and not yet served
	cut  int // buf[r:cut] holds whole frames; cut ≤ r when none
	out  []byte

	// err, once set, is returned after the whole frames before it are
	// served; a protocol error is answered first (perr).
	err  error
	perr *protoError
	// frameStart is when the first byte of the unfinished frame arrived.
	frameStart time.Time
	// want is the read deadline the connection's state calls for, armed
	// the one set on the socket (see readSocket); both under mu.
	want, armed time.Time
	// tc is the TLS connection until its handshake is done, else nil.
	tc *tls.Conn
	// rw reads and writes the socket: the connection itself, or its raw
	// I/O (sockio.Open), then also sock.
	rw   io.ReadWriter
	sock *sockio.Socket

	// lp is the event loop serving the connection, nil on the goroutine
	// path. The fields from fd to lingerUntil are the loop goroutine's
	// alone (loop_linux.go), but lingering, which lingerClose uses too.
	lp          *loop
	fd          int // the socket's descriptor, -1 once closed
	st          *session
	pend        []byte    // replies the socket has not taken yet
	pendSince   time.Time // when the first of them waited
	lastActive  time.Time // when the last frames were answered, or it was opened
	didRead     bool      // the one read of this readiness is made
	drainEOF    bool      // a read ended because the server drains
	after       int       // what becomes of it once its replies are written
	watchOut    bool      // its loop waits for room, not for input
	lingering   bool      // its lingering close has begun (on a goroutine too)
	lingerLeft  int
	lingerUntil time.Time

	mu       sync.Mutex
	reading  bool // blocked in a socket read
	draining bool
	closed   bool
	// Of a loop's connection: busy while it is served; quiet while it is
	// not and no reply waits, when drain may shut it at once; held while
	// replies wait for room; closing once Close asked its loop to close it.
	busy, quiet, held, closing bool
}

// newFrameConn wraps nc; with loop, for an event loop when nc is a plain
// TCP connection (its descriptor detached from nc, which is closed).
func newFrameConn(nc net.Conn, s *Server, loop bool) *frameConn {
	c := &frameConn{nc: nc, srv: s, buf: make([]byte, readChunk), fd: -1}
	c.sc = scanner{maxArgs: int64(s.opts.MaxArgs), maxBulk: int64(s.opts.MaxBulk), maxInline: int64(s.opts.MaxInline)}
	if loop {
		if c.fd = detach(nc); c.fd >= 0 {
			c.st = s.newSession(nc.RemoteAddr())
			c.quiet = true
			return c
		}
	}
	c.tc, _ = nc.(*tls.Conn)
	c.rw = nc
	if sock, ok := sockio.Open(nc); ok {
		c.rw, c.sock = sock, sock
	}
	return c
}

// frames returns the whole frames read and not yet consumed, reading the
// socket until there is at least one. They stay valid, and in place, until
// consume. Once no whole frame is left before a fault, it answers a
// protocol error (once) and returns the error that ends the connection.
func (c *frameConn) frames() ([]byte, error) {
	for {
		if c.cut > c.r {
			return c.buf[c.r:c.cut], nil
		}
		if c.err != nil {
			return nil, c.fail()
		}
		if c.w == len(c.buf) {
			if c.r == 0 {
				// One frame longer than the buffer: room for the rest of it.
				// The scanner has bounded it by the limits, so this stops.
				nb := make([]byte, 2*len(c.buf))
				copy(nb, c.buf[:c.w])
				c.buf = nb
			} else {
				c.w = copy(c.buf, c.buf[c.r:c.w])
				c.cut -= c.r
				c.r = 0
			}
		}
		n, err := c.readSocket(c.buf[c.w:])
		if err == errWouldBlock {
			return nil, err
		}
		if n > 0 {
			wasMid := c.sc.mid()
			end, perr := c.sc.scan(c.buf[c.w : c.w+n])
			if end >= 0 {
				c.cut = c.w + end
			}
			if c.sc.mid() && (!wasMid || end >= 0) {
				c.frameStart = time.Now()
			}
			if perr != nil {
				// Serve the whole frames before the fault; drop the rest.
				c.perr, _ = perr.(*protoError)
				c.err = perr
				c.w = max(c.cut, c.r)
				continue
			}
			c.w += n
		}
		if err != nil && c.err == nil {
			c.err = err
		}
	}
}

// consume marks the first n bytes of frames served. A buffer grown for a
// long frame is let go once empty.
func (c *frameConn) consume(n int) {
	c.r += n
	if c.r == c.w {
		c.r, c.w, c.cut = 0, 0, 0
		if len(c.buf) > readChunk {
			c.buf = make([]byte, readChunk)
		}
	}
}

// queue adds b to the replies waiting to be written.
func (c *frameConn) queue(b []byte) { c.out = append(c.out, b...) }

// flushOut writes the replies waiting, in one write.
func (c *frameConn) flushOut() error {
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.Write(c.out)
	c.out = c.out[:0]
	if cap(c.out) > maxKeptOut {
		c.out = nil
	}
	return err
}

// Bounds of the lingering close after a protocol error.
const (
	lingerBytes = 256 << 10
	lingerTime  = time.Second
)

// fail answers a protocol error, once, and returns the error that ends the
// connection. After the answer it shuts its side and reads away, within
// bounds, what the client is still sending: closing a socket with unread
// input resets the connection, and the client would lose the answer.
func (c *frameConn) fail() error {
	if c.perr != nil {
		_, _ = c.Write([]byte("-ERR " + c.perr.Error() + "\r\n"))
		c.srv.obs.Conn(ConnProtocolError)
		c.perr = nil
		if c.lp != nil {
			c.after = afterLinger // its loop lingers once the answer is written
			return c.err
		}
		c.lingerClose()
	}
	return c.err
}

// lingerPoll is how often a lingering close on a goroutine looks whether
// the client has acknowledged every byte sent to it.
const lingerPoll = 10 * time.Millisecond

// lingerClose begins the close of a connection served on a goroutine that
// the client may still be sending on (after a protocol error, QUIT, or
// Shutdown's drain): it shuts the sending side, so that the client reads
// its replies to the end, and reads away what the client still sends,
// since closing a socket with unread input resets the connection and the
// client loses what it has not yet received. It returns once the client
// has acknowledged every byte sent to it (on Linux, over TLS too;
// elsewhere once it has read lingerBytes), once the client closes its side, or after
// lingerTime; the close follows. Past lingerBytes it reads no more: a
// reset then costs the client nothing once it has every byte. It is
// idempotent.
func (c *frameConn) lingerClose() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || c.lingering {
		return
	}
	c.lingering = true
	_ = cw.CloseWrite()
	tcp := c.nc // whose acknowledgments count
	if tc, ok := c.nc.(*tls.Conn); ok {
		tcp = tc.NetConn()
	}
	end := time.Now().Add(lingerTime)
	read := 0
	for {
		n, known := sockio.Unacked(tcp)
		if known && n == 0 {
			return
		}
		now := time.Now()
		if !now.Before(end) || !known && read >= lingerBytes {
			return
		}
		if read >= lingerBytes {
			time.Sleep(min(lingerPoll, end.Sub(now)))
			continue
		}
		poll := now.Add(lingerPoll)
		if poll.After(end) {
			poll = end
		}
		_ = c.nc.SetReadDeadline(poll)
		m, err := c.nc.Read(c.buf[:cap(c.buf)])
		read += m
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
	}
}

// readSocket reads from the socket with the deadline the connection's
// state calls for: the idle timeout between frames, the read timeout from
// the first byte of a frame. It returns io.EOF once the server drains.
//
// Moving a socket's deadline costs a timer update, so an idle deadline
// that is later than the one set by less than idleSlack is not set: the
// earlier one may then fire first, and the read goes on to the one wanted
// (no read ever ends before its deadline). A busy connection so moves its
// deadline once every idleSlack instead of once a read.
func (c *frameConn) readSocket(b []byte) (int, error) {
	if c.lp != nil {
		return c.readNow(b)
	}
	retry := false
	for {
		c.mu.Lock()
		if c.draining {
			c.mu.Unlock()
			return 0, io.EOF
		}
		switch {
		case retry:
			// c.want stands: the wait began before the early deadline.
		case c.tc != nil:
			// The handshake is the client's first frame: the read timeout bounds it.
			c.want = time.Now().Add(c.srv.opts.ReadTimeout)
		case c.sc.mid() || c.w > c.r:
			c.want = c.frameStart.Add(c.srv.opts.ReadTimeout)
		default:
			c.want = c.idleDeadline()
		}
		if retry || !c.closeEnough() {
			_ = c.nc.SetReadDeadline(c.want)
			c.armed = c.want
		}
		deadline := c.want
		c.reading = true
		c.mu.Unlock()

		var n int
		var err error
		if c.tc != nil {
			// The handshake both reads and writes: both wait at most the deadline.
			_ = c.tc.SetWriteDeadline(deadline)
			if err = c.tc.Handshake(); err == nil {
				c.tc = nil
				c.mu.Lock()
				c.want = c.idleDeadline()
				_ = c.nc.SetReadDeadline(c.want)
				c.armed = c.want
				c.mu.Unlock()
			}
		}
		if err == nil {
			n, err = c.rw.Read(b)
		}

		c.mu.Lock()
		c.reading = false
		draining := c.draining
		want := c.want
		c.mu.Unlock()
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			switch {
			case draining:
				return n, io.EOF
			case n == 0 && (want.IsZero() || time.Now().Before(want)):
				retry = true // the deadline set came before the one wanted
				continue
			}
			c.srv.obs.Conn(ConnTimedOut)
		}
		return n, err
	}
}

// closeEnough reports whether the read deadline set (armed) may stand for
// the one wanted: it is the same, or an idle deadline earlier than it by
// less than idleSlack. c.mu is held.
func (c *frameConn) closeEnough() bool {
	switch {
	case c.armed.Equal(c.want):
		return true
	case c.armed.IsZero() || c.want.IsZero() || c.tc != nil || c.sc.mid() || c.w > c.r:
		return false
	}
	ahead := c.want.Sub(c.armed)
	return ahead > 0 && ahead < c.srv.opts.IdleTimeout/idleSlackDiv
}

// idleSlackDiv sets idleSlack, the most by which the idle deadline set may
// come before the one wanted: IdleTimeout / idleSlackDiv (19 s of the
// default 5 minutes).
const idleSlackDiv = 16

// idleDeadline is the read deadline of a connection between frames.
func (c *frameConn) idleDeadline() time.Time {
	if c.srv.opts.IdleTimeout > 0 {
		return time.Now().Add(c.srv.opts.IdleTimeout)
	}
	return time.Time{}
}

// Write writes p to the socket, bounded by the write timeout. Through raw
// I/O the deadline is set only when the write has to wait for room
// (sockio.Socket.WriteWithin): a write the socket's buffer takes at once
// costs no timer.
func (c *frameConn) Write(p []byte) (int, error) {
	if c.lp != nil {
		return c.writeNow(p)
	}
	if c.sock != nil {
		return c.sock.WriteWithin(p, c.srv.opts.WriteTimeout)
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteTimeout))
	return c.rw.Write(p)
}

// drain makes the connection's next read, or the one it is blocked in,
// return io.EOF, so that it closes once the commands it has read are
// answered.
func (c *frameConn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	if c.lp != nil {
		if c.quiet {
			c.shutdown(shutWrite)
		} else {
			c.lp.ask()
		}
		return
	}
	if c.reading {
		c.armed = time.Unix(1, 0)
		_ = c.nc.SetReadDeadline(c.armed)
	}
}

// Close closes the connection; it is idempotent.
func (c *frameConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	if c.lp != nil {
		// Its loop closes it, woken by the shutdown.
		c.closing = true
		c.shutdown(shutBoth)
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.nc.Close()
	c.srv.forget(c)
	return err
}

// listener accepts the server's connections: it caps them, wraps each in
// a frameConn, retries temporary accept errors after a pause, and, once
// the server shuts down, returns only when every connection has drained,
// so that Serve returns after the last of them.
type listener struct {
	net.Listener
	srv *Server
}

// accept returns the next connection admitted.
func (l *listener) accept() (*frameConn, error) {
	var pause time.Duration
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			if l.srv.isClosing() {
				<-l.srv.drained
				return nil, net.ErrClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			// Out of descriptors, say: wait a little, as net/http does.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.srv.log.Warn("resp: accept failed; retrying", "err", err, "pause", pause)
			select {
			case <-time.After(pause):
			case <-l.srv.closing:
			}
			continue
		}
		pause = 0
		if c := l.srv.admit(nc); c != nil {
			return c, nil
		}
	}
}

// isDraining reports whether Shutdown has begun to drain the connection.
func (c *frameConn) isDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}
