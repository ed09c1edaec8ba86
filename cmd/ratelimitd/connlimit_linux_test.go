//go:build linux

package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/sockio"
)

// TestConnLimiterRawIO: a TCP connection the limiter accepts reads and
// writes its socket by raw I/O (sockio.Conn) and keeps what net/http asks
// of it through the limiter: bytes both ways, the read deadline, the
// half-close before an error answer (CloseWrite), ReadFrom; closing it
// frees its slot.
func TestConnLimiterRawIO(t *testing.T) {
	t.Parallel()
	u := startLimiter(t, 4)
	client := u.dial()
	c := u.next()
	lc, ok := c.(*limitedConn)
	if !ok {
		t.Fatalf("accepted %T, want *limitedConn", c)
	}
	if _, ok := lc.Conn.(*sockio.Conn); !ok {
		t.Fatalf("the limited connection reads and writes through %T, want *sockio.Conn", lc.Conn)
	}

	if _, err := client.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil || req.URL.Path != "/" {
		t.Fatalf("the request read through the limiter: %v, %v", req, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %d, %v; want os.ErrDeadlineExceeded", n, err)
	}
	_ = c.SetReadDeadline(time.Time{})

	if _, err := c.Write([]byte("HTTP/1.1 400 Bad Request\r\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := lc.ReadFrom(io.LimitReader(zeros{}, 3)); n != 3 || err != nil {
		t.Fatalf("ReadFrom: %d, %v", n, err)
	}
	if err := lc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(client)
	if string(b) != "HTTP/1.1 400 Bad Request\r\n\x00\x00\x00" || err != nil {
		t.Fatalf("the client read %q, %v; want the answer, then EOF (half-closed)", b, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	u.waitFor("its slot freed", func(s metrics.ConnStats) bool { return s.Open == 0 })
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
