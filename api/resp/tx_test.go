package resp_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/api/resp"
)

// TestTransactionGoRedis: go-redis's TxPipelined (MULTI, the commands,
// EXEC) gets each command's own reply, in order: three CL.THROTTLE of a
// bucket of 2 (two allowed, then limited), a PING, and an RL.CHECK with a
// bad argument, whose error is its element of EXEC's reply and fails no
// other.
func TestTransactionGoRedis(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{Checker: sys, ConnGoroutines: goroutines})
		c := newClient(t, addr, 1, "")
		ctx := context.Background()
		cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for range 3 {
				p.Do(ctx, "CL.THROTTLE", "tx", 1, 10, 60)
			}
			p.Ping(ctx)
			p.Do(ctx, "RL.CHECK", "tx", "soon", 5)
			return nil
		})
		if err == nil || !strings.HasPrefix(err.Error(), "ERR scale:") {
			t.Errorf("TxPipelined: error %v, want the RL.CHECK's scale error", err)
		}
		if len(cmds) != 5 {
			t.Fatalf("TxPipelined: %d replies, want 5", len(cmds))
		}
		want := [][]int64{{0, 2, 1, -1, 6}, {0, 2, 0, -1, 12}, {1, 2, 0, 6, 12}}
		for i, w := range want {
			got, err := cmds[i].(*redis.Cmd).Int64Slice()
			if err != nil || !slices.Equal(got, w) {
				t.Errorf("command %d: got %v, %v; want %v", i, got, err, w)
			}
		}
		if got, err := cmds[3].(*redis.StatusCmd).Result(); err != nil || got != "PONG" {
			t.Errorf("PING: got %q, %v; want PONG", got, err)
		}
		if err := cmds[4].Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR scale:") {
			t.Errorf("RL.CHECK tx soon 5: %v, want ERR scale: …", err)
		}
		// Counted once each: the next hit finds the bucket as EXEC left it.
		if got := throttle(t, c, "tx", 1, 10, 60); !slices.Equal(got, []int64{1, 2, 0, 6, 12}) {
			t.Errorf("CL.THROTTLE after EXEC: got %v, want [1 2 0 6 12]", got)
		}
	})
}

