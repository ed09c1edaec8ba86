package resp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/resp"
	"github.com/ratelimitd/ratelimitd/table"
)

// malformed returns a frame that is bad in one of the ways a client can
// get it wrong, and whether it is complete RESP (answered with an error,
// the connection kept) rather than broken RESP (the connection closed,
// after an error when the fault can be seen).
func malformed(r *rand.Rand) (frame string, complete bool) {
	num := func() string {
		return []string{"x", "1.5", "", "-", "+", "9223372036854775808", "-9223372036854775809", "0x10", " 1", "1e3", "١"}[r.IntN(11)]
	}
	switch r.IntN(14) {
	case 0: // truncated
		f := frameOf("CL.THROTTLE", "k", "1", "1", "1")
		return f[:1+r.IntN(len(f)-1)], false
	case 1: // a bulk length that lies
		n := 3 + r.IntN(5)
		return "*1\r\n$" + strconv.Itoa(n) + "\r\n" + strings.Repeat("p", n-1-r.IntN(2)) + "\r\n\r\n", false
	case 2: // a huge bulk length
		return "*2\r\n$4\r\nECHO\r\n$" + strconv.FormatInt(r.Int64N(1<<62)+5000, 10) + "\r\n", false
	case 3: // a huge or negative array length
		return []string{"*99999999999\r\n", "*-1\r\n", "*0\r\n", "*33\r\n", "*1x\r\n", "*\r\n"}[r.IntN(6)], false
	case 4: // not a bulk string where one must be
		c := byte('!' + r.IntN(90))
		if c == '$' {
			c = '%'
		}
		return "*2\r\n$4\r\nPING\r\n" + string(c) + "3\r\nabc\r\n", false
	case 5: // a bad bulk length
		return "*1\r\n$" + []string{"-1", "x", "", "1 ", "99999999999999999999"}[r.IntN(5)] + "\r\n", false
	case 6: // inline garbage: unbalanced quotes
		return []string{`PING "a`, `ECHO 'x`, `a"b" c`, `"a"b`}[r.IntN(4)] + "\r\n", false
	case 7: // an inline line over the limit
		return strings.Repeat("A", 16<<10+1+r.IntN(1000)), false
	case 8: // wrong arity
		return frameOf([]string{"CL.THROTTLE", "RL.CHECK", "RL.RULE", "RL.REFUND", "ECHO", "SELECT", "AUTH", "CONFIG"}[r.IntN(8)]), true
	case 9: // non-integers and overflows
		args := []string{"CL.THROTTLE", "k", "1", "1", "1", "1"}
		args[2+r.IntN(4)] = num()
		return frameOf(args...), true
	case 10:
		args := []string{"RL.CHECK", "k", "1000", "5", "HITS", "1", "BURST", "1"}
		args[[]int{2, 3, 5, 7}[r.IntN(4)]] = num() // scale, limit, or an option's value
		return frameOf(args...), true
	case 11: // unknown commands, with odd bytes
		b := make([]byte, 1+r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return frameOf("X"+string(b), string(b)), true
	case 12: // inline garbage that is complete
		return "GET \x00\xff k\r\n", true
	default: // a bulk string over the limit
		return frameOf("ECHO", strings.Repeat("e", 4097)), false
	}
}

// frameOf is frame, for the generator.
func frameOf(args ...string) string { return frame(args...) }

// TestMalformedFrames sends 10,000 malformed frames (1,000 with -short),
// from 8 clients at once, and checks that each is answered with errors
// only, complete RESP on a connection that goes on, broken RESP closing
// its connection, never blocking the server: a healthy client is served
// throughout, and every connection is gone at the end.
func TestMalformedFrames(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		n := 10000
		if testing.Short() {
			n = 1000
		}
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		sys, _ := manualSystem(t)
		obs := newCounter()
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys, Observer: obs, Rules: testRules(t)})

		healthy := newClient(t, addr, 1, "")
		stop := make(chan struct{})
		var served atomic.Int64
		healthyDone := make(chan error, 1)
		go func() {
			ctx := context.Background()
			for {
				select {
				case <-stop:
					healthyDone <- nil
					return
				default:
				}
				got, err := healthy.Do(ctx, "RL.CHECK", "healthy", "1h", 1, "HITS", 0).Int64Slice()
				if err != nil || len(got) != 6 || got[0] != 1 {
					healthyDone <- fmt.Errorf("healthy client: got %v, %v", got, err)
					return
				}
				served.Add(1)
			}
		}()

		var wg sync.WaitGroup
		var sent atomic.Int64
		for w := range 8 {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			wg.Go(func() {
				var keep *rawConn // a connection for complete frames
				defer func() {
					if keep != nil {
						_ = keep.nc.Close()
					}
				}()
				for sent.Add(1) <= int64(n) {
					f, complete := malformed(r)
					if complete {
						if keep == nil {
							keep = dialRaw(t, addr)
						}
						keep.send(f)
						got, err := keep.reply()
						if err != nil || got[0] != '-' {
							t.Errorf("%q: got %q, %v; want an error reply", f, got, err)
							return
						}
						continue
					}
					c := dialRaw(t, addr)
					c.send(f)
					_ = c.nc.(*net.TCPConn).CloseWrite()
					for {
						got, err := c.reply()
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil || got[0] != '-' {
							t.Errorf("%q: got %q, %v; want error replies, then the connection closed", f, got, err)
							return
						}
					}
					_ = c.nc.Close()
				}
			})
		}
		wg.Wait()
		close(stop)
		if err := <-healthyDone; err != nil {
			t.Fatal(err)
		}
		if served.Load() == 0 {
			t.Error("the healthy client was never served")
		}
		// Every connection but the healthy one is closed.
		waitFor(t, "the malformed connections to close", func() bool {
			return obs.conn(resp.ConnOpened)-obs.conn(resp.ConnClosed) == 1
		})
		if got := obs.conn(resp.ConnProtocolError); got == 0 {
			t.Error("no protocol error observed")
		}
		t.Logf("%d frames; the healthy client was served %d times; %d protocol errors", n, served.Load(), obs.conn(resp.ConnProtocolError))
	})
}

