package resp_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/resp"
	"github.com/ratelimitd/ratelimitd/table"
)

// eachChecker is a resp.EachChecker that decides with a real system, one
// request after another, and records every batch it is given.
type eachChecker struct {
	resp.Checker
	fail  error         // when set, CheckEach fails with it
	failI map[int]error // the requests CheckEach fails, by index, as *table.IndexError

	mu      sync.Mutex
	batches [][]string // the ids of each CheckEach
	checks  int        // calls of Check
}

var _ resp.EachChecker = (*eachChecker)(nil)

func (e *eachChecker) CheckEach(ctx context.Context, reqs []table.Request, decs []table.Decision) error {
	e.mu.Lock()
	ids := make([]string, len(reqs))
	for i := range reqs {
		ids[i] = reqs[i].ID
	}
	e.batches = append(e.batches, ids)
	e.mu.Unlock()
	if e.fail != nil {
		return e.fail
	}
	var failed []error
	for i := range reqs {
		if err := e.failI[i]; err != nil {
			failed = append(failed, &table.IndexError{Index: i, Err: err})
			continue
		}
		d, err := e.Checker.Check(ctx, reqs[i])
		if err != nil {
			return err
		}
		decs[i] = d
	}
	return errors.Join(failed...)
}

func (e *eachChecker) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	e.mu.Lock()
	e.checks++
	e.mu.Unlock()
	return e.Checker.Check(ctx, req)
}

func (e *eachChecker) seen() ([][]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.batches), e.checks
}

// TestPipelineOneBatch checks that the checks of one pipelined read go to
// CheckEach as one batch, in order, other commands answered in their
// place; that a refund, or INFO, decides the checks before it first; and
// that a malformed check is answered in its place, outside the batch.
func TestPipelineOneBatch(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		sys, _ := manualSystem(t)
		ec := &eachChecker{Checker: sys}
		_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: ec, Rules: testRules(t)})
		c := dialRaw(t, addr)
		c.send(frame("CL.THROTTLE", "a", "1", "1", "60") +
			frame("PING") +
			frame("RL.CHECK", "b", "1m", "2") +
			frame("CL.THROTTLE", "a", "1", "1", "60") +
			frame("CL.THROTTLE", "a", "x", "1", "60") +
			frame("RL.RULE", "api", "c") +
			frame("CL.THROTTLE", "a", "1", "1", "60") +
			frame("ECHO", "e"))
		want := []string{
			ints(0, 2, 1, -1, 60),
			"+PONG\r\n",
			ints(1, 1, 2, 1, 60000, 0),
			ints(0, 2, 0, -1, 120),
			"-Cell error: Store error: Couldn't parse as integer: x\r\n",
			ints(1, 1, 2, 1, 1000, 0),
			ints(1, 2, 0, 60, 120),
			"$1\r\ne\r\n",
		}
		for i, w := range want {
			if got := c.mustReply(); got != w {
				t.Errorf("reply %d: got %q, want %q", i, got, w)
			}
		}
		batches, checks := ec.seen()
		if want := [][]string{{"a", "b", "a", "c", "a"}}; !slices.EqualFunc(batches, want, slices.Equal) || checks != 0 {
			t.Fatalf("batches: got %q and %d single checks, want %q and none", batches, checks, want)
		}

		c.send(frame("RL.CHECK", "r", "1m", "1") +
			frame("RL.REFUND", "r", "1m", "1", "HITS", "1") +
			frame("RL.CHECK", "r", "1m", "1") +
			frame("INFO", "stats") +
			frame("RL.CHECK", "r", "1m", "1"))
		want = []string{
			ints(1, 1, 1, 0, 60000, 0),
			ints(1, 0, 1, 1, 60000, 0),
			ints(1, 1, 1, 0, 60000, 0), // the refund came first
		}
		for i, w := range want {
			if got := c.mustReply(); got != w {
				t.Errorf("reply %d: got %q, want %q", i, got, w)
			}
		}
		c.mustReply() // INFO
		if got, want := c.mustReply(), ints(0, 1, 1, 0, 60000, 60000); got != want {
			t.Errorf("last: got %q, want %q", got, want)
		}
		batches, _ = ec.seen()
		if want := [][]string{{"a", "b", "a", "c", "a"}, {"r"}, {"r"}, {"r"}}; !slices.EqualFunc(batches, want, slices.Equal) {
			t.Errorf("batches: got %q, want %q", batches, want)
		}
	})
}

// The actor system decides pipelines in one pass.
var _ resp.EachChecker = (*actors.System)(nil)

// countingSystem is the actor system, its CheckEach as it is, its single
// Checks counted.
type countingSystem struct {
	*actors.System
	checks atomic.Int64
}

func (c *countingSystem) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	c.checks.Add(1)
	return c.System.Check(ctx, req)
}

