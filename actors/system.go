// The facade: System, its Config and Stats, Start and Stop, and the entry
// points of the checks. Start and Stop run on their callers' goroutines; an
// entry point validates its request on the caller's and hands it to its
// shard (call.go), or, for CheckAll, holds every shard it needs (batch.go).
// A System's fields are set by Start and only read afterwards, but for
// stopOnce and stopErr, which are Stop's.

package actors

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/actors/clock"
	"github.com/ratelimitd/ratelimitd/actors/topk"
	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// Errors returned by System. Match them with errors.Is.
var (
	// ErrStopped: the System is stopping or stopped and takes no more checks.
	ErrStopped = table.ErrStopped
	// ErrUnavailable: the shard crashed while it held the check; the check
	// may or may not have been counted, and the shard has been rebuilt.
	ErrUnavailable = table.ErrUnavailable
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("actors: invalid config")
	// ErrJournal: the shard's journal could not take the check's batch (a
	// full disk, an I/O error) and Config.OnJournalError is FailClosed. The
	// check was counted in memory but not made durable, so it is refused.
	// Errors matching ErrJournal also match ErrUnavailable.
	ErrJournal = table.ErrJournal
	// ErrClusterUnavailable: cluster mode: no member decided the check in
	// time (its owner unreachable, its vshard without a serving owner,
	// this member's lease lapsed) and ClusterConfig.OnError is FailClosed.
	// A check that reached its owner may or may not have been counted.
	// Errors matching ErrClusterUnavailable also match ErrUnavailable.
	ErrClusterUnavailable error = clusterUnavailable{}
	// ErrNoTopKeys: Top was asked of a System started without
	// Config.TopKeys, which tracks nothing.
	ErrNoTopKeys = errors.New("actors: top keys are not tracked (Config.TopKeys is off)")
)

// clusterUnavailable is ErrClusterUnavailable: an error of its own that
// also matches ErrUnavailable.
type clusterUnavailable struct{}

func (clusterUnavailable) Error() string        { return "actors: no cluster member could decide in time" }
func (clusterUnavailable) Is(target error) bool { return target == ErrUnavailable }

// Clock is the time source of a System (see package clock); an alias, so
// that an embedder need not import the clock package to set Config.Clock.
type Clock = clock.Clock

// SweepReport describes one sweep round over every shard.
type SweepReport = sweeper.Report

// SweepObserver receives a SweepReport after every sweep round; it must not block.
type SweepObserver = sweeper.Observer

// MaxShards is the largest Config.Shards accepted.
const MaxShards = 1 << 16

// DefaultMaxBuckets bounds the buckets of a System by default: about 1.1 GB
// resident when full, with ids of about a dozen bytes (README, Memory).
const DefaultMaxBuckets = 8 << 20

// tableConfig is the table.Config of one shard.
func (cfg *Config) tableConfig(track bool) table.Config {
	tc := table.Config{BucketTTL: cfg.BucketTTL, TrackChanges: track, Evict: cfg.EvictOldest, HashSeed: cfg.idSeed}
	if cfg.MaxBuckets > 0 {
		tc.MaxBuckets = (cfg.MaxBuckets + cfg.Shards - 1) / cfg.Shards
	}
	return tc
}