// TestLimits checks the exact replies to frames over the limits and to
// broken RESP: the replies to what came before it, then Redis's protocol
// error, then the connection closes, while another connection is served.
func TestLimits(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys, MaxArgs: 12, MaxBulk: 2000, MaxInline: 100})
		other := dialRaw(t, addr)
		args13 := make([]string, 13)
		for i := range args13 {
			args13[i] = "PING"
		}
		cases := []struct {
			send, want string
			alone      bool // sent without a command before it
		}{
			{frame(args13...), "-ERR Protocol error: invalid multibulk length\r\n", false},
			{frame("ECHO", strings.Repeat("e", 2001)), "-ERR Protocol error: invalid bulk length\r\n", false},
			{strings.Repeat("P", 101), "-ERR Protocol error: too big inline request\r\n", false},
			{"*2\r\n$4\r\nECHO\r\n:3\r\n", "-ERR Protocol error: expected '$', got ':'\r\n", false},
			{"*1\r\n$4\r\nPINGX\r\n", "-ERR Protocol error: invalid bulk length\r\n", false},
			{"*0\r\n", "-ERR Protocol error: invalid multibulk length\r\n", false},
			{"*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n", false},
			{"PING 'a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", true}, // redcon's own check, not the scanner's
		}
		for _, tc := range cases {
			c := dialRaw(t, addr)
			if tc.alone {
				c.send(tc.send)
			} else {
				c.send(frame("PING") + tc.send)
				if got := c.mustReply(); got != "+PONG\r\n" {
					t.Errorf("%.40q: first reply %q, want +PONG", tc.send, got)
				}
			}
			if got := c.mustReply(); got != tc.want {
				t.Errorf("%.40q: got %q, want %q", tc.send, got, tc.want)
			}
			if got, err := c.reply(); !errors.Is(err, io.EOF) {
				t.Errorf("%.40q: then got %q, %v; want the connection closed", tc.send, got, err)
			}
			other.send(frame("PING"))
			if got := other.mustReply(); got != "+PONG\r\n" {
				t.Errorf("the other connection: got %q", got)
			}
		}
		// At the limits, all is well; over MaxIDLen, a clean error.
		c := dialRaw(t, addr)
		c.send(frame("ECHO", strings.Repeat("e", 2000)) + strings.Repeat(" ", 94) + "PING\r\n" +
			frame("RL.REFUND", "i", "1m", "1", "HITS", "1", "ALGORITHM", "fixed_window", "BURST", "0", "WINDOW", "5") +
			frame("CL.THROTTLE", strings.Repeat("k", table.MaxIDLen+1), "1", "1", "1"))
		for i, want := range []string{
			"$2000\r\n" + strings.Repeat("e", 2000) + "\r\n",
			"+PONG\r\n",
			ints(1, 0, 1, 1, 60000, 0),
			"-ERR key: must be at most 1024 bytes\r\n",
		} {
			if got := c.mustReply(); got != want {
				t.Errorf("at the limits, reply %d: got %.60q, want %.60q", i, got, want)
			}
		}
	})
}

// TestLongFrames checks that a frame longer than the read buffer, and
// many frames that straddle reads (sent a few bytes at a time), are served
// exactly.
func TestLongFrames(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys, MaxBulk: 64 << 10})
		c := dialRaw(t, addr)
		long := strings.Repeat("abcdefgh", 5000)
		c.send(frame("ECHO", long) + frame("PING"))
		if got, want := c.mustReply(), "$40000\r\n"+long+"\r\n"; got != want {
			t.Errorf("long ECHO: got %d bytes, want %d", len(got), len(want))
		}
		if got := c.mustReply(); got != "+PONG\r\n" {
			t.Errorf("after it: got %q", got)
		}
		stream := strings.Repeat(frame("PING")+"PING\r\n", 200)
		go func() {
			for i := 0; i < len(stream); i += 5 {
				if _, err := c.nc.Write([]byte(stream[i:min(i+5, len(stream))])); err != nil {
					return
				}
			}
		}()
		for i := range 400 {
			if got := c.mustReply(); got != "+PONG\r\n" {
				t.Fatalf("dripped PING %d: got %q", i, got)
			}
		}
	})
}

