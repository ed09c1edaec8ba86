package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// Errors returned by System. Match them with errors.Is.
var (
	// ErrStopped: the System is stopping or stopped and takes no more checks.
	ErrStopped = table.ErrStopped
	// ErrUnavailable: the shard owner crashed while holding the check; the
	// check may or may not have been counted, and the owner is restarting.
	ErrUnavailable = table.ErrUnavailable
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("actors: invalid config")
	// ErrJournal: the shard's journal could not take the check's batch (a
	// full disk, an I/O error) and Config.OnJournalError is FailClosed. The
	// check was counted in memory but not made durable, so it is refused.
	// Errors matching ErrJournal also match ErrUnavailable.
	ErrJournal = table.ErrJournal
)

// Clock is the time source of the shard owners and the sweeper.
type Clock = sweeper.Clock

// SweepReport describes one sweep round over every shard.
type SweepReport = sweeper.Report

// SweepObserver receives a SweepReport after every sweep round; it must not block.
type SweepObserver = sweeper.Observer

// MaxShards is the largest Config.Shards accepted.
const MaxShards = 1 << 16

// DefaultMaxBuckets bounds the buckets of a System by default: about 1.9 GB
// resident when full, with ids of about a dozen bytes (README, Memory).
const DefaultMaxBuckets = 8 << 20

// tableConfig is the table.Config of one shard.
func (cfg *Config) tableConfig(track bool) table.Config {
	tc := table.Config{BucketTTL: cfg.BucketTTL, TrackChanges: track, Evict: cfg.EvictOldest}
	if cfg.MaxBuckets > 0 {
		tc.MaxBuckets = (cfg.MaxBuckets + cfg.Shards - 1) / cfg.Shards
	}
	return tc
}

// Config configures a System. The zero value is ready to use.
type Config struct {
	// Shards is the number of shard owners; 0 means 4 × GOMAXPROCS.
	Shards int
	// SweepInterval is the time between sweeps of expired buckets; 0 means
	// 10s, and a negative value disables sweeping.
	SweepInterval time.Duration
	// SweepBatch bounds the buckets one owner deletes before it serves the
	// checks queued meanwhile; 0 means 10,000.
	SweepBatch int
	// BucketTTL keeps expired buckets this much longer (for inspection); it
	// never deletes one sooner. Must not be negative.
	BucketTTL time.Duration
	// Clock is the time source; nil means the system clock.
	Clock Clock
	// Logger receives the system's logs and protoactor's; nil discards them.
	Logger *slog.Logger
	// SweepObserver, if set, is told about every sweep round.
	SweepObserver SweepObserver

	// MaxBuckets bounds the buckets held, all shards together (each shard
	// holds at most its share); 0 means DefaultMaxBuckets, a negative value
	// no bound. When a shard is full, expired buckets go first; then a new
	// bucket is refused (Decision.Full) or, with EvictOldest, the bucket
	// closest to expiring is evicted.
	MaxBuckets int
	// EvictOldest selects evict-oldest over deny-new for a full shard.
	EvictOldest bool

	// DataDir, if set, makes the counters durable: one journal per shard in
	// this directory (created if missing, locked against a second process),
	// replayed at Start before the first check and by an owner restarted
	// after a crash. Empty means state in memory only.
	DataDir string
	// JournalSync says when journals are flushed; 0 means SyncInterval.
	JournalSync SyncMode
	// JournalSyncInterval is the flush period of SyncInterval; 0 means 100ms.
	JournalSyncInterval time.Duration
	// OnJournalError says what a shard does while its journal fails.
	OnJournalError JournalErrorPolicy
	// JournalRepair lets Start cut a journal damaged in its middle at the
	// damage (the rest is kept aside as *.broken) instead of refusing.
	JournalRepair bool
	// SegmentSize is the size of each journal segment file; 0 means 8 MiB.
	SegmentSize int64
	// SnapshotThreshold is the journal size of a shard, in bytes of
	// records since its last snapshot, past which it writes a snapshot and
	// drops the segments it covers; 0 means 32 MiB.
	SnapshotThreshold int64

	// applyHook, set only by tests, runs before each Apply.
	applyHook func(table.Request)
	// sweepHook, set only by tests, runs in the owner before each slice
	// of a sweep, holding the shard.
	sweepHook func()
}

