// The call protocol and its pool. A call carries one request from its
// caller to whoever serves its shard and the answer back. Its caller owns
// it until it is queued; from then on its state says who may write it: the
// caller may only swap pending to cancelled, and whoever swaps pending to
// taken (the server of the shard, holding sh.mu) writes the answer and then
// signals done, after which the call is its caller's again. A call its
// caller served itself (direct) is answered without a signal. Calls are
// pooled, so a check allocates nothing.

package actors

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// call is one Check in flight between its caller and whoever serves its shard.
type call struct {
	op      op
	req     table.Request
	hash    uint64 // idHash(req.ID), or 0 where nothing computed it (see shardIndexOf)
	state   atomic.Int32
	res     table.Reservation
	n       int            // opReset: buckets deleted; opResetID: those live of them
	buckets []table.Bucket // opBuckets
	err     error
	done    chan struct{} // capacity 1; signalled once, by whoever serves the call
	direct  bool          // its caller serves it (serveDirect): no signal

	// Cluster mode only, set for each use: the vshard of req.ID and the
	// epoch its caller routed it at (fenced by the owner), and a CheckAll
	// unit (opAll).
	vshard int32
	epoch  int64
	all    *allCall
}

// op is what a call asks of its shard.
type op uint8

const (
	opCheck   op = iota // Table.Reserve
	opRefund            // Table.Refund
	opReset             // Table.Reset
	opBuckets           // Table.Buckets of req.ID
	opResetID           // Table.ResetID of req.Namespace and req.ID
)

const (
	statePending   int32 = iota
	stateTaken           // a server took it and will answer
	stateCancelled       // the caller gave up first; servers skip it
)

// answer completes c, taken, with err besides its decision, and signals
// its caller unless the caller is serving it.
func (c *call) answer(err error) {
	c.err = err
	if !c.direct {
		c.done <- struct{}{}
	}
}

// fail answers c with err unless its caller gave up.
func (c *call) fail(err error) {
	if c.state.CompareAndSwap(statePending, stateTaken) || c.state.Load() == stateTaken {
		c.answer(err)
	}
}

func (c *call) reset() {
	c.op, c.req, c.hash, c.res, c.n, c.buckets, c.err, c.direct = opCheck, table.Request{}, 0, table.Reservation{}, 0, nil, nil, false
	c.state.Store(statePending)
}

// call hands one validated request to its shard and waits for the answer
// (see Check for cancellation): the caller serves the shard itself when
// nobody else is, or queues the call for the owner. On success the caller
// reads the answer from c and then releases it.
func (s *System) call(ctx context.Context, o op, req table.Request) (*call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.cl != nil {
		return s.cl.route(ctx, o, req)
	}
	c := s.calls.Get().(*call)
	c.op, c.req, c.hash = o, req, idHash(req.ID)
	sh := s.shardOfHash(c.hash)
	served, err := s.serveDirect(ctx, sh, c)
	if err != nil {
		s.release(c)
		return nil, err
	}
	if !served {
		if err := s.queue(ctx, sh, c); err != nil {
			return nil, err
		}
		return c, nil
	}
	if err := c.err; err != nil {
		s.release(c)
		return nil, err
	}
	return c, nil
}

// queue queues c, which the caller could not serve, for the owner of its
// shard sh and waits for its answer (see Check for cancellation). On
// success the caller reads the answer from c and then releases it; on an
// error c is released already, or kept from reuse if a server may still
// look at it.
func (s *System) queue(ctx context.Context, sh *shard, c *call) error {
	if err := s.submit(sh, c); err != nil {
		s.release(c)
		return err
	}
	s.wait(ctx, c)
	if c.state.Load() == stateCancelled {
		// A server will skip c; it may still look at it, so c is not reused.
		return ctx.Err()
	}
	if err := c.err; err != nil {
		s.release(c)
		return err
	}
	return nil
}

