package resp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// pipeConn returns a frameConn over one end of a pipe and the other end.
func pipeConn(t *testing.T, opts Options) (*frameConn, net.Conn) {
	t.Helper()
	opts.Checker = nopChecker{}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	server, client := net.Pipe()
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return newFrameConn(server, s, false), client
}

// nopChecker is a Checker for tests that never check.
type nopChecker struct{}

func (nopChecker) Check(context.Context, table.Request) (table.Decision, error) {
	return table.Decision{}, nil
}

func (nopChecker) Refund(context.Context, table.Request) (table.Decision, error) {
	return table.Decision{}, nil
}

// TestFrameConnWholeFrames checks that frames hands on whole frames only
// when a write splits one, and that a frame longer than the read buffer
// grows it until the frame is whole, the buffer going back to readChunk
// once that frame is consumed.
func TestFrameConnWholeFrames(t *testing.T) {
	t.Parallel()
	fc, client := pipeConn(t, Options{MaxBulk: 1 << 20})
	long := frameBytes("ECHO", strings.Repeat("x", 3*readChunk))
	writes := []string{"PING\r\nPI", "NG\r\n*1\r\n$4\r\nPI", "NG\r\n", long[:100], long[100:] + "PI", "NG\r\n"}
	go func() {
		for _, w := range writes {
			if _, err := client.Write([]byte(w)); err != nil {
				return
			}
		}
	}()
	next := func() string {
		b, err := fc.frames()
		if err != nil {
			t.Fatalf("frames: %v", err)
		}
		got := string(b)
		fc.consume(len(b))
		return got
	}
	for i, want := range []string{"PING\r\n", "PING\r\n", "*1\r\n$4\r\nPING\r\n"} {
		if got := next(); got != want {
			t.Fatalf("read %d: got %q, want %q", i, got, want)
		}
	}
	if got := next(); got != long {
		t.Fatalf("the long frame came back as %d bytes, want %d", len(got), len(long))
	}
	if got := next(); got != "PING\r\n" {
		t.Errorf("after the long frame: got %q", got)
	}
	if len(fc.buf) != readChunk {
		t.Errorf("the buffer holds %d bytes after the long frame, want %d", len(fc.buf), readChunk)
	}
}

// TestFrameConnParse feeds a stream through a frameConn a few bytes at a
// time and parses what frames hands on, as the server does: every command
// comes out whole, its arguments in place.
func TestFrameConnParse(t *testing.T) {
	t.Parallel()
	fc, client := pipeConn(t, Options{})
	stream := strings.Repeat(frameBytes("CL.THROTTLE", "k", "1", "2", "3")+"PING x\r\n", 300) + "  \r\n"
	go func() {
		for i := 0; i < len(stream); i += 7 {
			if _, err := client.Write([]byte(stream[i:min(i+7, len(stream))])); err != nil {
				return
			}
		}
		_ = client.Close()
	}()
	var n int
	var args [][]byte
	for {
		frames, err := fc.frames()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for rest := frames; len(rest) > 0; {
			var perr error
			args, rest, perr = parseFrame(rest, args[:0])
			if perr != nil {
				t.Fatal(perr)
			}
			if len(args) == 0 {
				continue // the blank line at the end
			}
			want := "CL.THROTTLE k 1 2 3"
			if n%2 == 1 {
				want = "PING x"
			}
			if got := string(bytes.Join(args, []byte(" "))); got != want {
				t.Fatalf("command %d: got %q, want %q", n, got, want)
			}
			n++
		}
		fc.consume(len(frames))
	}
	if n != 600 {
		t.Errorf("got %d commands, want 600", n)
	}
}

// TestScannerLimits checks the scanner's verdicts frame by frame.
func TestScannerLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		end  int
		fail string
	}{
		{"*1\r\n$4\r\nPING\r\n", 14, ""},
		{"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI", 14, ""},
		{"PING\r\nPING", 6, ""},
		{"\n", 1, ""},
		{"*3\r\n", -1, ""},
		{"*4\r\n", -1, "Protocol error: invalid multibulk length"},
		{"*0\r\n", -1, "Protocol error: invalid multibulk length"},
		{"*1\r\n$11\r\n", -1, "Protocol error: invalid bulk length"},
		{"*1\r\n$10\r\n0123456789\r\n", 21, ""},
		{"*1\r\n$1\r\nab\r\n", -1, "Protocol error: invalid bulk length"},
		{"*1\r\n+1\r\n", -1, "Protocol error: expected '$', got '+'"},
		{"PING\r\n" + strings.Repeat("a", 21), 6, "Protocol error: too big inline request"},
		{strings.Repeat("a", 20) + "\r\n", 22, ""},
		{strings.Repeat("a", 20) + "\n", 21, ""},
		{strings.Repeat("a", 21) + "\n", -1, "Protocol error: too big inline request"},
		{strings.Repeat("a", 20) + "\r", -1, ""},
	}
	for _, tc := range cases {
		s := scanner{maxArgs: 3, maxBulk: 10, maxInline: 20}
		end, err := s.scan([]byte(tc.in))
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if end != tc.end || msg != tc.fail {
			t.Errorf("%q: got %d, %q; want %d, %q", tc.in, end, msg, tc.end, tc.fail)
		}
	}
}