func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.Shards < 0 || cfg.Shards > MaxShards:
		return cfg, fmt.Errorf("%w: Shards %d is outside [0, %d]", ErrConfig, cfg.Shards, MaxShards)
	case cfg.BucketTTL < 0:
		return cfg, fmt.Errorf("%w: BucketTTL %v is negative", ErrConfig, cfg.BucketTTL)
	case cfg.SweepBatch < 0:
		return cfg, fmt.Errorf("%w: SweepBatch %d is negative", ErrConfig, cfg.SweepBatch)
	case cfg.JournalSync != 0 && cfg.JournalSync != SyncNone && cfg.JournalSync != SyncInterval && cfg.JournalSync != SyncAlways:
		return cfg, fmt.Errorf("%w: JournalSync %d is not a sync mode", ErrConfig, cfg.JournalSync)
	case cfg.JournalSyncInterval < 0:
		return cfg, fmt.Errorf("%w: JournalSyncInterval %v is negative", ErrConfig, cfg.JournalSyncInterval)
	case cfg.OnJournalError != FailClosed && cfg.OnJournalError != FailOpen:
		return cfg, fmt.Errorf("%w: OnJournalError %d is not a policy", ErrConfig, cfg.OnJournalError)
	case cfg.SegmentSize < 0:
		return cfg, fmt.Errorf("%w: SegmentSize %d is negative", ErrConfig, cfg.SegmentSize)
	case cfg.SnapshotThreshold < 0:
		return cfg, fmt.Errorf("%w: SnapshotThreshold %d is negative", ErrConfig, cfg.SnapshotThreshold)
	}
	if cfg.MaxBuckets == 0 {
		cfg.MaxBuckets = DefaultMaxBuckets
	}
	if cfg.JournalSync == 0 {
		cfg.JournalSync = SyncInterval
	}
	if cfg.JournalSyncInterval == 0 {
		cfg.JournalSyncInterval = 100 * time.Millisecond
	}
	if cfg.SegmentSize == 0 {
		cfg.SegmentSize = DefaultSegmentSize
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if cfg.Shards == 0 {
		cfg.Shards = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = sweeper.DefaultInterval
	}
	if cfg.SweepBatch == 0 {
		cfg.SweepBatch = sweeper.DefaultBatch
	}
	if cfg.Clock == nil {
		cfg.Clock = sweeper.SystemClock(sweeper.ClockLogger(cfg.Logger))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// System is the embeddable rate limiter: shards, each a table and journal
// served by one goroutine at a time (a caller serving itself, or the
// shard's owner actor), and a sweeper. It is safe for concurrent use.
type System struct {
	cfg     Config
	actors  *actor.ActorSystem
	shards  []*shard
	sweeper *actor.PID       // nil when sweeping is disabled
	calls   sync.Pool        // of *call
	lock    *journal.DirLock // nil without a data directory

	stopOnce sync.Once
	stopErr  error
}

// Stats is a snapshot of a System's state.
type Stats struct {
	Shards   int   // shard owners
	Buckets  int64 // live buckets in all tables
	Restarts int64 // owner restarts after a crash since Start

	// With a data directory (all counts since Start):
	TornTails      int64 // torn journal tails cut at recovery
	JournalErrors  int64 // batches the journal failed to take or flush
	FailedClosed   int64 // of those, batches refused (FailClosed)
	FailedOpen     int64 // of those, batches answered from memory (FailOpen)
	Snapshots      int64 // snapshots written
	SnapshotErrors int64 // snapshots that failed

	Evictions  int64 // live buckets evicted from a full shard (EvictOldest)
	Rejections int64 // checks refused because their shard was full (Decision.Full)
}

// Start starts a System: its shard owners under a one-for-one supervisor, and
// its sweeper. ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*System, error) {
	explicitShards := cfg.Shards != 0
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("actors: start: %w", err)
	}
	var lock *journal.DirLock
	if cfg.DataDir != "" {
		if lock, err = openData(&cfg, explicitShards); err != nil {
			return nil, err
		}
	}
	logger := cfg.Logger
	s := &System{
		cfg: cfg,
		actors: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return logger.With("lib", "protoactor")
		})),
		shards: make([]*shard, cfg.Shards),
		lock:   lock,
	}
	s.calls.New = func() any { return &call{done: make(chan struct{}, 1)} }
	props := make([]*actor.Props, cfg.Shards)
	for i := range s.shards {
		sh := &shard{index: i, dispatcher: newPinned(), root: s.actors.Root}
		if lock == nil {
			sh.table = table.New(cfg.tableConfig(false))
		}
		s.shards[i] = sh
		props[i] = actor.PropsFromProducer(func() actor.Actor { return newOwner(sh, &s.cfg) },
			actor.WithDispatcher(sh.dispatcher))
	}
	if lock != nil {
		// Recovery comes before the first check can be taken.
		if err := recoverAll(&s.cfg, s.shards); err != nil {
			_ = lock.Unlock()
			for _, sh := range s.shards {
				sh.dispatcher.stop()
			}
			return nil, err
		}
	}
	ready := make(chan []*actor.PID, 1)
	s.actors.Root.Spawn(actor.PropsFromProducer(
		func() actor.Actor { return &supervisor{children: props, ready: ready} },
		// One-for-one: a crashed owner alone is restarted, however often;
		// its peers keep serving.
		actor.WithSupervisor(actor.NewRestartingStrategy()),
	))
	var pids []*actor.PID
	select {
	case pids = <-ready:
	case <-ctx.Done():
		s.actors.Shutdown()
		for _, sh := range s.shards {
			sh.dispatcher.stop()
		}
		if lock != nil {
			// Every owner goroutine has ended: no journal is in use.
			closeJournals(s.shards, &s.cfg)
			_ = lock.Unlock()
		}
		return nil, fmt.Errorf("actors: start: %w", ctx.Err())
	}
	for i, pid := range pids {
		s.shards[i].pid = pid
	}
	if cfg.SweepInterval > 0 {
		s.sweeper = s.actors.Root.Spawn(sweeper.Props(sweeper.Config{
			Targets:  pids,
			Interval: cfg.SweepInterval,
			Batch:    cfg.SweepBatch,
			Clock:    cfg.Clock,
			Observer: cfg.SweepObserver,
			Logger:   cfg.Logger,
		}))
	}
	cfg.Logger.Info("rate limiter started", "shards", cfg.Shards, "sweep_interval", cfg.SweepInterval, "bucket_ttl", cfg.BucketTTL, "data_dir", cfg.DataDir)
	return s, nil
}

