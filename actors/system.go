package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
)

// Errors returned by System. Match them with errors.Is.
var (
	// ErrStopped: the System is stopping or stopped and takes no more checks.
	ErrStopped = errors.New("actors: system stopped")
	// ErrUnavailable: the shard owner crashed while holding the check; the
	// check may or may not have been counted, and the owner is restarting.
	ErrUnavailable = errors.New("actors: shard owner unavailable")
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("actors: invalid config")
)

// Clock is the time source of the shard owners and the sweeper.
type Clock = sweeper.Clock

// SweepReport describes one sweep round over every shard.
type SweepReport = sweeper.Report

// SweepObserver receives a SweepReport after every sweep round; it must not block.
type SweepObserver = sweeper.Observer

// MaxShards is the largest Config.Shards accepted.
const MaxShards = 1 << 16

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

	// applyHook, set only by tests, runs in the owner before each Apply.
	applyHook func(table.Request)
}

func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.Shards < 0 || cfg.Shards > MaxShards:
		return cfg, fmt.Errorf("%w: Shards %d is outside [0, %d]", ErrConfig, cfg.Shards, MaxShards)
	case cfg.BucketTTL < 0:
		return cfg, fmt.Errorf("%w: BucketTTL %v is negative", ErrConfig, cfg.BucketTTL)
	case cfg.SweepBatch < 0:
		return cfg, fmt.Errorf("%w: SweepBatch %d is negative", ErrConfig, cfg.SweepBatch)
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
		cfg.Clock = sweeper.SystemClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// System is the embeddable rate limiter: shard-owner actors, each the single
// writer of its own table, and a sweeper. It is safe for concurrent use.
type System struct {
	cfg     Config
	actors  *actor.ActorSystem
	shards  []*shard
	sweeper *actor.PID // nil when sweeping is disabled
	calls   sync.Pool  // of *call

	stopOnce sync.Once
	stopErr  error
}

// Stats is a snapshot of a System's state.
type Stats struct {
	Shards   int   // shard owners
	Buckets  int64 // live buckets in all tables
	Restarts int64 // owner restarts after a crash since Start
}

// Start starts a System: its shard owners under a one-for-one supervisor, and
// its sweeper. ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*System, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	s := &System{
		cfg: cfg,
		actors: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return logger.With("lib", "protoactor")
		})),
		shards: make([]*shard, cfg.Shards),
	}
	s.calls.New = func() any { return &call{done: make(chan struct{}, 1)} }
	props := make([]*actor.Props, cfg.Shards)
	for i := range s.shards {
		sh := &shard{index: i, dispatcher: newPinned()}
		s.shards[i] = sh
		props[i] = actor.PropsFromProducer(func() actor.Actor { return newOwner(sh, &s.cfg) },
			actor.WithDispatcher(sh.dispatcher))
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
	cfg.Logger.Info("rate limiter started", "shards", cfg.Shards, "sweep_interval", cfg.SweepInterval, "bucket_ttl", cfg.BucketTTL)
	return s, nil
}

// Check counts req against its limit and returns the decision. The owner of
// req.ID's shard decides, serially, so for one bucket no more than the limit
// is ever admitted, however many goroutines call Check.
//
// An invalid req returns a *table.FieldError (matching table.ErrInvalid). If
// ctx ends before the owner takes the check, Check returns ctx.Err() and the
// check is not counted; once the owner has taken it, Check waits for and
// returns its decision, so a counted hit is never reported as an error.
func (s *System) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	if err := req.Validate(); err != nil {
		return table.Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return table.Decision{}, err
	}
	sh := s.shards[shardOf(req.ID, len(s.shards))]
	c := s.calls.Get().(*call)
	c.req = req
	kick, err := sh.q.push(c)
	if err != nil {
		c.reset()
		s.calls.Put(c)
		return table.Decision{}, err
	}
	if kick {
		s.actors.Root.Send(sh.pid, drainMessage{})
	}
	if done := ctx.Done(); done == nil {
		<-c.done // a plain receive: cheaper than a select
	} else {
		select {
		case <-c.done:
		case <-done:
			if c.state.CompareAndSwap(statePending, stateCancelled) {
				// The owner will skip c; it may still look at it, so c is not reused.
				return table.Decision{}, ctx.Err()
			}
			<-c.done // the owner took it: the decision is moments away
		}
	}
	d, err := c.dec, c.err
	c.reset()
	s.calls.Put(c)
	return d, err
}

// Stats returns a snapshot of the system's counters.
func (s *System) Stats() Stats {
	st := Stats{Shards: len(s.shards)}
	for _, sh := range s.shards {
		st.Buckets += sh.buckets.Load()
		st.Restarts += sh.restarts.Load()
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
	req   table.Request
	state atomic.Int32
	dec   table.Decision
	err   error
	done  chan struct{} // capacity 1; the owner signals it once
}

const (
	statePending   int32 = iota
	stateTaken           // the owner took it and will answer
	stateCancelled       // the caller gave up first; the owner skips it
)

// fail answers c with err unless its caller gave up.
func (c *call) fail(err error) {
	if c.state.CompareAndSwap(statePending, stateTaken) || c.state.Load() == stateTaken {
		c.err = err
		c.done <- struct{}{}
	}
}

func (c *call) reset() {
	c.req, c.dec, c.err = table.Request{}, table.Decision{}, nil
	c.state.Store(statePending)
}
