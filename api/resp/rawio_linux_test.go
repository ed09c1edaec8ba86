//go:build linux

package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// TestRawIO: the raw reads and writes of a TCP connection deliver every
// byte both ways (a write far larger than the socket's buffers waits for
// room and resumes where it stopped), end in io.EOF when the peer closes,
// and keep the connection's deadlines: past one, the error is
// os.ErrDeadlineExceeded, a write's with the bytes it had written.
func TestRawIO(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	// Small socket buffers (no autotuning): a write of 8 MiB to a peer
	// that reads nothing cannot fit in them.
	if err := server.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	r, ok := socketIO(server).(*rawIO)
	if !ok {
		t.Fatal("socketIO of a *net.TCPConn: not its raw I/O")
	}
	if uc := (&net.UnixConn{}); socketIO(uc) != io.ReadWriter(uc) {
		t.Error("socketIO of a non-TCP connection: not the connection itself")
	}

	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(client, int64(len(big))))
		got <- b
	}()
	if n, err := r.Write(big); n != len(big) || err != nil {
		t.Fatalf("write of %d bytes: %d, %v", len(big), n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(big))
	}

	if _, err := client.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := r.Read(buf); string(buf[:n]) != "PING\r\n" || err != nil {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}

	_ = server.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := r.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %d, %v", n, err)
	}
	_ = server.SetReadDeadline(time.Time{})

	_ = server.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := r.Write(big); n == 0 || n >= len(big) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that reads nothing, past its deadline: %d of %d bytes, %v", n, len(big), err)
	}

	// Another connection, whose peer has nothing unread when it closes
	// (this one's would reset it).
	server, client = tcpPair(t)
	r = socketIO(server).(*rawIO)
	client.Close()
	for {
		n, err := r.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil || n == 0 {
			t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
		}
	}
}

// TestServerUsesRawIO: a Server on a TCP listener reads and writes its
// connections by rawIO, and answers through it.
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
		if _, ok := fc.rw.(*rawIO); !ok {
			t.Errorf("the connection reads and writes through %T, not rawIO", fc.rw)
		}
	}
}