// Check counts req against its limit and returns the decision. The checks
// of req.ID's shard are decided serially, so for one bucket no more than the
// limit is ever admitted, however many goroutines call Check.
//
// An invalid req returns a *table.FieldError (matching table.ErrInvalid). If
// ctx ends before the owner takes the check, Check returns ctx.Err() and the
// check is not counted; once the owner has taken it, Check waits for and
// returns its decision, so a counted hit is never reported as an error. A
// decision with Full set was refused because the shard's table was full
// (see Config.MaxBuckets).
func (s *System) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	r, err := s.Reserve(ctx, req)
	return r.Decision, err
}

// Reserve is Check that also says where the hits were counted
// (table.Reservation.Window), so that a Refund of them (Request.Window)
// credits that window only, and nothing once it is over.
func (s *System) Reserve(ctx context.Context, req table.Request) (table.Reservation, error) {
	if err := req.Validate(); err != nil {
		return table.Reservation{}, err
	}
	c, err := s.call(ctx, opCheck, req)
	if err != nil {
		return table.Reservation{}, err
	}
	r := c.res
	s.release(c)
	return r, nil
}

// Refund gives back up to req.Hits (at least 1) hits to req's bucket,
// never taking it below empty, and returns the decision a peek would get
// afterwards. With req.Window (a Reservation's) only the window those hits
// were counted in is credited, and nothing once it is over; without it,
// the current window.
func (s *System) Refund(ctx context.Context, req table.Request) (table.Decision, error) {
	if err := req.Validate(); err != nil {
		return table.Decision{}, err
	}
	if req.Hits < 1 {
		return table.Decision{}, &table.FieldError{Field: "hits", Message: "must be at least 1 for a refund"}
	}
	c, err := s.call(ctx, opRefund, req)
	if err != nil {
		return table.Decision{}, err
	}
	d := c.res.Decision
	s.release(c)
	return d, nil
}

