package resp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/resp"
	"github.com/ratelimitd/ratelimitd/table"
)

// blockingChecker holds every Check until release is closed or its ctx
// ends, and says when one has begun.
type blockingChecker struct {
	resp.Checker
	entered chan struct{}
	release chan struct{}
}

func (b *blockingChecker) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return b.Checker.Check(ctx, req)
	case <-ctx.Done():
		return table.Decision{}, ctx.Err()
	}
}

// serve starts srv on a loopback listener and returns its address and
// the channel Serve's error comes on.
func serve(t *testing.T, srv *resp.Server) (string, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), done
}

// serveBlocking serves, on loops or on goroutines, a server whose checks
// wait for bc.release, on a system of its own; it returns them with the
// address and the channel Serve's error comes on.
func serveBlocking(t *testing.T, goroutines bool) (*actors.System, *blockingChecker, *resp.Server, string, chan error) {
	t.Helper()
	sys, _ := manualSystem(t)
	bc := &blockingChecker{Checker: sys, entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := resp.New(resp.Options{ConnGoroutines: goroutines, Checker: bc})
	if err != nil {
		t.Fatal(err)
	}
	addr, served := serve(t, srv)
	return sys, bc, srv, addr, served
}

// checkInProgress dials addr and sends a CL.THROTTLE of d, returning once
// the check has reached bc.
func checkInProgress(t *testing.T, addr string, bc *blockingChecker) *rawConn {
	t.Helper()
	c := dialRaw(t, addr)
	c.send(frame("CL.THROTTLE", "d", "1", "1", "60"))
	<-bc.entered
	return c
}

// TestShutdownDrains checks that Shutdown closes an idle connection at
// once, lets a connection answer the check it is deciding, then closes
// it, and refuses new connections; Serve returns ErrServerClosed.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		_, bc, srv, addr, served := serveBlocking(t, goroutines)
		idle := dialRaw(t, addr)
		idle.send(frame("PING"))
		if got := idle.mustReply(); got != "+PONG\r\n" {
			t.Fatalf("PING: got %q", got)
		}
		busy := checkInProgress(t, addr, bc)
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(context.Background()) }()
		if got, err := idle.reply(); !errors.Is(err, io.EOF) {
			t.Errorf("idle connection: got %q, %v; want it closed", got, err)
		}
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v with a check in progress", err)
		default:
		}
		close(bc.release)
		if got, want := busy.mustReply(), ints(0, 2, 1, -1, 60); got != want {
			t.Errorf("the check in progress: got %q, want %q", got, want)
		}
		if got, err := busy.reply(); !errors.Is(err, io.EOF) {
			t.Errorf("busy connection after its reply: got %q, %v; want it closed", got, err)
		}
		if err := <-shut; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, resp.ErrServerClosed) {
			t.Errorf("Serve: got %v, want ErrServerClosed", err)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Error("a new connection was accepted after Shutdown")
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("second Shutdown: %v", err)
		}
		if err := srv.Serve(nil); !errors.Is(err, resp.ErrServerClosed) {
			t.Errorf("Serve after Shutdown: got %v, want ErrServerClosed", err)
		}
	})
}

// TestShutdownGivesUp checks that when Shutdown's ctx ends first, the
// connections are closed at once and the checks in progress canceled.
func TestShutdownGivesUp(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, bc, srv, addr, served := serveBlocking(t, goroutines)
		busy := checkInProgress(t, addr, bc)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown: got %v, want context.Canceled", err)
		}
		if got, err := busy.reply(); err == nil {
			t.Errorf("busy connection: got %q, want it closed", got)
		}
		if err := <-served; !errors.Is(err, resp.ErrServerClosed) {
			t.Errorf("Serve: got %v, want ErrServerClosed", err)
		}
		// The check was canceled before the system took it: nothing counted.
		d, err := sys.Check(context.Background(), table.Request{ID: "d", Hits: 0, Namespace: "CL.THROTTLE",
			Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Minute, Limit: 1, Burst: 2}})
		if err != nil || d.Count != 0 {
			t.Errorf("after the canceled check: got %+v, %v; want count 0", d, err)
		}
	})
}

// TestNewOptions checks the options New refuses.
func TestNewOptions(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	for _, o := range []resp.Options{
		{},
		{Checker: sys, MaxConns: -1},
		{Checker: sys, MaxBulk: -1},
		{Checker: sys, ReadTimeout: -time.Second},
		{Checker: sys, MaxArgs: 11},
		{Checker: sys, Password: "a", Passwords: func() []string { return []string{"b"} }},
	} {
		if _, err := resp.New(o); !errors.Is(err, resp.ErrInvalidOption) {
			t.Errorf("New(%+v): got %v, want ErrInvalidOption", o, err)
		}
	}
	if _, err := resp.New(resp.Options{Checker: sys, MaxArgs: 12, IdleTimeout: -1}); err != nil {
		t.Errorf("New with MaxArgs 12 and no idle timeout: %v", err)
	}
}
