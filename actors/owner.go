package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
)

// shard is what outlives an owner's restarts: its inbox, PID and counters.
type shard struct {
	index      int
	pid        *actor.PID
	dispatcher *pinned // runs the owner's mailbox on one goroutine
	q          inbox
	buckets    atomic.Int64 // live buckets after the owner's last batch
	restarts   atomic.Int64
}

// inbox queues the checks of one shard. Callers push; the owner takes
// everything queued at once when a drainMessage reaches it, so one mailbox
// message carries a whole batch and the mailbox costs nothing per check.
type inbox struct {
	mu        sync.Mutex
	pending   []*call
	scheduled bool // a drainMessage is on its way for what is pending
	closed    bool
}

// push queues c. It reports whether the caller must send a drainMessage.
func (q *inbox) push(c *call) (kick bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false, ErrStopped
	}
	q.pending = append(q.pending, c)
	kick = !q.scheduled
	q.scheduled = true
	return kick, nil
}

// take returns everything queued and leaves spare (emptied) in its place.
// If nothing is queued and settle is set, it clears scheduled, so that the
// next push sends a drainMessage; until then the owner is still draining
// and pushers need not send one.
func (q *inbox) take(spare []*call, settle bool) []*call {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.pending
	q.pending = spare[:0]
	if settle && len(batch) == 0 {
		q.scheduled = false
	}
	return batch
}

func (q *inbox) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// drainMessage tells an owner that its inbox holds checks.
type drainMessage struct{}

// owner is the single writer of one shard's table. A panic while it holds a
// batch answers the batch's unanswered checks with ErrUnavailable and
// re-panics, so its supervisor restarts it; the restarted owner starts with
// an empty table (the journal will let it rebuild) and serves the inbox on.
type owner struct {
	sh    *shard
	cfg   *Config
	table *table.Table
	spare []*call
}

func newOwner(sh *shard, cfg *Config) *owner {
	return &owner{sh: sh, cfg: cfg, table: table.New(table.Config{BucketTTL: cfg.BucketTTL})}
}

func (o *owner) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case drainMessage:
		for served, last := 0, 0; ; {
			n := o.drain(c, last <= 1)
			if n == 0 && last <= 1 {
				break // settled: the next push sends a drainMessage
			}
			if n == 0 {
				// Checks were arriving together: let the callers that are
				// ready run and queue theirs, so that the next batch is a
				// batch, not one drainMessage each. Then settle.
				runtime.Gosched()
			}
			last = n
			if served += n; served >= drainQuantum {
				// Let the mailbox serve sweeps between slices of a long drain.
				c.Send(c.Self(), drainMessage{})
				break
			}
		}
	case *sweeper.Sweep:
		n := o.table.DeleteExpired(m.Now, m.Max)
		o.sh.buckets.Store(int64(o.table.Len()))
		c.Respond(&sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max})
	case *actor.Started:
		o.sh.buckets.Store(int64(o.table.Len()))
	case *actor.Restarting:
		o.sh.restarts.Add(1)
		o.cfg.Logger.Warn("shard owner restarting with an empty table", "shard", o.sh.index)
	}
}

// drainQuantum is how many checks an owner serves for one drainMessage
// before it lets the other messages of its mailbox through.
const drainQuantum = 4096

// drain answers one batch of queued checks and returns its size.
func (o *owner) drain(c actor.Context, settle bool) int {
	batch := o.sh.q.take(o.spare, settle)
	o.spare = nil
	answered := 0
	defer func() {
		if r := recover(); r != nil {
			for _, k := range batch[answered:] {
				k.fail(ErrUnavailable)
			}
			o.cfg.Logger.Error("shard owner crashed", "shard", o.sh.index, "panic", r, "failed_checks", len(batch)-answered)
			// The inbox still counts on this owner to drain it (scheduled
			// stays set until a take finds it empty): the restarted owner
			// will, when this message reaches it.
			c.Send(c.Self(), drainMessage{})
			panic(r)
		}
	}()
	now := o.cfg.Clock.Now()
	for _, k := range batch {
		if !k.state.CompareAndSwap(statePending, stateTaken) {
			continue // its caller gave up
		}
		if o.cfg.applyHook != nil {
			o.cfg.applyHook(k.req)
		}
		k.dec = o.table.Apply(k.req, now)
	}
	// Every decision of the batch is made before any is sent: this is where
	// the journal makes the batch durable, with one append, before replies.
	for ; answered < len(batch); answered++ {
		k := batch[answered]
		batch[answered] = nil
		if k.state.Load() == stateTaken {
			k.done <- struct{}{} // k belongs to its caller from here on
		}
	}
	o.sh.buckets.Store(int64(o.table.Len()))
	o.spare = batch[:0]
	return answered
}

// shardOf maps an id to its shard with FNV-1a, a hash that is the same in
// every process, so an id keeps its shard across restarts.
func shardOf(id string, n int) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return int(h % uint64(n))
}