// Reset deletes req.ID's buckets under req's limit, so its next hit starts
// afresh, and returns how many it deleted. req.Hits is ignored.
func (s *System) Reset(ctx context.Context, req table.Request) (int, error) {
	req.Hits = 0
	if err := req.Validate(); err != nil {
		return 0, err
	}
	c, err := s.call(ctx, opReset, req)
	if err != nil {
		return 0, err
	}
	n := c.n
	s.release(c)
	return n, nil
}

// Buckets returns every bucket of id, under every limit, as the owner of
// its shard holds them now.
func (s *System) Buckets(ctx context.Context, id string) ([]table.Bucket, error) {
	if id == "" || len(id) > table.MaxIDLen {
		return nil, &table.FieldError{Field: "id", Message: fmt.Sprintf("must be 1 to %d bytes", table.MaxIDLen)}
	}
	c, err := s.call(ctx, opBuckets, table.Request{ID: id})
	if err != nil {
		return nil, err
	}
	b := c.buckets
	s.release(c)
	return b, nil
}

// MaxCheckAll is the most requests one CheckAll takes.
const MaxCheckAll = table.MaxBatch

// CheckAll checks several limits at once, all or nothing: it returns
// allowed only if every request is admitted, and then every one is counted;
// if any is denied, nothing is counted anywhere. The decisions are in the
// order of reqs, each as if the requests before it had been counted.
//
// The shards of the requests are held together, taken in ascending order
// so that two batches cannot deadlock, and every check is decided with one
// reading of the clock before any is kept: a denied batch is undone before
// anyone else sees its shards (table.Table.Rollback), so it never admits
// anything, in this window or the next, and never makes a concurrent check
// of the same buckets see hits it will not keep.
//
// Once the shards are held, the checks are not cancelled by ctx: an
// all-or-nothing outcome needs every answer.
func (s *System) CheckAll(ctx context.Context, reqs []table.Request) ([]table.Decision, bool, error) {
	if len(reqs) == 0 || len(reqs) > MaxCheckAll {
		return nil, false, &table.FieldError{Field: "checks", Message: fmt.Sprintf("must hold 1 to %d checks", MaxCheckAll)}
	}
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			var fe *table.FieldError
			if errors.As(err, &fe) {
				return nil, false, &table.IndexError{Index: i, Err: fe}
			}
			return nil, false, err
		}
	}
	// order holds shard<<32 | index of each request: sorted, it lists the
	// requests shard by shard, each shard's in their order.
	order := make([]uint64, len(reqs))
	for i, req := range reqs {
		order[i] = uint64(shardOf(req.ID, len(s.shards)))<<32 | uint64(i)
	}
	slices.Sort(order)
	var held []*shard
	for i, e := range order {
		if i == 0 || e>>32 != order[i-1]>>32 {
			held = append(held, s.shards[e>>32])
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		crashed, err := s.hold(held)
		if err != nil {
			return nil, false, err
		}
		if crashed == nil {
			break
		}
		// Its owner rebuilds it before it serves anything: wait for that.
		if err := s.settle(ctx, crashed); err != nil {
			return nil, false, err
		}
	}
	decs := make([]table.Decision, len(reqs))
	allowed, err := s.decideAll(held, order, reqs, decs)
	return decs, allowed, err
}