// Config configures a System. The zero value is ready to use.
type Config struct {
	// Shards is the number of shards (each with its owner actor); 0 means
	// 4 × GOMAXPROCS.
	Shards int
	// SweepInterval is the time between sweeps of expired buckets; 0 means
	// 10s, and a negative value disables sweeping.
	SweepInterval time.Duration
	// SweepBatch bounds the buckets one sweep of a shard deletes before the
	// sweeping moves on to the next shard; 0 means 10,000. A sweep holds
	// its shard for slices of at most 512 deletions or 25µs, and the
	// checks queued meanwhile go first between slices.
	SweepBatch int
	// BucketTTL keeps expired buckets this much longer (for inspection); it
	// never deletes one sooner. Must not be negative.
	BucketTTL time.Duration
	// Clock is the time source; nil means the system clock. A check its
	// caller decides alone reads it by UnixNano where it is also a
	// clock.UnixNanoer (as the system clock is), Now otherwise.
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

	// TopKeys, if set, tracks the heaviest ids by hits and by denials
	// over the last minute and 15 minutes, for Top: a sketch of fixed
	// memory per shard (package actors/topk), fed on the check path. See
	// Top for what it counts and costs.
	TopKeys bool
	// TopKeysSample, with TopKeys, is the sampling rate of a shard
	// whose admitted checks come faster than TopKeysSampleAbove a
	// second: it then observes one admitted check in TopKeysSample, at
	// random, counting its hits that many times, and still every denied
	// check (topk.Sampler): the ranking by hits is then an estimate, the
	// one by denials as exact as without sampling. Slower, a shard
	// observes every check. 0 means DefaultTopKeysSample; 1 observes every
	// check at any rate; else a power of two, at most topk.MaxSample.
	TopKeysSample int

	// DataDir, if set, makes the counters durable: one journal per shard in
	// this directory (created if missing, locked against a second process),
	// replayed at Start before the first check and by a shard rebuilt
	// after a crash. Empty means state in memory only.
	DataDir string
	// JournalSync says when journals are flushed; 0 means SyncInterval.
	JournalSync SyncMode
	// JournalSyncInterval is the flush period of SyncInterval, and with
	// SyncNone the period at which the journal's pages are mapped ahead
	// and written ones released (see package journal); 0 means 100ms.
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
	// sweepHook, set only by tests, runs before each slice of a sweep,
	// holding the shard.
	sweepHook func()
	// rebuildHook, set only by tests, runs when a crashed shard with a
	// data directory is about to read its journal again.
	rebuildHook func()
	// waitUnspun, set only by BenchmarkShardWait, has a caller that waits
	// for a busy shard go straight to sync.Mutex.Lock, as before acquire
	// looked again first: the baseline the benchmark pairs against.
	waitUnspun bool
	// idSeed is the seed of the id hash of every table of the System
	// (table.Config.HashSeed), made by newSystem: a caller hashes its id
	// for its shard's table before it takes the shard.
	idSeed *maphash.Seed

	// Cluster, if set, makes the System a member of a cluster (see
	// ClusterConfig): Check, CheckAll, Refund, Reset and Buckets then go
	// to the owner of the id's vshard, whichever member that is.
	Cluster *ClusterConfig
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
	case !topk.ValidSampleRate(cfg.TopKeysSample):
		return cfg, fmt.Errorf("%w: TopKeysSample %d is neither 0 nor a power of two in [1, %d]", ErrConfig, cfg.TopKeysSample, topk.MaxSample)
	}
	if cfg.TopKeysSample == 0 {
		cfg.TopKeysSample = DefaultTopKeysSample
	}
	if cfg.Cluster != nil {
		cc, err := cfg.Cluster.withDefaults()
		if err != nil {
			return cfg, err
		}
		cfg.Cluster = &cc
		if cfg.Shards == 0 {
			cfg.Shards = defaultClusterShards(cc.VShards)
		}
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
		cfg.Clock = clock.System(clock.WithLogger(cfg.Logger))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// System is the embeddable rate limiter: shards, each a table and journal
// served by one goroutine at a time (a caller serving itself, or the
// shard's owner actor), and the sweeping loop. It is safe for concurrent use.
type System struct {
	cfg      Config
	actors   *actor.ActorSystem
	shards   []*shard
	sweeping *sweeping        // nil when sweeping is disabled
	calls    sync.Pool        // of *call
	mask     uint64           // len(shards)-1 if it is a power of two above 1, else 0 (see shardOfHash)
	lock     *journal.DirLock // nil without a data directory
	cl       *cluster         // nil unless cluster mode
	nanos    clock.UnixNanoer // cfg.Clock, if it reads Unix ns without a time.Time; else nil

	stopOnce sync.Once
	stopErr  error
}

// Stats is a snapshot of a System's state.
type Stats struct {
	Shards   int   // shards (each with its owner)
	Buckets  int64 // live buckets in all tables
	Restarts int64 // shard crashes since Start, each followed by a rebuild of the shard's table

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

// Start starts a System: it recovers the journals (with a data directory),
// spawns the shard owners under a one-for-one supervisor and starts the
// sweeping. ctx bounds the start only.
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
	if cc := cfg.Cluster; cc != nil && cc.VShards%cfg.Shards != 0 {
		if lock != nil {
			_ = lock.Unlock()
		}
		return nil, fmt.Errorf("%w: %d shards do not divide the cluster's %d vshards; choose a divisor (the data directory's shards, if it has any)", ErrConfig, cfg.Shards, cc.VShards)
	}
	s := newSystem(cfg, lock)
	if err := s.start(ctx); err != nil {
		_ = s.teardown()
		return nil, err
	}
	if s.cl != nil {
		if err := s.cl.join(ctx); err != nil {
			s.cl.close(context.Background())
			s.stopLocal(context.Background())
			return nil, err
		}
	}
	cfg.Logger.Info("rate limiter started", "shards", cfg.Shards, "sweep_interval", cfg.SweepInterval, "bucket_ttl", cfg.BucketTTL, "data_dir", cfg.DataDir)
	return s, nil
}

// newSystem makes the System of cfg, its shards with their dispatchers,
// and, without a data directory, their tables.
func newSystem(cfg Config, lock *journal.DirLock) *System {
	seed := maphash.MakeSeed()
	cfg.idSeed = &seed
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
	s.mask = shardMask(len(s.shards))
	s.nanos, _ = cfg.Clock.(clock.UnixNanoer)
	if cfg.Cluster != nil {
		s.cl = newCluster(s, *cfg.Cluster)
	}
	for i := range s.shards {
		sh := &shard{index: i, dispatcher: newPinned(), root: s.actors.Root, cl: s.cl, waitUnspun: cfg.waitUnspun}
		if cfg.TopKeys {
			sh.top = newSketch(&cfg)
			sh.sample = newSampler(&cfg)
		}
		if lock == nil {
			sh.table = table.New(cfg.tableConfig(false))
		}
		s.shards[i] = sh
	}
	return s
}

// start readies the shards of a new System: it recovers their journals
// before the first check can be taken, spawns their owners and starts the
// sweeping. If it fails, teardown frees what it started.
func (s *System) start(ctx context.Context) error {
	if s.lock != nil {
		if err := recoverAll(&s.cfg, s.shards); err != nil {
			return err
		}
	}
	if err := s.spawnOwners(ctx); err != nil {
		return err
	}
	if s.cfg.SweepInterval > 0 {
		s.sweeping = startSweeping(s.shards, &s.cfg)
	}
	return nil
}

// unixNano reads the clock in Unix ns, for a check decided alone.
func (s *System) unixNano() int64 {
	if s.nanos != nil {
		return s.nanos.UnixNano()
	}
	return s.cfg.Clock.Now().UnixNano()
}

// Check counts req against its limit and returns the decision. The checks
// of req.ID's shard are decided serially, so for one bucket no more than the
// limit is ever admitted, however many goroutines call Check.
//
// An invalid req returns a *table.FieldError (matching table.ErrInvalid). If
// ctx ends before a batch of its shard takes the check, Check returns
// ctx.Err() and the check is not counted; once taken, Check waits for and
// returns its decision, so a counted hit is never reported as an error. A
// decision with Full set was refused because the shard's table was full
// (see Config.MaxBuckets).
func (s *System) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	var r table.Reservation
	err := s.reserve(ctx, &req, &r)
	return r.Decision, err
}