// TestMaxConns checks that a connection over the cap is answered Redis's
// error and closed, and that a place freed is taken again.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		obs := newCounter()
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys, MaxConns: 2, Observer: obs})
		a, b := dialRaw(t, addr), dialRaw(t, addr)
		for _, c := range []*rawConn{a, b} {
			c.send(frame("PING"))
			if got := c.mustReply(); got != "+PONG\r\n" {
				t.Fatalf("PING: got %q", got)
			}
		}
		over := dialRaw(t, addr)
		if got := over.mustReply(); got != "-ERR max number of clients reached\r\n" {
			t.Errorf("over the cap: got %q", got)
		}
		if got, err := over.reply(); !errors.Is(err, io.EOF) {
			t.Errorf("over the cap, then: got %q, %v; want the connection closed", got, err)
		}
		if got := obs.conn(resp.ConnRejected); got != 1 {
			t.Errorf("rejected: got %d, want 1", got)
		}
		_ = a.nc.Close()
		waitFor(t, "a connection to close", func() bool { return obs.conn(resp.ConnClosed) == 1 })
		c := dialRaw(t, addr)
		c.send(frame("PING"))
		if got := c.mustReply(); got != "+PONG\r\n" {
			t.Errorf("after a place freed: got %q", got)
		}
	})
}

// TestTimeouts checks that a command that does not arrive in full within
// ReadTimeout, and a connection idle for IdleTimeout, are closed.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		obs := newCounter()
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys, ReadTimeout: 50 * time.Millisecond, IdleTimeout: -1, Observer: obs})
		partial := dialRaw(t, addr)
		partial.send(frame("PING") + "*1\r\n$4\r\nPI")
		if got := partial.mustReply(); got != "+PONG\r\n" {
			t.Errorf("PING: got %q", got)
		}
		if got, err := partial.reply(); !errors.Is(err, io.EOF) {
			t.Errorf("a partial command: got %q, %v; want the connection closed", got, err)
		}
		waitFor(t, "the read timeout observed", func() bool { return obs.conn(resp.ConnTimedOut) == 1 })

		obs2 := newCounter()
		_, addr2 := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys, IdleTimeout: 50 * time.Millisecond, Observer: obs2})
		idle := dialRaw(t, addr2)
		if got, err := idle.reply(); !errors.Is(err, io.EOF) {
			t.Errorf("an idle connection: got %q, %v; want it closed", got, err)
		}
		waitFor(t, "the idle timeout observed", func() bool { return obs2.conn(resp.ConnTimedOut) == 1 })
	})
}

// TestInlineErrorAfterCommands checks that the commands read with an
// inline command redcon cannot parse are answered first, in order, as
// Redis answers them, then the protocol error, then the connection closes.
func TestInlineErrorAfterCommands(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys})
		c := dialRaw(t, addr)
		c.send(frame("PING") + "ECHO x\r\n" + frame("CL.THROTTLE", "k", "0", "1", "60") + "PING 'a\r\n" + frame("PING"))
		for i, want := range []string{"+PONG\r\n", "$1\r\nx\r\n", ints(0, 1, 0, -1, 60), "-ERR Protocol error: unbalanced quotes in request\r\n"} {
			if got := c.mustReply(); got != want {
				t.Errorf("reply %d: got %q, want %q", i, got, want)
			}
		}
		if got, err := c.reply(); !errors.Is(err, io.EOF) {
			t.Errorf("then got %q, %v; want the connection closed", got, err)
		}
	})
}

// TestWriteTimeout checks that a connection whose client stops reading
// its replies is closed once a write has waited Options.WriteTimeout for
// room in the socket, while another connection is served.
func TestWriteTimeout(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		obs := newCounter()
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys, WriteTimeout: 100 * time.Millisecond, Observer: obs})
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.(*net.TCPConn).SetReadBuffer(4096)
		batch := []byte(strings.Repeat(frame("ECHO", strings.Repeat("x", 4000)), 64)) // 256 KB of replies
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			for {
				if _, err := nc.Write(batch); err != nil {
					return // the server closed it
				}
			}
		}()
		waitFor(t, "the connection that reads nothing closed", func() bool { return obs.conn(resp.ConnClosed) == 1 })
		other := dialRaw(t, addr)
		other.send(frame("PING"))
		if got := other.mustReply(); got != "+PONG\r\n" {
			t.Errorf("the other connection: got %q", got)
		}
		_ = nc.Close()
		<-sent
	})
}
