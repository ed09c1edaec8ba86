// The shard: a slice of the id space, its table and journal, its inbox,
// and how it is served. Whoever holds sh.mu serves the shard and may touch
// the fields it guards: a caller serving itself (serveDirect), the owner
// actor draining the inbox (owner.go), CheckAll holding several shards
// (batch.go), the sweeping loop for one slice (sweep.go). A batch that
// panics is repaired by whoever holds sh.mu before letting it go, so nobody
// ever serves a shard in a broken state. The inbox has its own lock, for
// the callers that queue; the counters are atomic, for Stats.

package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/actors/topk"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// shard is one slice of the id space: its table and journal, its inbox and
// owner, and its counters. It outlives its owner's restarts.
//
// Whoever holds mu serves the shard, so one goroutine at a time decides and
// journals its checks and a bucket is decided serially; a caller that finds
// mu free serves its own check, with whatever is queued, and skips the
// hand-off to the owner and back, which is most of a check's cost when the
// shard is idle.
type shard struct {
	index      int
	pid        *actor.PID         // the owner's, set by Start
	root       *actor.RootContext // sends the owner a snapshot writer's news
	dispatcher *pinned            // runs the owner's mailbox on one goroutine
	q          inbox
	buckets    atomic.Int64 // live buckets after the last batch
	// sample picks the admitted checks top observes (Config.TopKeysSample),
	// guarded by mu. Its count, written at each admitted check with top
	// keys, shares mu's line, which every check writes anyway; the
	// fields a check only reads holding mu (table, top) do not, since
	// callers waiting for the shard keep taking mu's line from its
	// holder (TestShardLayout).
	sample     topk.Sampler
	waitUnspun bool // Config.waitUnspun

	mu    sync.Mutex   // held while serving; guards the fields below but restarts and cl
	table *table.Table // nil until Start gives it one
	top   *topk.Sketch // the top keys (Config.TopKeys), else nil

	restarts atomic.Int64 // crashes, each followed by a rebuild
	cl       *cluster     // cluster mode: fences the batches; nil on a single node

	spare        []*call      // the inbox's next pending slice
	self         call         // the call of a caller serving its own check (serveOwn)
	seen         table.Stats  // of table, already added to the counters
	failing      bool         // the journal's last batch failed
	snapshotting bool         // a snapshot writer holds a Frozen copy of table
	stopped      bool         // Stop has begun: callers no longer serve themselves
	labels       policyLabels // the top keys' labels of ad-hoc policies
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

// push queues cs, together. It reports whether the caller must send a
// drainMessage.
func (q *inbox) push(cs ...*call) (kick bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false, ErrStopped
	}
	q.pending = append(q.pending, cs...)
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

// serveDirect serves the calls cs, all of shard sh, on the caller's
// goroutine (with the checks queued meanwhile, in one batch) if it can
// have the shard, and reports whether it did; then each call holds its
// answer (c.err included). It returns ErrStopped once Stop has begun. With
// SyncAlways the owner serves every check: its batches are the group
// commits.
//
// A shard is held for a batch or a slice of a sweep, but for a journal's
// segment roll a short while. A caller that may wait waits for the shard
// (sync.Mutex spins briefly, then parks: it burns no core), which costs
// less than the hand-off to the owner and back; one that may not (a ctx
// that can end: its check must stay cancellable until taken) looks again
// for a short while, longer than a batch, and then queues for the owner.
func (s *System) serveDirect(ctx context.Context, sh *shard, cs ...*call) (served bool, err error) {
	if s.cfg.DataDir != "" && s.cfg.JournalSync == SyncAlways || !sh.acquire(ctx) {
		return false, nil
	}
	if sh.stopped {
		sh.mu.Unlock()
		return true, ErrStopped
	}
	if _, crash := sh.serveQueued(&s.cfg, false, cs...); crash == nil && sh.q.queued.Load() > 0 {
		// Checks queued while this batch was decided: serve them now, as
		// one batch (one journal record), rather than leave them to the
		// owner's next turn.
		sh.serveQueued(&s.cfg, false)
	}
	sh.mu.Unlock()
	return true, nil
}

// spinTries is how many times a caller looks again for its busy shard to
// come free before it queues (a caller that may not wait) or sleeps on the
// lock (one that may): long enough to outlast a batch (its cache misses
// included), far shorter than the hand-off to the owner and back.
const spinTries = 1024

// acquire takes sh.mu if it is free; else it looks again spinTries times
// (reads only: TryLock writes nothing while the lock is held) and then, if
// its caller may wait (ctx can never be done), waits for it, and otherwise
// gives up. ctx.Done is asked only once the shard is found busy: the first
// Done of a cancelable context makes its channel (an allocation, under the
// context's lock), which an HTTP request's context would otherwise pay at
// every check its caller decides.
//
// A caller that may wait looks again first, rather than go to
// sync.Mutex.Lock at once: Lock's own spin, a few rounds of 30 PAUSEs
// each, sees the lock come free well after a check's hold of it (a
// fraction of a microsecond) ends, where PAUSE takes tens of cycles.
// Measured in alternating rounds (BenchmarkShardWait): 1.03–1.13× the
// checks/s of going to Lock at once with two goroutines, 1.11× with 64 per
// core.
func (sh *shard) acquire(ctx context.Context) bool {
	if sh.mu.TryLock() {
		return true
	}
	if !sh.waitUnspun || ctx.Done() != nil {
		for range spinTries {
			if sh.mu.TryLock() {
				return true
			}
		}
	}
	if ctx.Done() == nil {
		sh.mu.Lock()
		return true
	}
	return false
}

// serveQueued serves what is queued, and the calls own of a caller serving
// itself, as one batch; the caller holds sh.mu. It returns the size of the
// batch and, if deciding it panicked, the panic (the shard is repaired
// already: see serve). settle is as for inbox.take.
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
// ErrUnavailable, the shard is repaired and the panic is returned.
func (sh *shard) serve(cfg *Config, batch []*call) (crash any) {
	answered := 0
	defer func() {
		if r := recover(); r != nil {
			for _, k := range batch[answered:] {
				k.fail(ErrUnavailable)
			}
			failed := len(batch) - answered
			clear(batch)
			sh.repair(cfg, r, failed)
			crash = r
		}
	}()
	now := cfg.Clock.Now()
	if sh.broken != nil && !now.Before(sh.retryAt) {
		sh.reopen(cfg, now)
	}
	if sh.cl != nil {
		batch = sh.cl.fence(batch)
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
			tag := t.Hash(k.req.ID)
			t.ReserveHashedTo(&k.res, &k.req, tag, now)
			if sh.top != nil {
				sh.observe(k.hash, tag, &k.req, &k.res.Decision, now)
			}
		case opRefund:
			k.res.Decision = t.Refund(k.req, now)
		case opReset:
			k.n = t.Reset(k.req, now)
		case opBuckets:
			k.buckets = t.Buckets(k.req.ID, now)
		case opResetID:
			k.n = t.ResetID(k.req.Namespace, k.req.ID, now)
		}
		if sh.broken != nil {
			sh.keepUnjournaled(k, now)
		}
	}
	// Every decision of the batch is made before any is sent, and the
	// journal takes the batch's changes, in one commit, before any reply.
	err := sh.finish(cfg, taken)
	if sh.cl != nil && err == nil {
		err = sh.cl.lapsedErr() // decided, but perhaps after the lease lapsed
	}
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

// repair makes the shard sound again after a panic r while it was served,
// holding sh.mu, before anyone else can serve it: it counts the crash,
// rebuilds the table (see rebuild) and starts the top keys afresh. failed
// is how many checks the panic answered with ErrUnavailable.
func (sh *shard) repair(cfg *Config, r any, failed int) {
	sh.restarts.Add(1)
	cfg.Logger.Error("shard crashed", "shard", sh.index, "panic", r, "failed_checks", failed)
	sh.rebuild(cfg)
	if sh.top != nil {
		sh.top = newSketch(cfg) // it may be inconsistent, like the table
	}
}

// shardOf maps an id to its shard with FNV-1a, a hash that is the same in
// every process, so an id keeps its shard across restarts.
func shardOf(id string, n int) int { return int(idHash(id) % uint64(n)) }

// shardIndex is shardOf(id, len(s.shards)) for h, idHash(id): by a mask
// when the shards are a power of two (the default 4 × GOMAXPROCS on most
// machines), as a division costs more than the rest of the choice.
func (s *System) shardIndex(h uint64) int {
	if m := s.mask; m != 0 {
		return int(h & m)
	}
	return int(h % uint64(len(s.shards)))
}

// shardMask is System.mask for n shards.
func shardMask(n int) uint64 {
	if n > 1 && n&(n-1) == 0 {
		return uint64(n - 1)
	}
	return 0
}

// shardOfHash returns the shard of the id of hash h (idHash).
func (s *System) shardOfHash(h uint64) *shard { return s.shards[s.shardIndex(h)] }

// shardIndexOf is shardOf(id, len(s.shards)): by lowHash, in half the
// cycles, when the shards are a power of two of at most 16. It computes no
// idHash for later: the one use of it after the choice, top keys, computes
// it only for an id not in its sketch's front (shard.observe), and most
// repeats are.
func (s *System) shardIndexOf(id string) int {
	if m := s.mask; m != 0 && m <= lowHashMask {
		return int(lowHash(id) & m)
	}
	return s.shardIndex(idHash(id))
}

// lowHashMask is the widest mask under which lowHash and idHash agree.
const lowHashMask = 15

// lowHash agrees with idHash in its low 4 bits (lowHash(id)&15 ==
// idHash(id)&15), all that picks a shard among at most 16. The low bits of
// a product and of a xor depend only on the low bits of their operands,
// and FNV-1a's prime is 3 modulo 16, so the chain multiplies by 3 (an add
// of a shift, one cycle) where idHash's multiplies by the prime (three):
// an id of 10 bytes is hashed in about 20 cycles instead of 40.
func lowHash(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 3
	}
	return h
}

// idHash is the 64-bit FNV-1a hash of id that picks its shard; it is also
// topk.Hash, so that the shard's top keys take it instead of hashing the
// id again.
func idHash(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
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