// FuzzScanner checks that every array frame the scanner passes is one
// redcon parses into as many arguments as it announces, and that the
// server's parseFrame, in place, gives the arguments redcon.Parse gives,
// for inline frames too, and nothing after the frame.
func FuzzScanner(f *testing.F) {
	for _, seed := range []string{
		frameBytes("CL.THROTTLE", "k", "1", "2", "3"),
		"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
		"PING\r\n*1\r\n$4\r\nPING\r\n",
		"*1\r\n$3\r\nab\r\n",
		"*001\r\n$04\r\nPING\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Byte by byte, so that every frame end is seen.
		s := scanner{maxArgs: 8, maxBulk: 64, maxInline: 64}
		start := 0
		for i := range b {
			end, err := s.scan(b[i : i+1])
			if err != nil {
				return
			}
			if end < 0 {
				continue
			}
			fr := b[start : i+1]
			start = i + 1
			if s.mid() {
				t.Fatalf("%q: scanner mid-frame after a frame end", fr)
			}
			checkParseFrame(t, fr)
			if fr[0] != '*' {
				continue
			}
			// Scanned whole, the frame ends exactly at its end.
			one := scanner{maxArgs: 8, maxBulk: 64, maxInline: 64}
			if e, err := one.scan(fr); e != len(fr) || err != nil {
				t.Fatalf("%q whole: end %d, %v", fr, e, err)
			}
			cmd, err := redcon.Parse(fr)
			if err != nil {
				t.Fatalf("scanner passed %q, redcon says %v", fr, err)
			}
			n, _ := strconv.Atoi(string(fr[1:bytes.IndexByte(fr, '\r')]))
			if len(cmd.Args) != n {
				t.Fatalf("%q: redcon parsed %d arguments, want %d", fr, len(cmd.Args), n)
			}
		}
	})
}

// checkParseFrame checks parseFrame on fr, one whole frame the scanner
// passed, followed by more bytes, against redcon.Parse.
func checkParseFrame(t *testing.T, fr []byte) {
	t.Helper()
	after := []byte("*1\r\n$4\r\nPING\r\n")
	in := append(append([]byte(nil), fr...), after...)
	args, rest, err := parseFrame(in, nil)
	if !bytes.Equal(rest, after) {
		t.Fatalf("%q: parseFrame left %q, want %q", fr, rest, after)
	}
	cmd, rerr := redcon.Parse(fr)
	switch {
	case fr[0] != '*' && len(bytes.TrimLeft(bytes.TrimSuffix(bytes.TrimSuffix(fr, []byte("\n")), []byte("\r")), " ")) == 0:
		// A blank line: redcon.Parse finds no command in it; the server skips it.
		if len(args) != 0 || err != nil {
			t.Fatalf("%q: a blank line parsed as %q, %v", fr, args, err)
		}
	case err != nil || rerr != nil:
		if (err == nil) != (rerr == nil) || fr[0] == '*' {
			t.Fatalf("%q: parseFrame says %v, redcon.Parse %v", fr, err, rerr)
		}
		if err.Error() != rerr.Error() {
			t.Fatalf("%q: parseFrame says %q, redcon.Parse %q", fr, err, rerr)
		}
	default:
		if len(args) != len(cmd.Args) {
			t.Fatalf("%q: parseFrame gave %d arguments, redcon.Parse %d", fr, len(args), len(cmd.Args))
		}
		for i := range args {
			if !bytes.Equal(args[i], cmd.Args[i]) {
				t.Fatalf("%q: argument %d is %q, redcon.Parse's %q", fr, i, args[i], cmd.Args[i])
			}
		}
	}
}

