package resp

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// readChunk is the most bytes a connection reads from its socket at once,
// and the most it holds back while waiting for the end of a frame.
const readChunk = 4096

// frameConn is a client connection as redcon sees it. Its Read hands redcon
// whole frames only (a frame longer than readChunk in pieces, the last
// ending with the frame), so that redcon's buffer is empty after each
// batch and never grows past about twice the longest frame the limits
// allow; it enforces those limits and the read and idle timeouts, answers
// a violation with a Redis protocol error and then fails the read, which
// closes the connection. It also lets the server drain the connection: a
// read after Shutdown began returns io.EOF, and a read already waiting is
// woken to return it. Its socket is read and written through rw: on
// Linux, a plain TCP connection's rawIO (rawio_linux.go).
type frameConn struct {
	net.Conn
	srv *Server
	sc  scanner

	buf  [readChunk]byte
	r, w int // buf[r:w] is read from the socket and not yet handed on
	cut  int // buf[r:cut] holds whole frames; cut ≤ r when none

	// err, once set, is returned after the whole frames before it are
	// handed on; a protocol error is answered first (perr).
	err  error
	perr *protoError
	// frameStart is when the first byte of the unfinished frame arrived.
	frameStart time.Time
	// tc is the TLS connection until its handshake is done, else nil.
	tc *tls.Conn
	// rw reads and writes the socket (socketIO): the connection itself,
	// or its raw I/O.
	rw io.ReadWriter

	mu       sync.Mutex
	reading  bool // blocked in a socket read
	draining bool
	closed   bool
}

func newFrameConn(nc net.Conn, s *Server) *frameConn {
	c := &frameConn{Conn: nc, srv: s}
	c.tc, _ = nc.(*tls.Conn)
	c.rw = socketIO(nc)
	c.sc = scanner{maxArgs: int64(s.opts.MaxArgs), maxBulk: int64(s.opts.MaxBulk), maxInline: int64(s.opts.MaxInline)}
	return c
}

// Read implements net.Conn for redcon's reader.
func (c *frameConn) Read(p []byte) (int, error) {
	for {
		if c.cut > c.r {
			n := copy(p, c.buf[c.r:c.cut])
			c.consume(n)
			return n, nil
		}
		if c.err != nil {
			return 0, c.fail()
		}
		if c.w == len(c.buf) {
			if c.r == 0 {
				// One frame longer than the buffer: hand its head on.
				n := copy(p, c.buf[:c.w])
				c.consume(n)
				return n, nil
			}
			c.w = copy(c.buf[:], c.buf[c.r:c.w])
			c.cut -= c.r
			c.r = 0
		}
		n, err := c.readSocket(c.buf[c.w:])
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
				// Hand on the whole frames before the fault; drop the rest.
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

// consume marks n bytes handed on.
func (c *frameConn) consume(n int) {
	c.r += n
	if c.r == c.w {
		c.r, c.w, c.cut = 0, 0, 0
	}
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
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
			_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
		}
	}
	return c.err
}

// readSocket reads from the socket with the deadline the connection's
// state calls for: the idle timeout between frames, the read timeout from
// the first byte of a frame. It returns io.EOF once the server drains.
func (c *frameConn) readSocket(b []byte) (int, error) {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return 0, io.EOF
	}
	var deadline time.Time
	switch {
	case c.tc != nil:
		// The handshake is the client's first frame: the read timeout bounds it.
		deadline = time.Now().Add(c.srv.opts.ReadTimeout)
	case c.sc.mid() || c.w > c.r:
		deadline = c.frameStart.Add(c.srv.opts.ReadTimeout)
	default:
		deadline = c.idleDeadline()
	}
	_ = c.Conn.SetReadDeadline(deadline)
	c.reading = true
	c.mu.Unlock()

	var n int
	var err error
	if c.tc != nil {
		// The handshake both reads and writes: both wait at most the deadline.
		_ = c.tc.SetWriteDeadline(deadline)
		if err = c.tc.Handshake(); err == nil {
			c.tc = nil
			_ = c.Conn.SetReadDeadline(c.idleDeadline())
		}
	}
	if err == nil {
		n, err = c.rw.Read(b)
	}

	c.mu.Lock()
	c.reading = false
	draining := c.draining
	c.mu.Unlock()
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		if draining {
			return n, io.EOF
		}
		c.srv.obs.Conn(ConnTimedOut)
	}
	return n, err
}

// idleDeadline is the read deadline of a connection between frames.
func (c *frameConn) idleDeadline() time.Time {
	if c.srv.opts.IdleTimeout > 0 {
		return time.Now().Add(c.srv.opts.IdleTimeout)
	}
	return time.Time{}
}

// Write implements net.Conn, bounded by the write timeout.
func (c *frameConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteTimeout))
	return c.rw.Write(p)
}

// drain makes the connection's next read, or the one it is blocked in,
// return io.EOF, so that it closes once the commands it has read are
// answered.
func (c *frameConn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	if c.reading {
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// Close implements net.Conn; it is idempotent.
func (c *frameConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.Conn.Close()
	c.srv.forget(c)
	return err
}

// listener is the net.Listener redcon serves: it caps the connections,
// wraps each in a frameConn, retries temporary accept errors after a pause,
// and, once the server shuts down, holds redcon's accept loop until every
// connection has drained (redcon closes them all when its loop ends).
type listener struct {
	net.Listener
	srv *Server
}

// Accept implements net.Listener.
func (l *listener) Accept() (net.Conn, error) {
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
