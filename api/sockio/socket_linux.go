//go:build linux

package sockio

import (
	"io"
	"net"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Socket reads and writes one TCP connection's descriptor by raw system
// calls inside the runtime poller's wait. Like a net.Conn, it is safe for
// concurrent use: Reads take turns, and so do Writes, each written whole
// before the next begins, while a read and a write may run at once.
//
// The callbacks the poller runs are bound once per socket (readFn,
// writeFn) and take their operands from the Socket itself, a read's apart
// from a write's: closures made per call would each be allocated, as they
// escape into the poller.
type Socket struct {
	tc              *net.TCPConn
	rc              syscall.RawConn
	readFn, writeFn func(fd uintptr) bool

	// rmu holds rd, the operand of the read under way; wmu wr, the
	// write's. The poller serializes the callbacks, not the operands set
	// before them.
	rmu, wmu sync.Mutex
	rd, wr   rawOp
}

// rawOp is the operand and outcome of the read or write under way.
type rawOp struct {
	b     []byte
	n     int // bytes read, or written so far
	errno syscall.Errno
	once  bool // a write: give up, not wait, when the socket takes no more
}

// Open returns the raw I/O of nc when nc is a *net.TCPConn whose
// descriptor it can reach; false otherwise (TLS, a pipe, a Unix socket).
func Open(nc net.Conn) (*Socket, bool) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, false
	}
	s := &Socket{tc: tc, rc: rc}
	s.readFn, s.writeFn = s.read, s.write
	return s, true
}

// Read implements io.Reader: it returns what the socket holds, waiting
// (within the read deadline) until it holds something; io.EOF once the
// peer has closed its side and everything before was read.
func (s *Socket) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.rd = rawOp{b: b}
	err := s.rc.Read(s.readFn)
	n, errno := s.rd.n, s.rd.errno
	s.rd.b = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is the poller's callback of Read: false to wait for the socket.
func (s *Socket) read(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rd.b[0])), uintptr(len(s.rd.b)))
		switch errno {
		case 0:
			s.rd.n = int(n)
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			s.rd.errno = errno
			return true
		}
	}
}

// Write implements io.Writer: it writes all of b, waiting (within the
// write deadline) for room in the socket's buffer as often as it must.
func (s *Socket) Write(b []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wr = rawOp{b: b}
	return s.wrote(s.rc.Write(s.writeFn))
}

// wrote ends the write of s.wr, err the poller's: the bytes written, and
// err or else the write's own error. s.wmu is held.
func (s *Socket) wrote(err error) (int, error) {
	done, errno := s.wr.n, s.wr.errno
	s.wr.b = nil
	if err == nil && errno != 0 {
		err = &net.OpError{Op: "write", Net: "tcp", Err: errno}
	}
	return done, err
}

// WriteWithin writes b, waiting at most d for room in the socket's
// buffer. The write deadline is set only when a first attempt leaves part
// of b unwritten (the socket's buffer is full), and cleared after: a write
// the buffer takes at once costs no timer update.
func (s *Socket) WriteWithin(b []byte, d time.Duration) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wr = rawOp{b: b, once: true}
	err := s.rc.Write(s.writeFn)
	if err == nil && s.wr.errno == 0 && s.wr.n < len(b) {
		_ = s.tc.SetWriteDeadline(time.Now().Add(d))
		s.wr.once = false
		err = s.rc.Write(s.writeFn)
		_ = s.tc.SetWriteDeadline(time.Time{})
	}
	return s.wrote(err)
}

// write is the poller's callback of Write: false to wait for room (true,
// with the rest unwritten, for a write that must not wait: rawOp.once).
func (s *Socket) write(fd uintptr) bool {
	w := &s.wr
	for w.n < len(w.b) {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.b[w.n])), uintptr(len(w.b)-w.n))
		switch errno {
		case 0:
			w.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return w.once
		default:
			w.errno = errno
			return true
		}
	}
	return true
}

// Unacked returns how many bytes sent on nc, a TCP connection, its peer
// has not acknowledged yet (SIOCOUTQ); false when nc is not one.
func Unacked(nc net.Conn) (int, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	if _, tcp := nc.(*net.TCPConn); !tcp {
		if _, tcp := nc.(*Conn); !tcp {
			return 0, false
		}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	n, known := 0, false
	if err := rc.Control(func(fd uintptr) { n, known = UnackedFD(int(fd)) }); err != nil {
		return 0, false
	}
	return n, known
}

// UnackedFD is Unacked of a TCP socket's descriptor.
func UnackedFD(fd int) (int, bool) {
	var n int32
	if _, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0, false
	}
	return int(n), true
}
