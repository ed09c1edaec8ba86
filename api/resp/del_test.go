package resp_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/resp"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestDelGoRedis: DEL and UNLINK delete a key's CL.THROTTLE state, under
// every max_burst, count and period it was throttled with (redis-cell keeps
// one state per key), and reply how many of the keys had a bucket not yet
// full again, as Redis counts the keys it deletes (redis-cell's key expires
// once its bucket is full); an RL.CHECK id of the same name is not a key
// and keeps its count.
func TestDelGoRedis(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, clock := manualSystem(t)
		obs := newCounter()
		_, addr := startServer(t, resp.Options{Checker: sys, ConnGoroutines: goroutines, Observer: obs})
		c := newClient(t, addr, 1, "")
		ctx := context.Background()
		throttle(t, c, "k", 1, 10, 60)
		throttle(t, c, "k", 1, 10, 60)
		if got := throttle(t, c, "k", 1, 10, 60); !slices.Equal(got, []int64{1, 2, 0, 6, 12}) {
			t.Fatalf("third hit: %v, want limited", got)
		}
		throttle(t, c, "k", 5, 1, 3600) // another limit on the same key
		if err := c.Do(ctx, "RL.CHECK", "k", "1h", 10).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Del(ctx, "k", "never-used", "k").Result(); err != nil || n != 1 {
			t.Fatalf("DEL k never-used k: %d, %v; want 1 (k once: the second finds nothing)", n, err)
		}
		if got := throttle(t, c, "k", 1, 10, 60); !slices.Equal(got, []int64{0, 2, 1, -1, 6}) {
			t.Errorf("k after DEL: %v, want a first hit [0 2 1 -1 6]", got)
		}
		if got := throttle(t, c, "k", 5, 1, 3600); !slices.Equal(got, []int64{0, 6, 5, -1, 3600}) {
			t.Errorf("k's other limit after DEL: %v, want a first hit [0 6 5 -1 3600]", got)
		}
		if got, err := c.Do(ctx, "RL.CHECK", "k", "1h", 10, "HITS", 0).Int64Slice(); err != nil || got[1] != 1 {
			t.Errorf("RL.CHECK k after DEL: %v, %v; want its count 1, untouched", got, err)
		}
		if n, err := c.Unlink(ctx, "k", "other").Result(); err != nil || n != 1 {
			t.Fatalf("UNLINK k other: %d, %v; want 1", n, err)
		}
		if got := throttle(t, c, "k", 1, 10, 60); !slices.Equal(got, []int64{0, 2, 1, -1, 6}) {
			t.Errorf("k after UNLINK: %v, want a first hit", got)
		}
		// redis-cell's key expires once its bucket is full again: DEL then
		// finds nothing, here too.
		throttle(t, c, "full", 1, 10, 60) // full again in 6 s
		clock.Advance(6 * time.Second)
		if n, err := c.Del(ctx, "full").Result(); err != nil || n != 0 {
			t.Errorf("DEL of a key whose bucket is full again: %d, %v; want 0", n, err)
		}
		if del, unlink := obs.command("del ok"), obs.command("unlink ok"); del != 2 || unlink != 1 {
			t.Errorf("observed del ok %d, unlink ok %d; want 2 and 1", del, unlink)
		}
	})
}

// TestDelInOrder: a DEL pipelined among checks falls in its place, in a
// plain pipeline and in a transaction.
func TestDelInOrder(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		_, addr := startServer(t, resp.Options{Checker: sys, ConnGoroutines: goroutines})
		c := dialRaw(t, addr)
		hit := frame("CL.THROTTLE", "p", "1", "10", "60")
		first, second := ints(0, 2, 1, -1, 6), ints(0, 2, 0, -1, 12)
		c.send(hit + hit + frame("DEL", "p") + hit + frame("DEL", "p", "p") + frame("DEL", "p"))
		for i, want := range []string{first, second, ":1\r\n", first, ":1\r\n", ":0\r\n"} {
			if got := c.mustReply(); got != want {
				t.Fatalf("pipeline, reply %d: got %q, want %q", i, got, want)
			}
		}
		c.send(frame("MULTI") + hit + frame("DEL", "p") + hit + hit + frame("EXEC"))
		for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
			"*4\r\n" + first + ":1\r\n" + first + second} {
			if got := c.mustReply(); got != want {
				t.Fatalf("transaction, reply %d: got %q, want %q", i, got, want)
			}
		}
	})
}

// onlyChecker is a Checker that is no IDResetter.
type onlyChecker struct{ resp.Checker }

// failingResetter fails every ResetID with err.
type failingResetter struct {
	*actors.System
	err error
}

func (f failingResetter) ResetID(context.Context, string, string) (int, error) { return 0, f.err }

// TestDelErrors: DEL's bad input is answered in Redis's or the key's words
// and deletes nothing, a Checker that cannot delete says so, and a failing
// one gets the failure's reply.
func TestDelErrors(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := dialRaw(t, addr)
	long := strings.Repeat("x", table.MaxIDLen+1)
	c.exchange(
		rawStep{frame("CL.THROTTLE", "e", "0", "1", "60"), ints(0, 1, 0, -1, 60)},
		rawStep{frame("DEL"), "-ERR wrong number of arguments for 'del' command\r\n"},
		rawStep{frame("unlink"), "-ERR wrong number of arguments for 'unlink' command\r\n"},
		rawStep{frame("DEL", "e", ""), "-ERR key: must not be empty\r\n"},
		rawStep{frame("DEL", "e", long), fmt.Sprintf("-ERR key: must be at most %d bytes\r\n", table.MaxIDLen)},
		rawStep{frame("DEL", "e", "a\xffb"), "-ERR key: must be valid UTF-8\r\n"},
		// None of them deleted e.
		rawStep{frame("CL.THROTTLE", "e", "0", "1", "60"), ints(1, 1, 0, 60, 60)},
	)

	_, addr = startServer(t, resp.Options{Checker: onlyChecker{sys}})
	dialRaw(t, addr).exchange(rawStep{frame("DEL", "e"), "-ERR del: this rate limiter cannot delete keys\r\n"})

	_, addr = startServer(t, resp.Options{Checker: failingResetter{sys, actors.ErrUnavailable}})
	dialRaw(t, addr).exchange(rawStep{frame("DEL", "e"), "-ERR the rate limiter is temporarily unavailable; retry\r\n"})
}
