//go:build linux

package resp

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/sockio"
)

// TestServerUsesRawIO: a Server on a TCP listener that serves each
// connection on a goroutine reads and writes them by their raw I/O
// (sockio.Socket), and answers through it.
func TestServerUsesRawIO(t *testing.T) {
	t.Parallel()
	s := pingOnce(t, Options{Checker: nopChecker{}, ConnGoroutines: true})
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) != 1 {
		t.Fatalf("%d connections open, want 1", len(s.conns))
	}
	for fc := range s.conns {
		if _, ok := fc.rw.(*sockio.Socket); !ok {
			t.Errorf("the connection reads and writes through %T, not its sockio.Socket", fc.rw)
		}
		if fc.lp != nil {
			t.Error("the connection is served by an event loop")
		}
	}
}

// TestServerUsesLoops: by default a Server on a TCP listener serves its
// connections on event loops, one per processor, a connection's socket
// detached from the runtime's poller (its own descriptor, open).
func TestServerUsesLoops(t *testing.T) {
	t.Parallel()
	s := pingOnce(t, Options{Checker: nopChecker{}})
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.loops) != runtime.GOMAXPROCS(0) {
		t.Errorf("%d event loops, want %d", len(s.loops), runtime.GOMAXPROCS(0))
	}
	if len(s.conns) != 1 {
		t.Fatalf("%d connections open, want 1", len(s.conns))
	}
	for fc := range s.conns {
		if fc.lp == nil || fc.rw != nil {
			t.Fatalf("the connection is not on a loop (loop %p, reads through %T)", fc.lp, fc.rw)
		}
		fc.mu.Lock()
		fd := fc.fd
		fc.mu.Unlock()
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
			t.Errorf("its descriptor %d: %v, mode %o; want an open socket", fd, err, st.Mode)
		}
	}
}

// pingOnce serves New(opts) on a loopback listener, closed when the test
// ends, and answers one PING on a connection it leaves open.
func pingOnce(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := io.ReadAtLeast(c, buf, len("+PONG\r\n")); string(buf[:n]) != "+PONG\r\n" || err != nil {
		t.Fatalf("PING answered %q, %v", buf[:n], err)
	}
	return s
}
