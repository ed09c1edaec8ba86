package actors

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// shard is one slice of the id space: its table and journal, its inbox and
// owner, and its counters. It outlives its owner's restarts.
//
// Whoever holds mu serves the shard: its owner, draining the inbox, or a
// caller that found mu free and serves its own checks, with whatever is
// queued, on its own goroutine (see System.call). Either way one goroutine
// at a time decides and journals the shard's checks, so a bucket is still
// decided serially; the caller that serves itself skips the hand-off to the
// owner and back, which is most of a check's cost when the shard is idle.
type shard struct {
	index      int
	pid        *actor.PID
	root       *actor.RootContext // sends the owner what a serving caller cannot handle
	dispatcher *pinned            // runs the owner's mailbox on one goroutine
	q          inbox
	buckets    atomic.Int64 // live buckets after the last batch
	restarts   atomic.Int64
	// crashed is set when deciding a batch panicked: the table may be
	// inconsistent, so nobody serves the shard until its owner, restarted,
	// has rebuilt it.
	crashed atomic.Bool

	mu           sync.Mutex   // held while serving; guards the fields below
	table        *table.Table // nil until Start gives it one
	spare        []*call      // the inbox's next pending slice
	seen         table.Stats  // of table, already added to the counters
	failing      bool         // the journal's last batch failed
	snapshotting bool         // a snapshot writer holds a Frozen copy of table
	stopped      bool         // Stop has begun: callers no longer serve themselves
	// broken is why the journal could not be reopened after a crash; the
	// shard serves from a temporary table until a retry (at the first
	// batch from retryAt on) reopens it.
	broken  error
	retryAt time.Time
	// unjournaled are the changes made to the temporary table, replayed
	// on the rebuilt table when the journal is read again; lost counts
	// those beyond maxUnjournaled.
	unjournaled []loggedOp
	lost        int

	// With a data directory: the journal, and counters.
	j              *journal.Journal // guarded by mu once the System runs
	snapshots      sync.WaitGroup   // snapshot writers in flight
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
	queued    atomic.Int32 // len(pending), read without mu
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
	q.queued.Store(int32(len(q.pending)))
	kick = !q.scheduled
	q.scheduled = true
	return kick, nil
}

// take returns everything queued and leaves spare (emptied) in its place.
// If nothing is queued and settle is set, it clears scheduled, so that the
// next push sends a drainMessage; until then the owner is still draining
// and pushers need not send one.
func (q *inbox) take(spare []*call, settle bool) []*call {
	if !settle && q.queued.Load() == 0 {
		return spare[:0] // nothing to take, and nothing to settle
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.pending
	q.pending = spare[:0]
	q.queued.Store(0)
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

// crashMessage tells an owner that a caller serving its shard crashed, so
// that the owner is restarted and rebuilds the table.
type crashMessage struct{}

// errCrashed is the panic of an owner whose shard crashed in a caller.
var errCrashed = errors.New("actors: shard crashed while a caller served it")

// owner is the actor of one shard: it drains the inbox, runs sweeps and
// snapshots, and is supervised. A panic while a batch is decided (by the
// owner or by a caller serving itself) answers the batch's unanswered
// checks with ErrUnavailable and restarts the owner, which rebuilds the
// table from the journal (or, without a data directory, starts with an
// empty one) and serves the inbox on.
type owner struct {
	sh  *shard
	cfg *Config
}

func newOwner(sh *shard, cfg *Config) *owner { return &owner{sh: sh, cfg: cfg} }

// start readies the table after a crash: rebuilt from the journal, or empty.
// It runs holding sh.mu.
func (o *owner) start() {
	sh := o.sh
	if !sh.crashed.Load() && sh.table != nil {
		return
	}
	o.rebuild()
	sh.crashed.Store(false)
}

// rebuild replaces the table of a crashed shard: from the journal, or empty.
func (o *owner) rebuild() {
	sh := o.sh
	if sh.j == nil && o.cfg.DataDir == "" {
		sh.table = table.New(o.cfg.tableConfig(false))
		sh.seen = table.Stats{}
		return
	}
	// The crashed table's snapshot writer must finish with the journal
	// files before they are read again.
	sh.snapshots.Wait()
	sh.snapshotting = false
	if sh.j != nil {
		if err := sh.j.Close(); err != nil {
			o.cfg.Logger.Error("journal close failed", "shard", sh.index, "err", err)
		}
		sh.j = nil
	}
	sh.seen, sh.failing = table.Stats{}, false
	sh.table = nil // it may be inconsistent, even a temporary one
	sh.reopen(o.cfg, o.cfg.Clock.Now())
}

func (o *owner) Receive(c actor.Context) {
	sh := o.sh
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
	case crashMessage:
		o.locked(c, func() {}) // restarts the owner if the shard crashed
	case snapshotDone:
		o.locked(c, func() { sh.snapshotted(o.cfg, m) })
	case *sweeper.Sweep:
		n := 0
		for n < m.Max {
			// Slices of a long sweep let the checks in: the shard's lock is
			// free between them, and what was queued meanwhile is served.
			k := 0
			o.locked(c, func() {
				if o.cfg.sweepHook != nil {
					o.cfg.sweepHook()
				}
				k = sh.table.DeleteExpired(m.Now, min(sweepSlice, m.Max-n))
				o.serveLocked(false)
			})
			if n += k; k < sweepSlice {
				break
			}
		}
		c.Respond(&sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max})
	case *actor.Started:
		sh.mu.Lock()
		defer sh.mu.Unlock()
		o.start()
		sh.buckets.Store(int64(sh.table.Len()))
	case *actor.Restarting:
		o.cfg.Logger.Warn("shard owner restarting", "shard", sh.index, "journal", sh.j != nil)
	}
}

