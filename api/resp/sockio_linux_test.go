//go:build linux

package resp

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/sockio"
)

// TestServerUsesRawIO: a Server on a TCP listener reads and writes its
// connections by their raw I/O (sockio.Socket), and answers through it.
func TestServerUsesRawIO(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Checker: nopChecker{}})
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
	defer c.Close()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := io.ReadAtLeast(c, buf, len("+PONG\r\n")); string(buf[:n]) != "+PONG\r\n" || err != nil {
		t.Fatalf("PING answered %q, %v", buf[:n], err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) != 1 {
		t.Fatalf("%d connections open, want 1", len(s.conns))
	}
	for fc := range s.conns {
		if _, ok := fc.rw.(*sockio.Socket); !ok {
			t.Errorf("the connection reads and writes through %T, not its sockio.Socket", fc.rw)
		}
	}
}
