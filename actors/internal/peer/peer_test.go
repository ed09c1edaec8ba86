package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func serve(t *testing.T, handlers map[string]Handler) (*Server, string) {
	t.Helper()
	s := NewServer(handlers, nil)
	return s, start(t, s)
}

// start serves s on a loopback port until the test ends, and returns the
// address.
func start(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// dial dials the member at addr, with TLS config tc (nil: none), until
// the test ends.
func dial(t *testing.T, addr string, tc *tls.Config) *Client {
	t.Helper()
	c, err := Dial(addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestCallCarriesBytesBothWays(t *testing.T) {
	t.Parallel()
	_, addr := serve(t, map[string]Handler{
		"Reverse": func(_ context.Context, req []byte) ([]byte, error) {
			out := make([]byte, len(req))
			for i, b := range req {
				out[len(req)-1-i] = b
			}
			return out, nil
		},
		"Fail": func(context.Context, []byte) ([]byte, error) { return nil, errors.New("no such vshard") },
	})
	c := dial(t, addr, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			req := bytes.Repeat([]byte{byte(i), 0, 0xff}, 1000*i)
			rep, err := c.Call(ctx, "Reverse", req)
			if err != nil {
				t.Errorf("Call: %v", err)
				return
			}
			if len(rep) != len(req) || (len(req) > 0 && (rep[0] != req[len(req)-1] || rep[len(rep)-1] != req[0])) {
				t.Errorf("call %d: got %d bytes, want the %d sent, reversed", i, len(rep), len(req))
			}
		})
	}
	wg.Wait()
	big := make([]byte, 4<<20) // above gRPC's default 4 MiB receive limit with headers
	if rep, err := c.Call(ctx, "Reverse", big); err != nil || len(rep) != len(big) {
		t.Fatalf("a 4 MiB call: got %d bytes, %v", len(rep), err)
	}
	_, err := c.Call(ctx, "Fail", nil)
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "no such vshard") {
		t.Fatalf("a failing handler: got %v, want ErrRemote with its text", err)
	}
	if _, err := c.Call(ctx, "Nope", nil); !errors.Is(err, ErrRemote) {
		t.Fatalf("an unknown method: got %v, want ErrRemote", err)
	}
}

func TestCallHasTheCallersDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	_, addr := serve(t, map[string]Handler{
		"Hang": func(ctx context.Context, _ []byte) ([]byte, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		},
	})
	defer close(release)
	c := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, "Hang", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
}

func TestCallToNobodyFailsFast(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	c := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, "Any", []byte("x")); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable (and not the 10s deadline)", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the call waited for its deadline instead of failing fast")
	}
}

func TestStopEndsCallsInProgressAtItsDeadline(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	s, addr := serve(t, map[string]Handler{
		"Hang": func(ctx context.Context, _ []byte) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	c := dial(t, addr, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "Hang", nil)
		errc <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	s.Stop(ctx)
	if err := <-errc; !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrRemote) {
		t.Fatalf("a call cut by Stop: got %v, want ErrUnreachable or ErrRemote", err)
	}
}