// Reserve is Check that also says where the hits were counted
// (table.Reservation.Window), so that a Refund of them (Request.Window)
// credits that window only, and nothing once it is over.
func (s *System) Reserve(ctx context.Context, req table.Request) (table.Reservation, error) {
	var r table.Reservation
	err := s.reserve(ctx, &req, &r)
	return r, err
}

// reserve is Reserve answering into r, for Check and Reserve: neither req
// nor the answer is copied on the way (measured in BenchmarkCheck, in
// alternating rounds with the copies: +10% checks/s at p=1 and p=64).
func (s *System) reserve(ctx context.Context, req *table.Request, r *table.Reservation) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if s.cl == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		sh := s.shards[s.shardIndexOf(req.ID)]
		if served, err := s.serveOwn(ctx, sh, req, r); served {
			return err
		}
		c := s.calls.Get().(*call)
		c.op, c.req = opCheck, *req // hash 0: see shardIndexOf
		if err := s.queue(ctx, sh, c); err != nil {
			return err
		}
		*r = c.res
		s.release(c)
		return nil
	}
	c, err := s.call(ctx, opCheck, *req)
	if err != nil {
		return err
	}
	*r = c.res
	s.release(c)
	return nil
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
// afresh, and returns how many of them could still change a decision (see
// table.Table.Reset). req.Hits is ignored.
func (s *System) Reset(ctx context.Context, req table.Request) (int, error) {
	req.Hits = 0
	return s.deleteBuckets(ctx, opReset, req)
}

