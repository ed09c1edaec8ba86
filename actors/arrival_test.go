package actors

import (
	"context"
	"hash/maphash"
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
	// check checks req in a goroutine of its own, with a ctx that is never
	// done (a second caller waits for the shard), and sends the decision.
	check := func(name string) <-chan table.Decision {
		c := make(chan table.Decision, 1)
		go func() {
			d, err := s.Check(context.Background(), req)
			if err != nil {
				t.Errorf("%s Check: %v", name, err)
			}
			c <- d
		}()
		return c
	}
	first := check("first")
	<-entered

	clk.armed.Store(true)
	second := check("second")
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

// TestCallersHashIsTheTables: the hash a caller computes before it takes
// its shard (the System's idSeed) is the one every table of the System
// keys its index by: at start, after a crash rebuilds a shard, with a
// data directory and without. A check served by its caller and one served
// in a batch then find the same bucket.
func TestCallersHashIsTheTables(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"", t.TempDir()} {
		crash := atomic.Bool{}
		s := startSystem(t, Config{Shards: 4, SweepInterval: -1, DataDir: dir, applyHook: func(r table.Request) {
			if r.ID == "crash" && crash.CompareAndSwap(true, false) {
				panic("crash the shard")
			}
		}})
		ids := []string{"a", "b", "crash", "user-42", "ü"}
		same := func(when string) {
			t.Helper()
			for _, id := range ids {
				sh := s.shards[s.shardIndex(idHash(id))]
				sh.mu.Lock()
				got, want := sh.table.Hash(id), maphash.String(*s.cfg.idSeed, id)
				sh.mu.Unlock()
				if got != want {
					t.Errorf("dir %q, %s: the table hashes %q to %#x, its caller to %#x", dir, when, id, got, want)
				}
			}
		}
		same("at start")
		crash.Store(true)
		req := table.Request{ID: "crash", Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1}
		if _, err := s.Check(context.Background(), req); err == nil {
			t.Fatalf("dir %q: the crashing check returned no error", dir)
		}
		same("after a crash")
		for i := range 3 {
			if d, err := s.Check(context.Background(), req); err != nil || d.Count != int64(i+1) {
				t.Fatalf("dir %q: check %d after the crash: %+v, %v; want count %d", dir, i+1, d, err, i+1)
			}
		}
	}
}