// TestTransactionErrors checks, byte for byte, what Redis answers around
// a transaction: EXEC and DISCARD without MULTI, MULTI with arguments or
// nested, a command that cannot be queued (unknown, AUTH, EXEC with an
// argument) which makes EXEC answer EXECABORT and count nothing, DISCARD,
// an empty transaction, a queued command with a bad argument (its error
// is its element of EXEC's reply), and QUIT, which closes at once.
func TestTransactionErrors(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{Checker: sys, ConnGoroutines: goroutines})
		c := dialRaw(t, addr)
		// The first hit of a bucket of 2 of each key (emission 6 s).
		first := ints(0, 2, 1, -1, 6)
		const execAbort = "-EXECABORT Transaction discarded because of previous errors.\r\n"
		c.exchange(
			rawStep{frame("EXEC"), "-ERR EXEC without MULTI\r\n"},
			rawStep{frame("DISCARD"), "-ERR DISCARD without MULTI\r\n"},
			rawStep{frame("MULTI", "now"), "-ERR wrong number of arguments for 'multi' command\r\n"},
			// A nested MULTI is refused without aborting.
			rawStep{frame("MULTI"), "+OK\r\n"},
			rawStep{frame("MULTI"), "-ERR MULTI calls can not be nested\r\n"},
			rawStep{frame("CL.THROTTLE", "a", "1", "10", "60"), "+QUEUED\r\n"},
			rawStep{frame("EXEC"), "*1\r\n" + first},
			// An unknown command aborts: nothing queued is counted.
			rawStep{frame("MULTI"), "+OK\r\n"},
			rawStep{frame("CL.THROTTLE", "b", "1", "10", "60"), "+QUEUED\r\n"},
			rawStep{frame("GET", "b"), "-ERR unknown command 'GET', with args beginning with: 'b' \r\n"},
			rawStep{frame("CL.THROTTLE", "b", "1", "10", "60"), "+QUEUED\r\n"},
			rawStep{frame("EXEC"), execAbort},
			rawStep{frame("CL.THROTTLE", "b", "1", "10", "60"), first},
			// So do AUTH and an EXEC with an argument.
			rawStep{frame("MULTI"), "+OK\r\n"},
			rawStep{frame("AUTH", "secret"), "-ERR Command not allowed inside a transaction\r\n"},
			rawStep{frame("EXEC"), execAbort},
			rawStep{frame("MULTI"), "+OK\r\n"},
			rawStep{frame("CL.THROTTLE", "c", "1", "10", "60"), "+QUEUED\r\n"},
			rawStep{frame("EXEC", "now"), "-ERR wrong number of arguments for 'exec' command\r\n"},
			rawStep{frame("EXEC"), execAbort},
			rawStep{frame("CL.THROTTLE", "c", "1", "10", "60"), first},
			// DISCARD drops what is queued.
			rawStep{frame("MULTI"), "+OK\r\n"},
			rawStep{frame("CL.THROTTLE", "d", "1", "10", "60"), "+QUEUED\r\n"},
			rawStep{frame("DISCARD"), "+OK\r\n"},
			rawStep{frame("CL.THROTTLE", "d", "1", "10", "60"), first},
			rawStep{frame("EXEC"), "-ERR EXEC without MULTI\r\n"},
			// An empty transaction.
			rawStep{frame("MULTI"), "+OK\r\n"},
			rawStep{frame("EXEC"), "*0\r\n"},
			// Bad arguments fail their own command at EXEC, no other.
			rawStep{frame("MULTI"), "+OK\r\n"},
			rawStep{frame("CL.THROTTLE", "e", "1", "10", "sixty"), "+QUEUED\r\n"},
			rawStep{frame("CL.THROTTLE", "e", "1", "10", "60"), "+QUEUED\r\n"},
			rawStep{frame("ECHO", "hi"), "+QUEUED\r\n"},
			rawStep{frame("EXEC"), "*3\r\n-Cell error: Store error: Couldn't parse as integer: sixty\r\n" + first + "$2\r\nhi\r\n"},
		)
		// QUIT inside MULTI answers OK and closes, running nothing.
		c.send(frame("MULTI") + frame("CL.THROTTLE", "f", "1", "10", "60") + frame("QUIT"))
		for _, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+OK\r\n"} {
			if got := c.mustReply(); got != want {
				t.Fatalf("MULTI, CL.THROTTLE, QUIT: got %q, want %q", got, want)
			}
		}
		if got, err := c.reply(); !errors.Is(err, io.EOF) {
			t.Fatalf("after QUIT: got %q, %v; want EOF", got, err)
		}
		c2 := dialRaw(t, addr)
		c2.send(frame("CL.THROTTLE", "f", "1", "10", "60"))
		if got := c2.mustReply(); got != first {
			t.Errorf("CL.THROTTLE f after a QUIT inside MULTI: got %q, want the first hit %q", got, first)
		}
	})
}

// TestTransactionPipelined: a whole transaction in one write (as clients
// send it) is answered in one piece and its checks are decided in one
// pass; a transaction of more commands than one pass takes is decided in
// passes of 1,000, every reply in its place.
func TestTransactionPipelined(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	obs := newCounter()
	_, addr := startServer(t, resp.Options{Checker: sys, Observer: obs})
	c := dialRaw(t, addr)

	const n = 2500
	var send, want strings.Builder
	send.WriteString(frame("MULTI"))
	want.WriteString("+OK\r\n")
	for i := range n {
		send.WriteString(frame("CL.THROTTLE", "k"+strconv.Itoa(i%1000), "1", "10", "60"))
		want.WriteString("+QUEUED\r\n")
	}
	send.WriteString(frame("EXEC"))
	c.send(send.String())
	for i := 0; i < n+1; i++ {
		if got := c.mustReply(); got != "+OK\r\n" && got != "+QUEUED\r\n" {
			t.Fatalf("reply %d: got %q", i, got)
		}
	}
	// Each key is hit at i, i+1000 and (for the first 500) i+2000.
	exp := "*" + strconv.Itoa(n) + "\r\n"
	for i := range n {
		switch i / 1000 {
		case 0:
			exp += ints(0, 2, 1, -1, 6)
		case 1:
			exp += ints(0, 2, 0, -1, 12)
		default:
			exp += ints(1, 2, 0, 6, 12)
		}
	}
	if got := c.mustReply(); got != exp {
		t.Fatalf("EXEC of %d: got %d bytes, want %d", n, len(got), len(exp))
	}
	if got := obs.batchSizes(); !slices.Equal(got, []int{1000, 1000, 500}) {
		t.Errorf("passes: got %v, want [1000 1000 500]", got)
	}
	for key, want := range map[string]int{
		"multi ok": 1, "exec ok": 1, "cl.throttle queued": n,
		"cl.throttle allowed": 2000, "cl.throttle denied": 500,
	} {
		if got := obs.command(key); got != want {
			t.Errorf("observer %q: got %d, want %d", key, got, want)
		}
	}
}