// ResetID deletes every bucket of id in namespace (ns "" is the ad-hoc
// limits'), under each limit of that namespace, so that id's next hit there
// starts afresh, and returns how many of them could still change a decision
// (Table.ResetID): what a Redis client's DEL of a CL.THROTTLE key asks,
// whose limit is in the command, not the key.
func (s *System) ResetID(ctx context.Context, namespace, id string) (int, error) {
	req := idRequest(id)
	req.Namespace = namespace
	return s.deleteBuckets(ctx, opResetID, req)
}

// deleteBuckets validates req, makes o, an operation that deletes buckets
// (opReset, opResetID), of it and returns the count o reports.
func (s *System) deleteBuckets(ctx context.Context, o op, req table.Request) (int, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	c, err := s.call(ctx, o, req)
	if err != nil {
		return 0, err
	}
	n := c.n
	s.release(c)
	return n, nil
}

// idRequest is the request of an operation on every limit of id (Buckets,
// ResetID): its policy is none of them, only one that validates, as a
// forwarded request must.
func idRequest(id string) table.Request {
	return table.Request{ID: id, Policy: table.Policy{Scale: time.Second}}
}

// Buckets returns every bucket of id, under every limit, as its shard
// holds them now.
func (s *System) Buckets(ctx context.Context, id string) ([]table.Bucket, error) {
	if id == "" || len(id) > table.MaxIDLen {
		return nil, &table.FieldError{Field: "id", Message: fmt.Sprintf("must be 1 to %d bytes", table.MaxIDLen)}
	}
	c, err := s.call(ctx, opBuckets, idRequest(id))
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
	return s.AppendCheckAll(ctx, nil, reqs)
}

// AppendCheckAll is CheckAll that appends the decisions to dst and returns
// the extended slice, so that a caller reusing its buffer allocates
// nothing per batch. Where CheckAll returns no decisions (an error before
// the checks are decided), it returns dst as it was.
func (s *System) AppendCheckAll(ctx context.Context, dst []table.Decision, reqs []table.Request) ([]table.Decision, bool, error) {
	if len(reqs) == 0 || len(reqs) > MaxCheckAll {
		return dst, false, &table.FieldError{Field: "checks", Message: table.MsgBatchSize}
	}
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			var fe *table.FieldError
			if errors.As(err, &fe) {
				return dst, false, &table.IndexError{Index: i, Err: fe}
			}
			return dst, false, err
		}
	}
	if err := ctx.Err(); err != nil {
		return dst, false, err
	}
	if s.cl != nil {
		decs, allowed, err := s.cl.checkAll(ctx, reqs)
		switch {
		case decs == nil:
			return dst, allowed, err
		case dst == nil:
			return decs, allowed, err
		}
		return append(dst, decs...), allowed, err
	}
	n := len(dst)
	out := dst
	if cap(out)-n < len(reqs) {
		out = make([]table.Decision, n, n+len(reqs)) // one allocation, race detector or not
		copy(out, dst)
	}
	out = out[:n+len(reqs)]
	allowed, decided, err := s.checkAllLocalInto(ctx, reqs, nil, out[n:])
	if !decided {
		return dst, false, err
	}
	return out, allowed, err
}

// allStack is the largest CheckAll whose bookkeeping checkAllLocal keeps
// on the stack.
const allStack = 128

// checkAllLocal is CheckAll on this System's shards. In cluster mode a
// (the unit, with its vshards and epochs) is fenced once its shards are
// held, and told where each check's hits were counted.
func (s *System) checkAllLocal(ctx context.Context, reqs []table.Request, a *allCall) ([]table.Decision, bool, error) {
	decs := make([]table.Decision, len(reqs))
	allowed, decided, err := s.checkAllLocalInto(ctx, reqs, a, decs)
	if !decided {
		return nil, false, err
	}
	return decs, allowed, err
}