// locked runs fn holding sh.mu. If the shard has crashed, before or in fn
// (a panic, or a batch whose deciding panicked), it releases sh.mu and
// panics, so that the supervisor restarts the owner, which rebuilds the
// table first; the inbox counts on the owner to drain it, so the restarted
// owner is told to.
func (o *owner) locked(c actor.Context, fn func()) {
	sh := o.sh
	sh.mu.Lock()
	defer func() {
		r := recover()
		if r == nil && !sh.crashed.Load() {
			sh.mu.Unlock()
			return
		}
		if r == nil {
			r = errCrashed
		}
		if !sh.crashed.Swap(true) {
			sh.restarts.Add(1) // a panic outside serve, which counts its own
		}
		sh.mu.Unlock()
		c.Send(c.Self(), drainMessage{})
		panic(r)
	}()
	if !sh.crashed.Load() {
		fn()
	}
}

// drainQuantum is how many checks an owner serves for one drainMessage
// before it lets the other messages of its mailbox through.
const drainQuantum = 4096

// sweepSlice is how many expired buckets an owner deletes at a time, about
// a tenth of a millisecond of work, before it lets checks in.
const sweepSlice = 1000

// drain answers one batch of queued checks and returns its size.
func (o *owner) drain(c actor.Context, settle bool) (n int) {
	o.locked(c, func() { n = o.serveLocked(settle) })
	return n
}

// serveLocked answers what is queued, holding sh.mu, and returns how many
// checks that was. If deciding them panicked, it panics with that value.
func (o *owner) serveLocked(settle bool) int {
	n, crash := o.sh.serveQueued(o.cfg, settle)
	if crash != nil {
		panic(crash)
	}
	return n
}

// serveQueued serves what is queued, and the calls own of a caller serving
// itself, as one batch; the caller holds sh.mu. It returns the size of the
// batch and, if deciding it panicked, the panic (see serve). settle is as
// for inbox.take.
func (sh *shard) serveQueued(cfg *Config, settle bool, own ...*call) (n int, crash any) {
	batch := sh.q.take(sh.spare, settle)
	sh.spare = nil
	for _, c := range own {
		c.direct = true
		batch = append(batch, c)
	}
	crash = sh.serve(cfg, batch)
	n = len(batch)
	sh.spare = batch[:0]
	return n, crash
}

// serve decides batch, journals its changes and then answers its calls;
// the caller holds sh.mu. Calls whose callers gave up are skipped; direct
// calls (a caller serving itself) get their answer without a signal. If
// deciding panics, the calls not yet answered are answered with
// ErrUnavailable, the shard is marked crashed and the panic is returned,
// for the owner to be restarted.
func (sh *shard) serve(cfg *Config, batch []*call) (crash any) {
	answered := 0
	defer func() {
		if r := recover(); r != nil {
			sh.crashed.Store(true)
			sh.restarts.Add(1) // the owner is restarted for it
			for _, k := range batch[answered:] {
				k.fail(ErrUnavailable)
			}
			clear(batch)
			cfg.Logger.Error("shard crashed", "shard", sh.index, "panic", r, "failed_checks", len(batch)-answered)
			crash = r
		}
	}()
	now := cfg.Clock.Now()
	if sh.broken != nil && !now.Before(sh.retryAt) {
		sh.reopen(cfg, now)
	}
	t := sh.table
	taken := 0
	for _, k := range batch {
		if !k.state.CompareAndSwap(statePending, stateTaken) {
			continue // its caller gave up
		}
		taken++
		if cfg.applyHook != nil {
			cfg.applyHook(k.req)
		}
		switch k.op {
		case opCheck:
			k.res = t.Reserve(k.req, now)
		case opRefund:
			k.res.Decision = t.Refund(k.req, now)
		case opReset:
			k.n = t.Reset(k.req, now)
		case opBuckets:
			k.buckets = t.Buckets(k.req.ID, now)
		}
		if sh.broken != nil {
			sh.keepUnjournaled(k, now)
		}
	}
	// Every decision of the batch is made before any is sent, and the
	// journal takes the batch's changes, in one commit, before any reply.
	err := sh.finish(cfg, taken)
	for ; answered < len(batch); answered++ {
		k := batch[answered]
		batch[answered] = nil
		if k.state.Load() == stateTaken {
			k.answer(err) // k belongs to its caller from here on
		}
	}
	return nil
}

// finish ends a batch of taken calls decided on the shard, holding sh.mu:
// it journals the batch's changes (see persist), whose error the batch's
// checks are answered with, updates the counters and starts a snapshot if
// one is due.
func (sh *shard) finish(cfg *Config, taken int) error {
	err := sh.persist(cfg, taken)
	if n := int64(sh.table.Len()); n != sh.buckets.Load() {
		sh.buckets.Store(n)
	}
	sh.countTableStats()
	sh.maybeSnapshot(cfg)
	return err
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
func (sh *shard) countTableStats() {
	st := sh.table.Stats()
	if st == sh.seen {
		return
	}
	sh.evictions.Add(st.Evictions - sh.seen.Evictions)
	sh.rejections.Add(st.Rejections - sh.seen.Rejections)
	sh.seen = st
}
