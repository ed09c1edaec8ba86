//go:build linux

package sockio_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/sockio"
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

// smallBuffers shrinks the socket buffers between server and client (no
// autotuning), so that a write of 8 MiB to a client that reads nothing
// cannot fit in them.
func smallBuffers(t *testing.T, server, client net.Conn) {
	t.Helper()
	if err := server.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
}

var big = bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB

// readAll reads n bytes from c in the background, for at most 30 s (a
// peer that sends fewer fails the test, not hangs it).
func readAll(c net.Conn, n int) <-chan []byte {
	got := make(chan []byte, 1)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	go func() {
		b, _ := io.ReadAll(io.LimitReader(c, int64(n)))
		got <- b
	}()
	return got
}

// TestSocket: the raw reads and writes of a TCP connection deliver every
// byte both ways (a write far larger than the socket's buffers waits for
// room and resumes where it stopped), end in io.EOF when the peer closes,
// and keep the connection's deadlines: past one, the error is
// os.ErrDeadlineExceeded, a write's with the bytes it had written.
func TestSocket(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	smallBuffers(t, server, client)
	s, ok := sockio.Open(server)
	if !ok {
		t.Fatal("Open of a *net.TCPConn: no raw I/O")
	}
	if _, ok := sockio.Open(&net.UnixConn{}); ok {
		t.Error("Open of a Unix socket: raw I/O, want none")
	}

	got := readAll(client, len(big))
	if n, err := s.Write(big); n != len(big) || err != nil {
		t.Fatalf("write of %d bytes: %d, %v", len(big), n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(big))
	}

	if _, err := client.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := s.Read(buf); string(buf[:n]) != "PING\r\n" || err != nil {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	if n, err := s.Read(nil); n != 0 || err != nil {
		t.Fatalf("read into no room: %d, %v; want 0, nil at once", n, err)
	}

	_ = server.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := s.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %d, %v", n, err)
	}
	_ = server.SetReadDeadline(time.Time{})

	_ = server.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := s.Write(big); n == 0 || n >= len(big) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that reads nothing, past its deadline: %d of %d bytes, %v", n, len(big), err)
	}

	// Another connection, whose peer has nothing unread when it closes
	// (this one's would reset it).
	server, client = tcpPair(t)
	s, _ = sockio.Open(server)
	client.Close()
	for {
		n, err := s.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil || n == 0 {
			t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
		}
	}
	server.Close()
	if n, err := s.Read(buf); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed connection: %d, %v; want net.ErrClosed", n, err)
	}
	if n, err := s.Write([]byte("x")); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write to a closed connection: %d, %v; want net.ErrClosed", n, err)
	}
}

// TestWriteWithin: a write the socket's buffer takes writes everything; a
// write to a peer that reads nothing gives up after the time allowed, with
// the bytes written so far, and leaves no write deadline behind: once the
// peer reads, the next write waits for room as long as it takes.
func TestWriteWithin(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	smallBuffers(t, server, client)
	s, _ := sockio.Open(server)

	got := readAll(client, 5)
	if n, err := s.WriteWithin([]byte("+OK\r\n"), time.Second); n != 5 || err != nil {
		t.Fatalf("a short write: %d, %v", n, err)
	}
	if b := <-got; string(b) != "+OK\r\n" {
		t.Fatalf("the peer read %q", b)
	}

	start := time.Now()
	n, err := s.WriteWithin(big, 50*time.Millisecond)
	if n == 0 || n >= len(big) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that reads nothing: %d of %d bytes, %v", n, len(big), err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the 50ms allowed", waited)
	}

	// The peer now reads what was written and the next 8 MiB; the write
	// of those must not meet the 50ms deadline of the last one.
	got = readAll(client, n+len(big))
	time.Sleep(100 * time.Millisecond)
	if m, err := s.Write(big); m != len(big) || err != nil {
		t.Fatalf("a write after WriteWithin gave up: %d, %v; want every byte (no deadline left behind)", m, err)
	}
	if b := <-got; len(b) != n+len(big) || !bytes.Equal(b[n:], big) {
		t.Fatalf("the peer read %d bytes, want %d", len(b), n+len(big))
	}
}