// TestTransactionTooLarge: the command past 10,000 queued, or past 1 MiB
// queued (the arguments and 24 bytes for each), is refused and EXEC then
// runs nothing.
func TestTransactionTooLarge(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	const tooLarge = "-ERR the transaction is too large: at most 10000 commands and 1048576 bytes queued; EXEC will discard it\r\n"
	// Each transaction begins with a CL.THROTTLE (5 arguments: 20 bytes and
	// 5 slices of 24), which the abort must not count, then repeats cmd.
	first := frame("CL.THROTTLE", "many", "1", "10", "60")
	const firstHolds = 20 + 5*24
	big := strings.Repeat("x", 4000)
	for _, tc := range []struct {
		name string
		cmd  string
		fit  int // how many of cmd are queued after the first
	}{
		{"commands", frame("PING"), 10000 - 1},
		// Each ECHO holds its two arguments and their two slices.
		{"bytes", frame("ECHO", big), (1<<20 - firstHolds) / (4000 + len("ECHO") + 2*24)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			c.send(frame("MULTI") + first + strings.Repeat(tc.cmd, tc.fit+2) + frame("EXEC"))
			for i, want := range []string{"+OK\r\n", "+QUEUED\r\n"} {
				if got := c.mustReply(); got != want {
					t.Fatalf("reply %d: got %q, want %q", i, got, want)
				}
			}
			for i := range tc.fit + 2 {
				want := "+QUEUED\r\n"
				if i == tc.fit {
					want = tooLarge
				}
				if got := c.mustReply(); got != want {
					t.Fatalf("command %d: got %q, want %q", i, got, want)
				}
			}
			if got := c.mustReply(); got != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
				t.Fatalf("EXEC: got %q, want EXECABORT", got)
			}
		})
	}
	c := dialRaw(t, addr)
	c.send(frame("CL.THROTTLE", "many", "1", "10", "60"))
	if got, want := c.mustReply(), ints(0, 2, 1, -1, 6); got != want {
		t.Errorf("CL.THROTTLE many after the aborted transaction: got %q, want the first hit %q", got, want)
	}
}

// TestTransactionNoAuth: before AUTH, MULTI is refused like any command.
func TestTransactionNoAuth(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys, Password: "open sesame"})
	c := dialRaw(t, addr)
	c.exchange(
		rawStep{frame("MULTI"), "-NOAUTH Authentication required.\r\n"},
		rawStep{frame("CL.THROTTLE", "k", "1", "10", "60"), "-NOAUTH Authentication required.\r\n"},
		rawStep{frame("EXEC"), "-NOAUTH Authentication required.\r\n"},
		rawStep{frame("AUTH", "open sesame"), "+OK\r\n"},
		rawStep{frame("MULTI"), "+OK\r\n"},
		rawStep{frame("CL.THROTTLE", "k", "1", "10", "60"), "+QUEUED\r\n"},
		rawStep{frame("EXEC"), "*1\r\n" + ints(0, 2, 1, -1, 6)},
	)
}