// TestPipelineGoRedis checks that a go-redis pipeline of 16 CL.THROTTLE is
// decided in one CheckEach, answered in order, and that a Checker without
// CheckEach gets the same checks one by one with the same answers; and
// that the actor system's own CheckEach decides it, no Check called.
func TestPipelineGoRedis(t *testing.T) {
	t.Parallel()
	t.Run("actors.System", func(t *testing.T) {
		t.Parallel()
		sys, _ := manualSystem(t)
		cs := &countingSystem{System: sys}
		obs := newCounter()
		_, addr := startServer(t, resp.Options{Checker: cs, Observer: obs})
		c := newClient(t, addr, 1, "")
		ctx := context.Background()
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range 16 {
				p.Do(ctx, "CL.THROTTLE", "p", 9, 10, 1)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			got, err := cmd.(*redis.Cmd).Int64Slice()
			want := []int64{0, 10, int64(9 - i), -1, 1}
			if i >= 10 {
				want = []int64{1, 10, 0, 1, 1}
			}
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("reply %d: got %v, %v; want %v", i, got, err, want)
			}
		}
		if n := cs.checks.Load(); n != 0 {
			t.Errorf("the system's Check was called %d times, want none (one CheckEach)", n)
		}
		if got := obs.batchSizes(); !slices.Equal(got, []int{16}) {
			t.Errorf("observed batches %v, want [16]", got)
		}
	})
	for _, each := range []bool{true, false} {
		sys, _ := manualSystem(t)
		ec := &eachChecker{Checker: sys}
		var checker resp.Checker = ec
		if !each {
			checker = struct{ resp.Checker }{ec} // hides CheckEach
		}
		obs := newCounter()
		_, addr := startServer(t, resp.Options{Checker: checker, Observer: obs})
		c := newClient(t, addr, 1, "")
		ctx := context.Background()
		pipe := c.Pipeline()
		for range 16 {
			pipe.Do(ctx, "CL.THROTTLE", "p", 9, 10, 1)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			got, err := cmd.(interface{ Int64Slice() ([]int64, error) }).Int64Slice()
			want := []int64{0, 10, int64(9 - i), -1, 1}
			if i >= 10 {
				want = []int64{1, 10, 0, 1, 1}
			}
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("each=%v: reply %d: got %v, %v; want %v", each, i, got, err, want)
			}
		}
		batches, checks := ec.seen()
		switch {
		case each && (len(batches) != 1 || len(batches[0]) != 16 || checks != 0):
			t.Errorf("with CheckEach: got batches %v and %d checks, want one batch of 16", batches, checks)
		case !each && (len(batches) != 0 || checks != 16):
			t.Errorf("without CheckEach: got batches %v and %d checks, want 16 checks", batches, checks)
		}
		if got := obs.batchSizes(); !slices.Equal(got, []int{16}) {
			t.Errorf("each=%v: observed batches %v, want [16]", each, got)
		}
		if got := obs.command("cl.throttle allowed") + obs.command("cl.throttle denied"); got != 16 {
			t.Errorf("each=%v: observed %d checks, want 16", each, got)
		}
	}
}

// TestPipelineBatchError checks that a failed CheckEach fails every check
// of its batch, and nothing else.
func TestPipelineBatchError(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	stopped := errors.New("stopping")
	ec := &eachChecker{Checker: sys, fail: stopped}
	_, addr := startServer(t, resp.Options{Checker: ec, Stopped: stopped})
	c := dialRaw(t, addr)
	c.send(frame("CL.THROTTLE", "a", "1", "1", "60") + frame("PING") + frame("RL.CHECK", "b", "1m", "2"))
	for i, w := range []string{
		"-ERR the rate limiter is shutting down; retry\r\n",
		"+PONG\r\n",
		"-ERR the rate limiter is shutting down; retry\r\n",
	} {
		if got := c.mustReply(); got != w {
			t.Errorf("reply %d: got %q, want %q", i, got, w)
		}
	}
}

// TestPipelineBatchErrorPerCheck checks that a CheckEach error naming
// some checks (*table.IndexError, joined) fails those checks only: the
// others are answered with their decisions, in order.
func TestPipelineBatchErrorPerCheck(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	unavailable := errors.New("shard unavailable")
	ec := &eachChecker{Checker: sys, failI: map[int]error{1: unavailable, 3: &table.FieldError{Field: "id", Message: "is bad"}}}
	_, addr := startServer(t, resp.Options{Checker: ec, Unavailable: unavailable})
	c := dialRaw(t, addr)
	c.send(frame("CL.THROTTLE", "a", "1", "1", "60") +
		frame("CL.THROTTLE", "b", "1", "1", "60") +
		frame("PING") +
		frame("RL.CHECK", "c", "1m", "2") +
		frame("RL.CHECK", "c", "1m", "2") +
		frame("CL.THROTTLE", "a", "1", "1", "60"))
	for i, w := range []string{
		ints(0, 2, 1, -1, 60),
		"-ERR the rate limiter is temporarily unavailable; retry\r\n",
		"+PONG\r\n",
		ints(1, 1, 2, 1, 60000, 0),
		"-ERR id: is bad\r\n",
		ints(0, 2, 0, -1, 120),
	} {
		if got := c.mustReply(); got != w {
			t.Errorf("reply %d: got %q, want %q", i, got, w)
		}
	}
}

// panicChecker panics on every check.
type panicChecker struct{ resp.Checker }

func (panicChecker) Check(context.Context, table.Request) (table.Decision, error) {
	panic("broken invariant")
}

// TestPanicClosesConnection checks that a panic while serving costs its
// connection only: an error reply, the connection closed, the server still
// serving.
func TestPanicClosesConnection(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: panicChecker{sys}})
	c := dialRaw(t, addr)
	c.send(frame("PING") + frame("CL.THROTTLE", "a", "1", "1", "60"))
	if got, want := c.mustReply(), "-ERR internal error; the connection is closed\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, err := c.reply(); err == nil {
		t.Errorf("then got %q, want the connection closed", got)
	}
	c2 := dialRaw(t, addr)
	c2.send(frame("PING"))
	if got := c2.mustReply(); got != "+PONG\r\n" {
		t.Errorf("another connection: got %q", got)
	}
}
