package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// shard is what outlives an owner's restarts: its inbox, PID and counters.
type shard struct {
	index      int
	pid        *actor.PID
	dispatcher *pinned // runs the owner's mailbox on one goroutine
	q          inbox
	buckets    atomic.Int64 // live buckets after the owner's last batch
	restarts   atomic.Int64

	// With a data directory: the journal, the table recovered from it at
	// Start (taken by the first owner), and counters.
	j              *journal.Journal
	recovered      *table.Table
	snapshots      sync.WaitGroup // snapshot writers in flight
	tornTails      atomic.Int64
	journalErrors  atomic.Int64
	failedClosed   atomic.Int64
	failedOpen     atomic.Int64
	snapshotsTaken atomic.Int64
	snapshotErrors atomic.Int64
	evictions      atomic.Int64
	rejections     atomic.Int64
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

// owner is the single writer of one shard's table and journal. A panic
// while it holds a batch answers the batch's unanswered checks with
// ErrUnavailable and re-panics, so its supervisor restarts it; the restarted
// owner rebuilds its table from the journal (or, without a data directory,
// starts with an empty one) and serves the inbox on.
type owner struct {
	sh    *shard
	cfg   *Config
	table *table.Table
	spare []*call

	seen         table.Stats // of table, already added to the shard's counters
	failing      bool        // the journal's last batch failed
	broken       error       // the journal could not be reopened after a restart
	snapshotting bool        // a snapshot writer holds a Frozen copy of table
}

func newOwner(sh *shard, cfg *Config) *owner {
	o := &owner{sh: sh, cfg: cfg}
	if sh.recovered != nil {
		o.table, sh.recovered = sh.recovered, nil
	}
	return o
}

// start readies the owner's table: the one recovered at Start, or, after a
// restart, one rebuilt from the journal.
func (o *owner) start() {
	if o.table != nil {
		return
	}
	if o.sh.j == nil && o.cfg.DataDir == "" {
		o.table = table.New(o.cfg.tableConfig(false))
		return
	}
	// The crashed owner's snapshot writer must finish with the journal
	// files before they are read again.
	o.sh.snapshots.Wait()
	if o.sh.j != nil {
		if err := o.sh.j.Close(); err != nil {
			o.cfg.Logger.Error("journal close failed", "shard", o.sh.index, "err", err)
		}
		o.sh.j = nil
	}
	t, rec, err := o.sh.recover(o.cfg)
	if err != nil {
		// Serve on from memory alone rather than not at all; with
		// FailClosed every batch is refused until a restart.
		o.cfg.Logger.Error("shard owner could not rebuild its table from the journal", "shard", o.sh.index, "err", err)
		o.table = table.New(o.cfg.tableConfig(false))
		o.broken = err
		return
	}
	o.table = t
	o.cfg.Logger.Warn("shard owner rebuilt its table from the journal", "shard", o.sh.index,
		"buckets", t.Len(), "records", rec.SnapshotRecords+rec.SegmentRecords, "duration", rec.Duration)
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
	case snapshotDone:
		o.snapshotted(m)
	case *sweeper.Sweep:
		n := o.table.DeleteExpired(m.Now, m.Max)
		o.sh.buckets.Store(int64(o.table.Len()))
		c.Respond(&sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max})
	case *actor.Started:
		o.start()
		o.sh.buckets.Store(int64(o.table.Len()))
	case *actor.Restarting:
		o.sh.restarts.Add(1)
		o.cfg.Logger.Warn("shard owner restarting", "shard", o.sh.index, "journal", o.sh.j != nil)
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
		switch k.op {
		case opCheck:
			k.dec = o.table.Apply(k.req, now)
		case opRefund:
			k.dec = o.table.Refund(k.req, now)
		case opReset:
			k.n = o.table.Reset(k.req, now)
		case opBuckets:
			k.buckets = o.table.Buckets(k.req.ID, now)
		}
	}
	// Every decision of the batch is made before any is sent, and the
	// journal takes the batch's changes, in one commit, before any reply.
	err := o.persist()
	for ; answered < len(batch); answered++ {
		k := batch[answered]
		batch[answered] = nil
		if k.state.Load() == stateTaken {
			k.err = err
			k.done <- struct{}{} // k belongs to its caller from here on
		}
	}
	o.sh.buckets.Store(int64(o.table.Len()))
	o.countTableStats()
	if answered > 0 {
		o.maybeSnapshot(c)
	}
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

// countTableStats adds what the table did when full since the last call to
// the shard's counters, which outlive the table.
func (o *owner) countTableStats() {
	st := o.table.Stats()
	o.sh.evictions.Add(st.Evictions - o.seen.Evictions)
	o.sh.rejections.Add(st.Rejections - o.seen.Rejections)
	o.seen = st
}