// TestWrap: Wrap gives a TCP connection its raw I/O behind the net.Conn
// face, with the connection's other methods (half-close, deadlines) its
// own; any other connection comes back as it is.
func TestWrap(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	w := sockio.Wrap(server)
	c, ok := w.(*sockio.Conn)
	if !ok || c.Socket() == nil {
		t.Fatalf("Wrap of a *net.TCPConn: %T, want *sockio.Conn with its Socket", w)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if got := sockio.Wrap(p1); got != p1 {
		t.Errorf("Wrap of a pipe: %T, want the pipe itself", got)
	}

	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := w.Read(buf); string(buf[:n]) != "GET / HTTP/1.1\r\n" || err != nil {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	_ = w.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := w.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline set on the wrapper: %d, %v", n, err)
	}
	_ = w.SetReadDeadline(time.Time{})

	// Half-close: the client reads the answer, then EOF, and can still
	// send; the server still reads it.
	if _, err := w.Write([]byte("HTTP/1.1 200 OK\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(client)
	if string(b) != "HTTP/1.1 200 OK\r\n" || err != nil {
		t.Fatalf("the client read %q, %v; want the answer, then EOF", b, err)
	}
	if _, err := client.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(w, buf[:3]); string(buf[:n]) != "bye" || err != nil {
		t.Fatalf("read after the half-close: %q, %v", buf[:n], err)
	}
}

// TestConcurrentUse: as a net.Conn, a Conn may be written and read from
// many goroutines at once. Each Write reaches the peer whole and exactly
// once (8 writers of 500 messages each, every message found intact), and
// concurrent Reads together receive every byte the peer sent, once.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	const writers, each, size = 8, 500, 32
	server, client := tcpPair(t)
	w := sockio.Wrap(server)

	got := readAll(client, writers*each*size)
	done := make(chan error, writers)
	for g := range writers {
		go func() {
			for i := range each {
				msg := fmt.Sprintf("%02d:%05d:", g, i)
				msg += strings.Repeat(string(rune('a'+g)), size-len(msg))
				if _, err := w.Write([]byte(msg)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	b := <-got
	if len(b) != writers*each*size {
		t.Fatalf("the peer read %d bytes, want %d", len(b), writers*each*size)
	}
	next := make([]int, writers) // each writer's messages arrive in its order
	for off := 0; off < len(b); off += size {
		var g, i int
		if _, err := fmt.Sscanf(string(b[off:off+9]), "%02d:%05d:", &g, &i); err != nil || g >= writers || i != next[g] {
			t.Fatalf("at byte %d: %q, not writer %d's message %d (a write cut or repeated)", off, b[off:off+size], g, next[min(g, writers-1)])
		}
		if want := strings.Repeat(string(rune('a'+g)), size-9); string(b[off+9:off+size]) != want {
			t.Fatalf("at byte %d: %q, a message mixed with another", off, b[off:off+size])
		}
		next[g]++
	}

	// Readers: 4 goroutines read until the peer closes; together they
	// get every byte once.
	payload := bytes.Repeat([]byte("0123456789"), 10000)
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, 512)
			for {
				n, err := w.Read(buf)
				mu.Lock()
				total += n
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	if _, err := client.Write(payload); err != nil {
		t.Fatal(err)
	}
	client.Close()
	wg.Wait()
	if total != len(payload) {
		t.Fatalf("the readers got %d bytes together, want %d", total, len(payload))
	}
}

// TestUnacked: the bytes a peer that reads nothing has not acknowledged
// are counted once its buffers are full, and none are once it has read
// everything; the same through Wrap's Conn; a connection that is not TCP
// cannot tell.
func TestUnacked(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	smallBuffers(t, server, client)
	if n, ok := sockio.Unacked(server); !ok || n != 0 {
		t.Fatalf("before any write: %d, %v; want 0, true", n, ok)
	}
	_ = server.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	sent, err := server.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a write of %d bytes to a peer that reads nothing: %d, %v; want a timeout", len(big), sent, err)
	}
	n, ok := sockio.Unacked(server)
	if !ok || n <= 0 || n > sent {
		t.Fatalf("with the peer's buffers full: %d, %v; want 0 < n ≤ %d sent", n, ok, sent)
	}
	if w, ok := sockio.Unacked(sockio.Wrap(server)); !ok || w <= 0 {
		t.Errorf("through Wrap: %d, %v; want > 0, true", w, ok)
	}
	if got := <-readAll(client, sent); len(got) != sent {
		t.Fatalf("the peer read %d of %d bytes", len(got), sent)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, ok := sockio.Unacked(server)
		if ok && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the peer read everything: %d, %v; want 0, true", n, ok)
		}
		time.Sleep(time.Millisecond)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if _, ok := sockio.Unacked(p1); ok {
		t.Error("a pipe told its unacknowledged bytes")
	}
}
