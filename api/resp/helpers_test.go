package resp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/api/resp"
)

// clientLog records what go-redis logs: every test's clients must connect
// and talk without it logging a thing.
var clientLog = &recordingLogger{}

type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

func TestMain(m *testing.M) {
	redis.SetLogger(clientLog)
	code := m.Run()
	if len(clientLog.lines) > 0 {
		fmt.Fprintf(os.Stderr, "go-redis logged %d lines, want none:\n%s\n", len(clientLog.lines), strings.Join(clientLog.lines, "\n"))
		code = 1
	}
	os.Exit(code)
}

// epoch is where the manual clocks of the tests start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// startSystem starts a real actor system on clock (nil: the system
// clock), stopped when the test ends.
func startSystem(t testing.TB, clock actors.Clock) *actors.System {
	t.Helper()
	sys, err := actors.Start(context.Background(), actors.Config{Clock: clock, SweepInterval: -1, Shards: 4})
	if err != nil {
		t.Fatalf("actors.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return sys
}

// manualSystem starts a system on a manual clock reading epoch.
func manualSystem(t testing.TB) (*actors.System, *clocktest.Manual) {
	clock := clocktest.New(epoch)
	return startSystem(t, clock), clock
}

// startServer serves resp.New(opts) on a loopback listener, closed when
// the test ends, and returns it with its address. Stopped and Unavailable
// default to the actors errors.
func startServer(t testing.TB, opts resp.Options) (*resp.Server, string) {
	t.Helper()
	if opts.Stopped == nil {
		opts.Stopped = actors.ErrStopped
	}
	if opts.Unavailable == nil {
		opts.Unavailable = actors.ErrUnavailable
	}
	srv, err := resp.New(opts)
	if err != nil {
		t.Fatalf("resp.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; !errors.Is(err, resp.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return srv, ln.Addr().String()
}

// newClient returns a go-redis client of addr with a pool of size
// connections (default settings otherwise: it says HELLO 3 and CLIENT
// SETINFO on connect), closed when the test ends.
func newClient(t testing.TB, addr string, size int, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: size, Password: password, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// throttle sends CL.THROTTLE args and returns the 5 integers.
func throttle(t testing.TB, c *redis.Client, args ...any) []int64 {
	t.Helper()
	v, err := c.Do(context.Background(), append([]any{"CL.THROTTLE"}, args...)...).Int64Slice()
	if err != nil {
		t.Fatalf("CL.THROTTLE %v: %v", args, err)
	}
	return v
}

// doErr sends a command that must fail and returns its error text.
func doErr(t testing.TB, c *redis.Client, args ...any) string {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err == nil {
		t.Fatalf("%v: got %v, want an error", args, v)
	}
	return err.Error()
}

// rawConn is a plain TCP connection for sending exact bytes.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	rd *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	return dialRawFrom(t, nil, addr)
}

// dialRawFrom is dialRaw from the local address local (nil: any).
func dialRawFrom(t testing.TB, local net.Addr, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: local}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	return &rawConn{t: t, nc: nc, rd: bufio.NewReader(nc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// reply reads one reply and returns it as the bytes sent, arrays whole.
func (c *rawConn) reply() (string, error) {
	line, err := c.rd.ReadString('\n')
	if err != nil {
		return line, err
	}
	switch line[0] {
	case '$':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		if n < 0 {
			return line, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.rd, buf); err != nil {
			return line, err
		}
		return line + string(buf), nil
	case '*':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		s := line
		for range n {
			r, err := c.reply()
			s += r
			if err != nil {
				return s, err
			}
		}
		return s, nil
	}
	return line, nil
}

func (c *rawConn) mustReply() string {
	c.t.Helper()
	r, err := c.reply()
	if err != nil {
		c.t.Fatalf("read reply: %v (got %q)", err, r)
	}
	return r
}

// rawStep is bytes to send and the one reply they must get.
type rawStep struct{ send, want string }

// exchange sends each step in turn and fails the test at the first reply
// that is not the step's.
func (c *rawConn) exchange(steps ...rawStep) {
	c.t.Helper()
	for i, s := range steps {
		c.send(s.send)
		if got := c.mustReply(); got != s.want {
			c.t.Fatalf("step %d: %q: got %q, want %q", i, s.send, got, s.want)
		}
	}
}

// ints is the RESP encoding of an array of integers.
func ints(ns ...int64) string {
	s := "*" + strconv.Itoa(len(ns)) + "\r\n"
	for _, n := range ns {
		s += ":" + strconv.FormatInt(n, 10) + "\r\n"
	}
	return s
}

// frame is the RESP encoding of a command.
func frame(args ...string) string {
	s := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		s += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
	}
	return s
}

// counter is a resp.Observer that counts.
type counter struct {
	mu       sync.Mutex
	commands map[string]int // "name result"
	conns    map[resp.ConnEvent]int
	batches  []int
}

func newCounter() *counter {
	return &counter{commands: map[string]int{}, conns: map[resp.ConnEvent]int{}}
}

func (c *counter) Command(name string, res resp.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commands[name+" "+string(res)]++
}

func (c *counter) Batch(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, n)
}

func (c *counter) Conn(ev resp.ConnEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns[ev]++
}

func (c *counter) command(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commands[key]
}

func (c *counter) batchSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batches)
}
func (c *counter) conn(ev resp.ConnEvent) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns[ev]
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// bothModes runs test, in parallel, against servers serving their
// connections on event loops (the default) and on goroutines
// (Options.ConnGoroutines).
func bothModes(t *testing.T, test func(t *testing.T, goroutines bool)) {
	for _, goroutines := range []bool{false, true} {
		name := "loops"
		if goroutines {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, goroutines)
		})
	}
}
