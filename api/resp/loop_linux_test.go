//go:build linux

package resp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// gateChecker blocks every check until release is closed (or its context
// ends), telling entered when one arrives.
type gateChecker struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gateChecker) Check(ctx context.Context, _ table.Request) (table.Decision, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return table.Decision{Allowed: true, Limit: 2, Remaining: 1}, nil
	case <-ctx.Done():
		return table.Decision{}, ctx.Err()
	}
}

func (g *gateChecker) Refund(ctx context.Context, req table.Request) (table.Decision, error) {
	return g.Check(ctx, req)
}

// oneLoop serves New(opts) with one event loop on a loopback listener,
// closed when the test ends, and returns it with its address and the
// channel Serve's error comes on.
func oneLoop(t *testing.T, opts Options) (*Server, string, chan error) {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.nLoops = 1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return s, ln.Addr().String(), served
}

// dialLoop dials addr and returns the connection with a reader of it; the
// reads give up after 20 s.
func dialLoop(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

func respFrame(args ...string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return b.String()
}

// TestLoopDrainWhileBusy: Shutdown closes a waiting connection at once
// even while its loop, the only one, is held by another connection's
// check; that connection then gets its answer before it is closed, and
// the loop has ended when Shutdown returns.
func TestLoopDrainWhileBusy(t *testing.T) {
	t.Parallel()
	g := &gateChecker{entered: make(chan struct{}, 1), release: make(chan struct{})}
	s, addr, served := oneLoop(t, Options{Checker: g})
	idle, idleR := dialLoop(t, addr)
	if _, err := idle.Write([]byte(respFrame("PING"))); err != nil {
		t.Fatal(err)
	}
	if line, err := idleR.ReadString('\n'); line != "+PONG\r\n" || err != nil {
		t.Fatalf("PING: %q, %v", line, err)
	}
	busy, busyR := dialLoop(t, addr)
	if _, err := busy.Write([]byte(respFrame("CL.THROTTLE", "k", "1", "1", "60"))); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if got, err := idleR.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("the waiting connection: got %q, %v; want it closed", got, err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a check in progress", err)
	default:
	}
	close(g.release)
	want := ":0\r\n:2\r\n" // allowed, max_burst+1
	head, err := busyR.ReadString('\n')
	if head != "*5\r\n" || err != nil {
		t.Fatalf("the check in progress: %q, %v", head, err)
	}
	var got strings.Builder
	for range 5 {
		line, err := busyR.ReadString('\n')
		if err != nil {
			t.Fatalf("the check in progress: %q, then %v", got.String(), err)
		}
		got.WriteString(line)
	}
	if !strings.HasPrefix(got.String(), want) {
		t.Errorf("the check in progress: got %q, want it to begin %q", got.String(), want)
	}
	if line, err := busyR.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("after its answer: got %q, %v; want the connection closed", line, err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
	// Shutdown returned: the loop has ended, its descriptors closed.
	for _, lp := range s.loops {
		select {
		case <-lp.ended():
		default:
			t.Error("a loop still runs after Shutdown returned")
		}
	}
}

// TestLoopBackPressure: a client that sends far more than it reads gets
// every reply, intact and in order, once it reads; meanwhile its loop,
// the only one, answers another connection, and reads no more of the
// first than its replies waiting allow.
func TestLoopBackPressure(t *testing.T) {
	t.Parallel()
	s, addr, _ := oneLoop(t, Options{Checker: nopChecker{}, WriteTimeout: 30 * time.Second})
	big, bigR := dialLoop(t, addr)
	const n, size = 8000, 4000 // 32 MB of replies, more than the socket buffers hold
	payload := strings.Repeat("y", size)
	sent := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < n && err == nil; i++ {
			_, err = big.Write([]byte(respFrame("ECHO", strconv.Itoa(i)+":"+payload)))
		}
		sent <- err
	}()
	// Wait until the server holds replies it cannot write.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		var waiting bool
		for c := range s.conns {
			c.mu.Lock()
			waiting = waiting || c.held
			c.mu.Unlock()
		}
		s.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never held replies back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	other, otherR := dialLoop(t, addr)
	for i := range 3 {
		if _, err := other.Write([]byte(respFrame("PING"))); err != nil {
			t.Fatal(err)
		}
		if line, err := otherR.ReadString('\n'); line != "+PONG\r\n" || err != nil {
			t.Fatalf("the other connection, PING %d: %q, %v", i, line, err)
		}
	}
	for i := range n {
		want := strconv.Itoa(i) + ":" + payload
		head, err := bigR.ReadString('\n')
		if err != nil || head != "$"+strconv.Itoa(len(want))+"\r\n" {
			t.Fatalf("reply %d: header %q, %v", i, head, err)
		}
		body := make([]byte, len(want)+2)
		if _, err := io.ReadFull(bigR, body); err != nil || string(body) != want+"\r\n" {
			t.Fatalf("reply %d: %q…, %v", i, body[:min(len(body), 16)], err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("sending: %v", err)
	}
}