// serveOwn decides the check req on the caller's goroutine, its answer
// into r, if the caller can have its shard sh (as serveDirect), with the
// checks queued meanwhile, and reports whether it did. Nothing queued, the
// check is decided alone, without a call; else it travels in the shard's
// own call, which only the holder of sh.mu uses. Either way a check its
// caller serves takes no call from the pool and no channel.
func (s *System) serveOwn(ctx context.Context, sh *shard, req *table.Request, r *table.Reservation) (served bool, err error) {
	if s.cfg.DataDir != "" && s.cfg.JournalSync == SyncAlways {
		return false, nil
	}
	// The check's time, and its id's hash in the shard's table (every
	// table of the System has the seed Config.idSeed), are had before the
	// shard is taken, so that the shard is held for less: measured in
	// BenchmarkCheck, where two cores take the same shards, the time
	// +10–25% checks/s at p=1, the hash +10% more. A check that then waits
	// for the shard is decided at the time it came, or at the latest time
	// the shard's table has seen if that is later (a table never goes
	// back).
	now := s.unixNano()
	th := maphash.String(*s.cfg.idSeed, req.ID)
	if !sh.acquire(ctx) {
		return false, nil
	}
	if sh.stopped {
		sh.mu.Unlock()
		return true, ErrStopped
	}
	crashed := false
	if sh.q.queued.Load() == 0 && sh.broken == nil {
		err, crashed = sh.decideOwn(&s.cfg, req, th, r, now)
	} else {
		// A batch with the checks queued, as serveDirect serves it.
		c := &sh.self
		c.req = *req
		_, crash := sh.serveQueued(&s.cfg, false, c)
		*r, err, crashed = c.res, c.err, crash != nil
		c.reset()
	}
	if !crashed && sh.q.queued.Load() > 0 {
		sh.serveQueued(&s.cfg, false) // queued meanwhile, as in serveDirect
	}
	sh.mu.Unlock()
	return true, err
}

// decideOwn decides req (th its hash in the shard's table) alone at now
// (Unix ns), its answer into r, holding sh.mu, when nothing is queued and
// the journal is not broken: serve's work for a batch of one check,
// without the batch.
// A panic answers ErrUnavailable and repairs the shard, as in serve.
func (sh *shard) decideOwn(cfg *Config, req *table.Request, th uint64, r *table.Reservation, now int64) (err error, crashed bool) {
	defer func() {
		if p := recover(); p != nil {
			sh.repair(cfg, p, 1)
			*r, err, crashed = table.Reservation{}, ErrUnavailable, true
		}
	}()
	if cfg.applyHook != nil {
		cfg.applyHook(*req)
	}
	if sh.top != nil && sh.sample.Due() {
		// The line of the front that observe writes, which the other
		// core may hold, is fetched while the check is decided, if the
		// check is to be observed when admitted. Asked for before the
		// shard is taken, it bought less (measured, p=64: 0.95 of the
		// checks/s without top keys, against 0.97).
		sh.top.Prefetch(th)
	}
	sh.table.ReserveHashedAt(r, req, th, now)
	if sh.top != nil && !sh.skips(req, &r.Decision) {
		// Most admitted checks are skipped by the inlined skips, without
		// observe's call.
		sh.observe(0, th, req, &r.Decision, time.Unix(0, now)) // idHash only if the front misses
	}
	// The journal takes the change before the answer, as in serve.
	return sh.finish(cfg, 1), false
}

// wait waits for c to be answered, or for ctx to end before a server takes
// c, which then is cancelled.
func (s *System) wait(ctx context.Context, c *call) {
	done := ctx.Done()
	if done == nil {
		<-c.done // a plain receive: cheaper than a select
		return
	}
	select {
	case <-c.done:
	case <-done:
		if !c.state.CompareAndSwap(statePending, stateCancelled) {
			<-c.done // a server took it: the answer is moments away
		}
	}
}

// submit queues cs in the inbox of their shard sh, waking the owner if it
// is idle.
func (s *System) submit(sh *shard, cs ...*call) error {
	kick, err := sh.q.push(cs...)
	if err != nil {
		return err
	}
	if kick {
		s.actors.Root.Send(sh.pid, drainMessage{})
	}
	return nil
}

// release returns an answered call to the pool.
func (s *System) release(c *call) {
	c.reset()
	s.calls.Put(c)
}
