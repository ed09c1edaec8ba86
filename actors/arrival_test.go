package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// readSignal is a manual clock that, once armed, says when it is read.
type readSignal struct {
	*clocktest.Manual
	armed atomic.Bool
	read  chan struct{}
}

func (c *readSignal) Now() time.Time {
	now := c.Manual.Now()
	if c.armed.CompareAndSwap(true, false) {
		close(c.read)
	}
	return now
}

// TestCheckDecidedAtItsArrival: a caller that waits for its busy shard
// has its check decided at the time it read before taking the shard, not
// at the time it got it. Here the shard is held while the clock moves on
// 2 s, past the end of the 1-s window whose only hit the holder takes: the
// waiting check, which came within that window, is denied, its retry
// counted from its arrival.
func TestCheckDecidedAtItsArrival(t *testing.T) {
	t.Parallel()
	clk := &readSignal{Manual: clocktest.New(time.Unix(1_700_000_000, 0)), read: make(chan struct{})}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s := startSystem(t, Config{Shards: 1, SweepInterval: -1, Clock: clk, applyHook: func(table.Request) {
		once.Do(func() {
			close(entered)
			<-release // the first check holds the shard
		})
	}})
	req := table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}, Hits: 1}
	ctx := context.Background() // never done: the second caller waits for the shard
	first := make(chan table.Decision, 1)
	go func() {
		d, err := s.Check(ctx, req)
		if err != nil {
			t.Errorf("first Check: %v", err)
		}
		first <- d
	}()
	<-entered

	clk.armed.Store(true)
	second := make(chan table.Decision, 1)
	go func() {
		d, err := s.Check(ctx, req)
		if err != nil {
			t.Errorf("second Check: %v", err)
		}
		second <- d
	}()
	select {
	case <-clk.read: // the second check has its time; the shard is still held
	case <-time.After(10 * time.Second):
		// It reads the time only once it has the shard: let it have it.
		t.Error("the waiting check read no time before it had its shard")
	}
	clk.Advance(2 * time.Second)
	close(release)

	if d := <-first; !d.Allowed || d.Count != 1 {
		t.Fatalf("first check: %+v, want allowed with count 1", d)
	}
	d := <-second
	if d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("second check: %+v; want denied, retry after 1s: decided at its arrival, in the first check's window", d)
	}
}