// hold locks every shard of held, in ascending order. If one of them has
// crashed (its table is being rebuilt) or the System is stopping, it locks
// none and returns that shard, or ErrStopped.
func (s *System) hold(held []*shard) (crashed *shard, err error) {
	for i, sh := range held {
		sh.acquire(true)
		if sh.stopped || sh.crashed.Load() {
			for _, h := range held[:i+1] {
				h.mu.Unlock()
			}
			if sh.stopped {
				return nil, ErrStopped
			}
			return sh, nil
		}
	}
	return nil, nil
}

// settle waits until the owner of sh has served a call of its own queue,
// so that a crashed shard has been rebuilt.
func (s *System) settle(ctx context.Context, sh *shard) error {
	c, err := s.submitted(sh, opNone, table.Request{})
	if err != nil {
		return err
	}
	s.wait(ctx, c)
	if c.state.Load() == stateCancelled {
		return ctx.Err()
	}
	err = c.err
	s.release(c)
	return err
}

// decideAll decides the requests of a batch on the shards held, which it
// releases, and journals what was kept. See CheckAll.
func (s *System) decideAll(held []*shard, order []uint64, reqs []table.Request, decs []table.Decision) (allowed bool, err error) {
	now := s.cfg.Clock.Now()
	allowed = true
	// Where the batch is, for a panic to be handled: held[cur] is being
	// worked on; before it, tables were begun (phase 0) or their units
	// ended (phase 1); from released on, shards are still held.
	cur, phase, released := 0, 0, 0
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		crashed := held[cur]
		crashed.crashed.Store(true)
		crashed.restarts.Add(1)
		s.cfg.Logger.Error("shard crashed", "shard", crashed.index, "panic", r, "failed_checks", len(reqs))
		for i := released; i < len(held); i++ {
			sh := held[i]
			switch {
			case i == cur:
			case phase == 0 && i < cur:
				sh.table.Rollback()
			case phase == 1 && i > cur:
				// The outcome is decided: the other shards get it too.
				if allowed {
					sh.table.Commit()
				} else {
					sh.table.Rollback()
				}
			}
			sh.mu.Unlock()
		}
		s.actors.Root.Send(crashed.pid, crashMessage{})
		allowed, err = false, ErrUnavailable
	}()
	for _, sh := range held {
		if sh.broken != nil && !now.Before(sh.retryAt) {
			sh.reopen(&s.cfg, now)
		}
	}
	taken := make([]int, len(held)) // requests per shard
	next := 0
	for ; cur < len(held); cur++ {
		sh := held[cur]
		t := sh.table
		t.Begin()
		for ; next < len(order) && s.shards[order[next]>>32] == sh; next++ {
			i := uint32(order[next])
			if s.cfg.applyHook != nil {
				s.cfg.applyHook(reqs[i])
			}
			decs[i] = t.Apply(reqs[i], now)
			allowed = allowed && decs[i].Allowed
			taken[cur]++
		}
	}
	for cur, phase = 0, 1; cur < len(held); cur++ {
		if allowed {
			held[cur].table.Commit()
		} else {
			held[cur].table.Rollback()
		}
	}
	if allowed {
		for _, e := range order {
			if sh := s.shards[e>>32]; sh.broken != nil {
				sh.keepUnjournaled(&call{op: opCheck, req: reqs[uint32(e)]}, now)
			}
		}
	}
	for cur, phase = 0, 2; cur < len(held); cur++ {
		sh := held[cur]
		if ferr := sh.finish(&s.cfg, taken[cur]); ferr != nil && err == nil {
			err = ferr
		}
		released++
		sh.mu.Unlock()
	}
	return allowed, err
}

