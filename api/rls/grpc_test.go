package rls

import (
	"encoding/binary"
	"io"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// HTTP/2 as far as TestGRPCServerWindow reads it (RFC 9113).
const (
	h2Preface           = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameSettings     = 0x4
	h2FrameWindowUpdate = 0x8
	h2FlagAck           = 0x1
	h2InitialWindowSize = 0x4 // the SETTINGS_INITIAL_WINDOW_SIZE parameter
	h2DefaultWindow     = 65535
)

// TestGRPCServerWindow: the server announces WindowSize as every call's
// flow-control window in its first SETTINGS, and raises the connection's
// window to it (a fixed window, so no bandwidth-estimation pings).
func TestGRPCServerWindow(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, mustParse(t, "domain: d\n"), Options{})
	_, conn := serveGRPC(t, svc)
	nc, err := net.DialTimeout("tcp", conn.Target(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	// The preface and an empty SETTINGS frame.
	if _, err := nc.Write(append([]byte(h2Preface), 0, 0, 0, h2FrameSettings, 0, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	var window, connWindow uint32
	for window == 0 || connWindow == 0 {
		var h [9]byte
		if _, err := io.ReadFull(nc, h[:]); err != nil {
			t.Fatalf("got call window %d and connection window %d before %v", window, connWindow, err)
		}
		payload := make([]byte, int(h[0])<<16|int(h[1])<<8|int(h[2]))
		if _, err := io.ReadFull(nc, payload); err != nil {
			t.Fatal(err)
		}
		stream := binary.BigEndian.Uint32(h[5:]) &^ (1 << 31)
		switch {
		case h[3] == h2FrameSettings && h[4]&h2FlagAck == 0:
			for p := payload; len(p) >= 6; p = p[6:] {
				if binary.BigEndian.Uint16(p) == h2InitialWindowSize {
					window = binary.BigEndian.Uint32(p[2:])
				}
			}
			if window == 0 {
				t.Fatal("the server's SETTINGS have no INITIAL_WINDOW_SIZE")
			}
		case h[3] == h2FrameWindowUpdate && stream == 0:
			connWindow = h2DefaultWindow + binary.BigEndian.Uint32(payload)&^(1<<31)
		}
	}
	if window != WindowSize || connWindow != WindowSize {
		t.Errorf("got call window %d, connection window %d, want %d each", window, connWindow, WindowSize)
	}
}

// TestGRPCServerStreamWorkers: a server keeps StreamWorkers goroutines to
// serve calls.
func TestGRPCServerStreamWorkers(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, mustParse(t, "domain: d\n"), Options{})
	serveGRPC(t, svc)
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	// One block per goroutine; a worker is one that runs serverWorker or,
	// not started yet, was created to (other tests' servers may have
	// workers too).
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "grpc.(*Server).serverWorker") || strings.Contains(g, "created by google.golang.org/grpc.(*Server).initServerWorkers") {
			n++
		}
	}
	if n < StreamWorkers {
		t.Errorf("%d goroutines serving calls, want at least %d", n, StreamWorkers)
	}
}