// TestTransactionExact: 50 connections each run a transaction of 20
// CL.THROTTLE on one key at once; exactly max_burst+1 = 100 of the 1,000
// are allowed.
func TestTransactionExact(t *testing.T) {
	t.Parallel()
	sys := startSystem(t, nil)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 50, "")
	ctx := context.Background()
	var mu sync.Mutex
	allowed, denied := 0, 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for range 20 {
					p.Do(ctx, "CL.THROTTLE", "hot", 99, 1, 3600)
				}
				return nil
			})
			if err != nil {
				t.Errorf("TxPipelined: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, cmd := range cmds {
				v, err := cmd.(*redis.Cmd).Int64Slice()
				switch {
				case err != nil || len(v) != 5:
					t.Errorf("CL.THROTTLE: %v, %v", v, err)
				case v[0] == 0:
					allowed++
				default:
					denied++
				}
			}
		})
	}
	wg.Wait()
	if allowed != 100 || denied != 900 {
		t.Errorf("allowed %d, denied %d; want exactly 100 and 900", allowed, denied)
	}
}

// TestTransactionModel sends 2,000 commands drawn at random (MULTI,
// EXEC, DISCARD, with arguments or not, CL.THROTTLE, PING, an unknown
// command), in writes of one to eight, and checks every reply against a
// model of Redis's transactions: what is queued, what aborts, and the
// count of a bucket that only the commands run have hit.
func TestTransactionModel(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{Checker: sys, ConnGoroutines: goroutines})
		c := dialRaw(t, addr)
		seed := uint64(time.Now().UnixNano())
		rng := rand.New(rand.NewPCG(seed, 1))
		t.Logf("seed %d", seed)

		// The model: hits counted so far, and the transaction.
		hits := int64(0)
		var queued []string // the replies the queued commands will get, but for the hits
		inTx, aborted := false, false
		hit := func() string {
			hits++
			return ints(0, 1001, 1001-hits, -1, 3600*hits)
		}
		const throttleCmd = "\x00throttle" // a queued CL.THROTTLE, answered when run
		run := func(reply string) string {
			if reply == throttleCmd {
				return hit()
			}
			return reply
		}
		// next returns a command and the reply the model expects.
		next := func() (string, string) {
			switch rng.IntN(9) {
			case 0, 1:
				if inTx {
					return frame("MULTI"), "-ERR MULTI calls can not be nested\r\n"
				}
				inTx, aborted, queued = true, false, nil
				return frame("MULTI"), "+OK\r\n"
			case 2:
				switch {
				case !inTx:
					return frame("EXEC"), "-ERR EXEC without MULTI\r\n"
				case aborted:
					inTx = false
					return frame("EXEC"), "-EXECABORT Transaction discarded because of previous errors.\r\n"
				}
				inTx = false
				want := "*" + strconv.Itoa(len(queued)) + "\r\n"
				for _, q := range queued {
					want += run(q)
				}
				return frame("EXEC"), want
			case 3:
				if !inTx {
					return frame("DISCARD"), "-ERR DISCARD without MULTI\r\n"
				}
				inTx = false
				return frame("DISCARD"), "+OK\r\n"
			case 4:
				name := []string{"MULTI", "EXEC", "DISCARD"}[rng.IntN(3)]
				aborted = aborted || inTx
				return frame(name, "x"), "-ERR wrong number of arguments for '" + strings.ToLower(name) + "' command\r\n"
			case 5:
				aborted = aborted || inTx
				return frame("GET", "k"), "-ERR unknown command 'GET', with args beginning with: 'k' \r\n"
			case 6:
				if inTx {
					queued = append(queued, "+PONG\r\n")
					return frame("PING"), "+QUEUED\r\n"
				}
				return frame("PING"), "+PONG\r\n"
			}
			cmd := frame("CL.THROTTLE", "model", "1000", "1", "3600")
			if inTx {
				queued = append(queued, throttleCmd)
				return cmd, "+QUEUED\r\n"
			}
			return cmd, hit()
		}
		for sent := 0; sent < 2000; {
			var send strings.Builder
			var wants []string
			for range 1 + rng.IntN(8) {
				cmd, want := next()
				send.WriteString(cmd)
				wants = append(wants, want)
				sent++
			}
			c.send(send.String())
			for i, want := range wants {
				if got := c.mustReply(); got != want {
					t.Fatalf("seed %d, command %d of a write of %q: got %q, want %q", seed, i, send.String(), got, want)
				}
			}
		}
		if hits < 100 {
			t.Errorf("only %d hits counted; the draw should make hundreds", hits)
		}
	})
}