// call hands one validated request to its shard and waits for the answer
// (see Check for cancellation): the caller serves the shard itself when
// nobody else is, or queues the call for the owner. On success the caller
// reads the answer from c and then releases it.
func (s *System) call(ctx context.Context, o op, req table.Request) (*call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := s.calls.Get().(*call)
	c.op, c.req = o, req
	sh := s.shards[shardOf(req.ID, len(s.shards))]
	served, err := s.serveDirect(sh, ctx.Done() == nil, c)
	if err == nil && !served {
		err = s.submit(sh, c)
	}
	if err != nil {
		s.release(c)
		return nil, err
	}
	if !served {
		s.wait(ctx, c)
		if c.state.Load() == stateCancelled {
			// The owner will skip c; it may still look at it, so c is not reused.
			return nil, ctx.Err()
		}
	}
	if err := c.err; err != nil {
		s.release(c)
		return nil, err
	}
	return c, nil
}

// wait waits for the owner to answer c, or for ctx to end before the owner
// takes c, which then is cancelled.
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
			<-c.done // the owner took it: the answer is moments away
		}
	}
}

// serveDirect serves the calls cs, all of shard sh, on the caller's
// goroutine (with the checks queued meanwhile, in one batch) if it can
// have the shard, and reports whether it did; then each call holds its
// answer (c.err included). It returns ErrStopped once Stop has begun. With
// SyncAlways the owner serves every check: its batches are the group
// commits.
//
// A shard is held for a batch or a slice of a sweep, a few microseconds at
// most but for a journal's segment roll. A caller that may not wait (a ctx
// that can end: its check must stay cancellable until taken) gives up
// after a short spin and queues for the owner; one that may, waits for the
// shard, which costs less than the hand-off to the owner and back.
func (s *System) serveDirect(sh *shard, wait bool, cs ...*call) (served bool, err error) {
	if s.cfg.DataDir != "" && s.cfg.JournalSync == SyncAlways || sh.crashed.Load() || !sh.acquire(wait) {
		return false, nil
	}
	if sh.stopped {
		sh.mu.Unlock()
		return true, ErrStopped
	}
	if sh.crashed.Load() {
		sh.mu.Unlock()
		return false, nil
	}
	_, crash := sh.serveQueued(&s.cfg, false, cs...)
	if crash == nil && sh.q.queued.Load() > 0 {
		// Checks queued while this batch was decided: serve them now, as
		// one batch (one journal record), rather than leave them to the
		// owner's next turn.
		_, crash = sh.serveQueued(&s.cfg, false)
	}
	sh.mu.Unlock()
	if crash != nil {
		// The owner is restarted to rebuild the table; the checks queued
		// meanwhile wait for it.
		s.actors.Root.Send(sh.pid, crashMessage{})
	}
	return true, nil
}

// spinTries is how many times a caller looks again for its shard to come
// free before it waits for it or queues: a few microseconds, longer than a
// batch at a million keys takes (its cache misses included), and much less
// than the hand-off to the owner and back. With two goroutines on a
// million keys, 1,024 tries made 1.5 times the checks of 64.
const spinTries = 1024

// acquire takes sh.mu if it is free or comes free within a short spin;
// else, if wait is set, it waits for it, and otherwise gives up.
func (sh *shard) acquire(wait bool) bool {
	for range spinTries {
		if sh.mu.TryLock() {
			return true
		}
	}
	if wait {
		sh.mu.Lock()
		return true
	}
	return false
}

// submitted queues a new call of o for the owner of sh.
func (s *System) submitted(sh *shard, o op, req table.Request) (*call, error) {
	c := s.calls.Get().(*call)
	c.op, c.req = o, req
	if err := s.submit(sh, c); err != nil {
		s.release(c)
		return nil, err
	}
	return c, nil
}