// FuzzCommand checks the mapping of a command's frame to its check: bad
// input is an error reply of one line; anything else is a valid request
// whose decision, from a real table, makes a reply within its bounds.
func FuzzCommand(f *testing.F) {
	for _, seed := range [][]string{
		{"CL.THROTTLE", "k", "15", "30", "60", "1"},
		{"CL.THROTTLE", "k", "0", "1", "1", "0"},
		{"CL.THROTTLE", "k", "-1", "1", "1"},
		{"CL.THROTTLE", "k", "9223372036854775806", "9223372036854775807", "1", "9223372036854775807"},
		{"RL.CHECK", "u", "1s", "5", "HITS", "2", "ALGORITHM", "sliding_window", "BURST", "3"},
		{"RL.CHECK", "u", "8784h", "1", "ALGORITHM", "leaky_bucket"},
		{"RL.RULE", "api", "u", "HITS", "0"},
		{"RL.RULE", "shadow", "u"},
		{"RL.REFUND", "u", "100", "5", "HITS", "2", "WINDOW", "9"},
		{"RL.REFUNDRULE", "api", "u", "HITS", "1"},
		{"DEL", "k", "user:42"},
		{"UNLINK", "k"},
	} {
		f.Add([]byte(frameBytes(seed...)))
	}
	store, err := rules.NewStore([]rules.Rule{
		{Name: "api", Policy: table.Policy{Scale: time.Second, Limit: 2}},
		{Name: "shadow", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Minute, Limit: 1}, Shadow: true},
	})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		// Only what the server lets through to redcon: one whole frame
		// within the default limits.
		sc := scanner{maxArgs: DefaultMaxArgs, maxBulk: DefaultMaxBulk, maxInline: DefaultMaxInline}
		if end, err := sc.scan(b); err != nil || end != len(b) {
			return
		}
		cmd, err := redcon.Parse(b)
		if err != nil || len(cmd.Args) == 0 {
			return
		}
		tab := table.New(table.Config{})
		id := lookup(cmd.Args[0])
		var msg string
		switch id {
		case cmdThrottle:
			var th throttle
			th, msg = parseThrottle(cmd.Args)
			if msg != "" {
				break
			}
			if err := th.req.Validate(); err != nil || th.req.Namespace != throttleNamespace || th.req.Algorithm != table.TokenBucket {
				t.Fatalf("%q: request %+v (%v)", b, th.req, err)
			}
			for range 2 {
				r := th.reply(tab.Apply(th.req, now))
				if r[0] != 0 && r[0] != 1 || r[1] != th.req.Burst || r[2] < 0 || r[2] > r[1] || r[4] < 0 ||
					(r[3] == -1) != (r[0] == 0 || th.quantity > th.req.Burst) || r[3] < -1 {
					t.Fatalf("%q: reply %v", b, r)
				}
			}
		case cmdCheck, cmdRule, cmdRefund, cmdRefundRule:
			var nat native
			nat, msg = parseNative(cmd.Args, id == cmdRule || id == cmdRefundRule, id == cmdRefund || id == cmdRefundRule, store)
			if msg != "" {
				break
			}
			if err := nat.req.Validate(); err != nil {
				t.Fatalf("%q: request %+v: %v", b, nat.req, err)
			}
			r := nat.reply(tab.Apply(nat.req, now))
			for _, v := range r {
				if v < 0 {
					t.Fatalf("%q: reply %v", b, r)
				}
			}
		case cmdDel, cmdUnlink:
			// A key DEL accepts is one CL.THROTTLE can have counted, and
			// DEL deletes that count.
			for _, k := range cmd.Args[1:] {
				if msg = keyErr(k); msg != "" {
					break
				}
				req := table.Request{ID: string(k), Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Second, Limit: 1}, Hits: 1, Namespace: throttleNamespace}
				if err := req.Validate(); err != nil {
					t.Fatalf("%q: key %q accepted, but %v", b, k, err)
				}
				tab.Apply(req, now)
				if n := tab.ResetID(throttleNamespace, string(k), now); n != 1 {
					t.Fatalf("%q: key %q: ResetID deleted %d buckets, want 1", b, k, n)
				}
			}
		default:
			return
		}
		if msg == "" {
			return
		}
		out := string(appendError(nil, msg))
		if !strings.HasPrefix(msg, "ERR ") && !strings.HasPrefix(msg, cellPrefix) || strings.Index(out, "\r\n") != len(out)-2 {
			t.Fatalf("%q: error reply %q", b, out)
		}
	})
}

// frameBytes is the RESP encoding of a command.
func frameBytes(args ...string) string {
	s := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		s += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
	}
	return s
}

// TestIdleDeadlineSetLazily checks the read deadlines of readSocket: reads
// that come within the slack (IdleTimeout/idleSlackDiv) of each other
// leave the socket's deadline where the first set it, and a read whose
// deadline set is earlier than the one wanted goes on to the one wanted:
// it never ends before it.
func TestIdleDeadlineSetLazily(t *testing.T) {
	t.Parallel()
	const idle = 1600 * time.Millisecond // a slack of 100 ms
	fc, client := pipeConn(t, Options{IdleTimeout: idle})
	go func() {
		for range 3 {
			if _, err := client.Write([]byte("PING\r\n")); err != nil {
				return
			}
		}
	}()
	var first time.Time
	for i := range 3 {
		b, err := fc.frames()
		if err != nil {
			t.Fatalf("frames %d: %v", i, err)
		}
		fc.consume(len(b))
		if i == 0 {
			first = fc.armed
		}
	}
	if !fc.armed.Equal(first) || !fc.want.After(first) {
		t.Fatalf("after three reads within the slack: deadline set %v, wanted %v; want the first (%v) kept and a later one wanted", fc.armed, fc.want, first)
	}
	// The deadline set comes 50 ms before the one the next read wants.
	start := time.Now()
	fc.mu.Lock()
	fc.armed = start.Add(idle - 50*time.Millisecond)
	_ = fc.nc.SetReadDeadline(fc.armed)
	fc.mu.Unlock()
	_, err := fc.frames()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle read: %v, want the deadline exceeded", err)
	}
	if waited := time.Since(start); waited < idle {
		t.Errorf("the idle read ended after %v, before the idle timeout of %v", waited, idle)
	}
}
