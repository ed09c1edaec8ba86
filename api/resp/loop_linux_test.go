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
	"sync/atomic"
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
	waitHeld(t, s)
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

// TestDrainHeld: Shutdown lets a connection whose replies wait for room
// (its client sends far more than it reads) write them all once its
// client reads, then closes it without resetting it: the client gets a
// whole, in-order prefix of its replies, then EOF, and Shutdown returns.
// Closing a socket with input unread resets the connection and drops what
// the client has not yet received, so the server lingers first; before it
// did, the client lost the end of its replies (a reply cut short, then
// EOF). On an event loop and on goroutines.
func TestDrainHeld(t *testing.T) {
	t.Parallel()
	for _, goroutines := range []bool{false, true} {
		t.Run(map[bool]string{false: "loops", true: "goroutines"}[goroutines], func(t *testing.T) {
			t.Parallel()
			testDrainHeld(t, goroutines)
		})
	}
}

func testDrainHeld(t *testing.T, goroutines bool) {
	s, addr, served := oneLoop(t, Options{Checker: nopChecker{}, WriteTimeout: 30 * time.Second, ConnGoroutines: goroutines})
	big, bigR := dialLoop(t, addr)
	const n, size = 8000, 4000
	payload := strings.Repeat("z", size)
	var sent atomic.Int64
	go func() {
		for i := 0; i < n; i++ {
			if _, err := big.Write([]byte(respFrame("ECHO", strconv.Itoa(i)+":"+payload))); err != nil {
				return // closed by the drain
			}
			sent.Add(1)
		}
	}()
	// Held: the client's writes stall, the server reading no more.
	last, deadline := int64(-1), time.Now().Add(10*time.Second)
	for now := sent.Load(); now != last || now == 0; now = sent.Load() {
		if time.Now().After(deadline) || now == n {
			t.Fatalf("the client's writes never stalled (%d of %d sent)", now, n)
		}
		last = now
		time.Sleep(100 * time.Millisecond)
	}
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	got := 0
	for ; got < n; got++ {
		want := strconv.Itoa(got) + ":" + payload
		head, err := bigR.ReadString('\n')
		if errors.Is(err, io.EOF) && head == "" {
			break
		}
		if err != nil || head != "$"+strconv.Itoa(len(want))+"\r\n" {
			t.Fatalf("reply %d: header %q, %v", got, head, err)
		}
		body := make([]byte, len(want)+2)
		if _, err := io.ReadFull(bigR, body); err != nil || string(body) != want+"\r\n" {
			t.Fatalf("reply %d: %q…, %v", got, body[:min(len(body), 16)], err)
		}
	}
	if got == 0 || got == n {
		t.Errorf("%d replies before the close; want some, not all %d (the drain reads no more)", got, n)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
}

// waitHeld waits until one of s's connections holds replies the socket
// did not take.
func waitHeld(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		held := false
		for c := range s.conns {
			c.mu.Lock()
			held = held || c.held
			c.mu.Unlock()
		}
		s.mu.Unlock()
		if held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never held replies back")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