// submit queues c in the inbox of its shard sh, waking the owner if it is idle.
func (s *System) submit(sh *shard, c *call) error {
	kick, err := sh.q.push(c)
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

// Stats returns a snapshot of the system's counters.
func (s *System) Stats() Stats {
	st := Stats{Shards: len(s.shards)}
	for _, sh := range s.shards {
		st.Buckets += sh.buckets.Load()
		st.Restarts += sh.restarts.Load()
		st.TornTails += sh.tornTails.Load()
		st.JournalErrors += sh.journalErrors.Load()
		st.FailedClosed += sh.failedClosed.Load()
		st.FailedOpen += sh.failedOpen.Load()
		st.Snapshots += sh.snapshotsTaken.Load()
		st.SnapshotErrors += sh.snapshotErrors.Load()
		st.Evictions += sh.evictions.Load()
		st.Rejections += sh.rejections.Load()
	}
	return st
}

// Stop stops taking checks, lets the owners answer every check already
// queued, then stops the actors. Checks that arrive meanwhile get
// ErrStopped. Stop is idempotent; ctx bounds the wait.
func (s *System) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *System) stop(ctx context.Context) error {
	for _, sh := range s.shards {
		sh.q.close()
		sh.mu.Lock()
		sh.stopped = true
		sh.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if s.sweeper != nil {
			_ = s.actors.Root.StopFuture(s.sweeper).Wait()
		}
		var wg sync.WaitGroup
		for _, sh := range s.shards {
			wg.Go(func() { _ = s.actors.Root.PoisonFuture(sh.pid).Wait() })
		}
		wg.Wait()
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("actors: stop: %w", ctx.Err())
	}
	// Whatever an owner did not take before it stopped is answered here.
	for _, sh := range s.shards {
		for _, c := range sh.q.take(nil, true) {
			c.fail(ErrStopped)
		}
	}
	s.actors.Shutdown()
	if err == nil {
		for _, sh := range s.shards {
			sh.dispatcher.stop()
		}
		if s.lock != nil {
			// Every owner has stopped: flush and close the journals.
			closeJournals(s.shards, &s.cfg)
			if uerr := s.lock.Unlock(); uerr != nil {
				err = fmt.Errorf("actors: stop: unlock %s: %w", s.cfg.DataDir, uerr)
			}
		}
	} else if s.lock != nil {
		s.cfg.Logger.Error("stop timed out: journals left open", "dir", s.cfg.DataDir)
	}
	s.cfg.Logger.Info("rate limiter stopped")
	return err
}

// supervisor spawns the shard owners as its children, so that its
// supervisor strategy governs them, and hands their PIDs to Start.
type supervisor struct {
	children []*actor.Props
	ready    chan<- []*actor.PID
}

func (p *supervisor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok && p.ready != nil {
		pids := make([]*actor.PID, len(p.children))
		for i, props := range p.children {
			pids[i] = c.Spawn(props)
		}
		p.ready <- pids
		p.ready = nil
	}
}

// call is one Check in flight between its caller and a shard owner.
type call struct {
	op      op
	req     table.Request
	state   atomic.Int32
	res     table.Reservation
	n       int            // opReset: buckets deleted
	buckets []table.Bucket // opBuckets
	err     error
	done    chan struct{} // capacity 1; the owner signals it once
	direct  bool          // its caller serves it (serveDirect): no signal
}

// op is what a call asks of its owner.
type op uint8

const (
	opCheck   op = iota // Table.Apply
	opRefund            // Table.Refund
	opReset             // Table.Reset
	opBuckets           // Table.Buckets of req.ID
	opNone              // nothing: answered once the owner serves its queue
)

const (
	statePending   int32 = iota
	stateTaken           // the owner took it and will answer
	stateCancelled       // the caller gave up first; the owner skips it
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
	c.op, c.req, c.res, c.n, c.buckets, c.err, c.direct = opCheck, table.Request{}, table.Reservation{}, 0, nil, nil, false
	c.state.Store(statePending)
}
