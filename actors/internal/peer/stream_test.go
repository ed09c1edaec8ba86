package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveStreams serves method with h (and no unary handler).
func serveStreams(t *testing.T, method string, h StreamHandler) (*Server, string) {
	t.Helper()
	s := NewServer(nil, nil)
	s.HandleStream(method, h)
	return s, start(t, s)
}

// echo answers each message with "re:" and the message, until EOF.
func echo(st *ServerStream) error {
	for {
		msg, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(append([]byte("re:"), msg...)); err != nil {
			return err
		}
	}
}

func open(t *testing.T, c *Client, method string) *Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Open(ctx, method)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestStreamCarriesMessagesBothWaysInOrder(t *testing.T) {
	t.Parallel()
	_, addr := serveStreams(t, "Echo", echo)
	s := open(t, dial(t, addr, nil), "Echo")
	// Senders on several goroutines; one message each at a time, so that
	// each sender's answers come in its order.
	const senders, each = 4, 200
	got := map[string]int{}
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				if err := s.Send(fmt.Appendf(nil, "%d/%d", g, i)); err != nil {
					t.Errorf("Send: %v", err)
					return
				}
			}
		})
	}
	for range senders * each {
		msg, err := s.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		var g, i int
		if _, err := fmt.Sscanf(string(msg), "re:%d/%d", &g, &i); err != nil {
			t.Fatalf("answer %q: %v", msg, err)
		}
		if key := fmt.Sprint(g); got[key] != i {
			t.Fatalf("sender %d: answer %d after %d answers, want them in order", g, i, got[key])
		}
		got[fmt.Sprint(g)]++
	}
	wg.Wait()
	big := bytes.Repeat([]byte{7}, 4<<20) // above gRPC's default 4 MiB receive limit with headers
	if err := s.Send(big); err != nil {
		t.Fatalf("Send 4 MiB: %v", err)
	}
	if msg, err := s.Recv(); err != nil || len(msg) != 3+len(big) {
		t.Fatalf("a 4 MiB message: got %d bytes, %v; want %d", len(msg), err, 3+len(big))
	}
	if err := s.Send(nil); err == nil {
		t.Fatal("an empty message was sent; it means goodbye")
	}
	s.CloseSend()
	if _, err := s.Recv(); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Recv after CloseSend: got %v, want the stream ended (ErrUnreachable)", err)
	}
}

// TestStreamStopSaysGoodbyeAndAnswersWhatWasSent: a stopping server
// tells its streams (ErrGoingAway), answers what they had sent, and
// stops as soon as they close their side, not at its deadline.
func TestStreamStopSaysGoodbyeAndAnswersWhatWasSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(nil, nil)
	held := make(chan struct{})
	release := make(chan struct{})
	srv.HandleStream("Echo", func(st *ServerStream) error {
		msg, err := st.Recv()
		if err != nil {
			return err
		}
		close(held)
		<-release // the first message is in progress while the server stops
		if err := st.Send(append([]byte("re:"), msg...)); err != nil {
			return err
		}
		return echo(st)
	})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s := open(t, dial(t, ln.Addr().String(), nil), "Echo")
	for _, m := range []string{"one", "two"} {
		if err := s.Send([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		srv.Stop(ctx)
		close(stopped)
	}()
	if _, err := s.Recv(); !errors.Is(err, ErrGoingAway) {
		t.Fatalf("first Recv while the server stops: got %v, want ErrGoingAway", err)
	}
	close(release)
	for _, want := range []string{"re:one", "re:two"} {
		if msg, err := s.Recv(); err != nil || string(msg) != want {
			t.Fatalf("after goodbye: got %q, %v; want %q", msg, err, want)
		}
	}
	s.CloseSend()
	if _, err := s.Recv(); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Recv after CloseSend: got %v, want the stream ended", err)
	}
	<-stopped
	if ctx.Err() != nil {
		t.Fatal("Stop waited for its deadline, not for the stream to close")
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestStreamFaults(t *testing.T) {
	t.Parallel()
	_, addr := serveStreams(t, "Fail", func(st *ServerStream) error {
		if _, err := st.Recv(); err != nil {
			return err
		}
		return errors.New("bad batch")
	})
	c := dial(t, addr, nil)
	s := open(t, c, "Fail")
	if err := s.Send([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "bad batch") {
		t.Fatalf("a failing handler: got %v, want ErrRemote with its text", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Open(ctx, "Nope"); !errors.Is(err, ErrRemote) {
		t.Fatalf("an unknown method: got %v, want ErrRemote", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	ln.Close()
	if _, err := dial(t, nobody, nil).Open(ctx, "Echo"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a member nobody serves: got %v, want ErrUnreachable (and not the 10s deadline)", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Open waited for its deadline instead of failing fast")
	}
}