// checkAllLocalInto is checkAllLocal with the decisions into decs, of
// len(reqs); decided is false when it returns before deciding (the
// decisions are then not made).
func (s *System) checkAllLocalInto(ctx context.Context, reqs []table.Request, a *allCall, decs []table.Decision) (allowed, decided bool, err error) {
	// order holds shard<<32 | index of each request: sorted, it lists the
	// requests shard by shard, each shard's in their order; tags holds each
	// id's hash in its shard's table (every table has the seed idSeed),
	// made before the shards are taken, so that they are held for less.
	// They and held live on the stack for a batch of up to allStack
	// requests.
	var orderBuf, tagsBuf [allStack]uint64
	var heldBuf [allStack]*shard
	order, tags := orderBuf[:0], tagsBuf[:0]
	if len(reqs) > allStack {
		order, tags = make([]uint64, 0, len(reqs)), make([]uint64, 0, len(reqs))
	}
	for i := range reqs {
		id := reqs[i].ID
		order = append(order, uint64(s.shardIndexOf(id))<<32|uint64(i))
		tags = append(tags, maphash.String(*s.cfg.idSeed, id))
	}
	slices.Sort(order)
	held := heldBuf[:0]
	for i, e := range order {
		if i == 0 || e>>32 != order[i-1]>>32 {
			held = append(held, s.shards[e>>32])
		}
	}
	if err := ctx.Err(); err != nil {
		return false, false, err
	}
	if err := s.hold(held); err != nil {
		return false, false, err
	}
	var wins []int64
	if a != nil {
		if err := s.cl.admitAll(a); err != nil {
			for _, sh := range held {
				sh.mu.Unlock()
			}
			return false, false, err
		}
		wins = make([]int64, len(reqs))
		a.wins = wins
	}
	allowed, err = s.decideAll(held, order, tags, reqs, decs, wins)
	if a != nil && err == nil {
		err = s.cl.lapsedErr()
	}
	return allowed, true, err
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

// Stop stops taking checks and the sweeping, lets the owners answer every
// check already queued, then stops the actors and closes the journals. Checks that arrive meanwhile get
// ErrStopped. Stop is idempotent; ctx bounds the wait.
func (s *System) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		if s.cl == nil {
			s.stopErr = s.stop(ctx)
			return
		}
		// A member hands its vshards off first, with at most 3/4 of the
		// time left, while it still serves the others' checks.
		lctx := ctx
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			lctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(d)*3/4))
			defer cancel()
		}
		s.cl.leave(lctx)
		s.cl.close(ctx)
		s.stopErr = s.stop(ctx)
	})
	return s.stopErr
}

// stopLocal stops a System whose Start failed after its shards started.
func (s *System) stopLocal(ctx context.Context) { _ = s.stop(ctx) }

func (s *System) stop(ctx context.Context) error {
	for _, sh := range s.shards {
		sh.q.close()
		sh.mu.Lock()
		sh.stopped = true
		sh.mu.Unlock()
	}
	err := s.quiesce(ctx)
	// Whatever an owner did not take before it stopped is answered here.
	for _, sh := range s.shards {
		for _, c := range sh.q.take(nil, true) {
			c.fail(ErrStopped)
		}
	}
	switch {
	case err != nil:
		s.actors.Shutdown()
		if s.lock != nil {
			s.cfg.Logger.Error("stop timed out: journals left open", "dir", s.cfg.DataDir)
		}
	default:
		if terr := s.teardown(); terr != nil {
			err = fmt.Errorf("actors: stop: %w", terr)
		}
	}
	s.cfg.Logger.Info("rate limiter stopped")
	return err
}

// quiesce stops the sweeping, then every owner once it has served what was
// queued before, within ctx.
func (s *System) quiesce(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if s.sweeping != nil {
			s.sweeping.stop()
		}
		var wg sync.WaitGroup
		for _, sh := range s.shards {
			wg.Go(func() { _ = s.actors.Root.PoisonFuture(sh.pid).Wait() })
		}
		wg.Wait()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: stop: %w", ctx.Err())
	}
}

// teardown frees what Start took, once no goroutine of the System can touch
// a shard (Start failed, or Stop has stopped the sweeping and the owners):
// the actors, the owners' dispatchers, then the journals and the data
// directory's lock.
func (s *System) teardown() error {
	s.actors.Shutdown()
	for _, sh := range s.shards {
		sh.dispatcher.stop()
	}
	if s.lock == nil {
		return nil
	}
	closeJournals(s.shards, &s.cfg)
	if err := s.lock.Unlock(); err != nil {
		return fmt.Errorf("unlock %s: %w", s.cfg.DataDir, err)
	}
	return nil
}
