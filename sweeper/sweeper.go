package sweeper

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/actors/clock"
)

// Defaults for the zero fields of Config.
const (
	DefaultInterval = 10 * time.Second
	DefaultBatch    = 10_000
)

// Sweep asks a shard owner to delete up to Max buckets expired at Now.
// The owner answers with a *Swept (actor.Context.Respond).
type Sweep struct {
	Round  uint64
	Target int // echoed in the answer
	Now    time.Time
	Max    int
}

// Swept is a shard owner's answer to a Sweep.
type Swept struct {
	Round   uint64
	Target  int // the Target of the Sweep answered
	Deleted int
	// More reports that the owner stopped at Max and may hold more expired
	// buckets; the sweeper then asks again, after the checks queued meanwhile.
	More bool
}

// Report describes one finished sweep round over every owner.
type Report struct {
	// Deleted counts the buckets deleted in the round, plus those reported
	// since the last Report by late answers to a round cut short, so the sum
	// of Deleted over all Reports is every bucket the owners swept.
	Deleted  int
	Batches  int           // Sweep messages the round took
	Duration time.Duration // from the start of the round to the last answer
	Complete bool          // false when the round was cut short by the next tick
}

// Observer receives a Report after every round. It is called from the
// sweeper actor and must not block.
type Observer interface {
	SweepDone(Report)
}

// Config configures the sweeper actor.
type Config struct {
	Targets  []*actor.PID // the shard owners
	Interval time.Duration
	Batch    int // most buckets one Sweep message may delete
	Clock    clock.Clock
	Observer Observer     // may be nil
	Logger   *slog.Logger // may be nil
}

// tick starts a round; it is sent by the clock's timer.
type tick struct{}

// Props returns the Props of a sweeper actor: every Interval it starts a
// round, sending each target a Sweep of at most Batch buckets and repeating
// it while the target reports More. A round that is still running when the
// next tick comes is reported incomplete and replaced, so a target that
// restarted (and lost a Sweep) cannot stop the sweeping.
func Props(cfg Config) *actor.Props {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return actor.PropsFromProducer(func() actor.Actor { return &sweeper{cfg: cfg} })
}

type sweeper struct {
	cfg   Config
	timer clock.Timer

	round       uint64
	start       time.Time
	now         time.Time
	outstanding int
	deleted     int
	batches     int
	late        int // deleted by answers to a round given up, not yet reported
}

func (s *sweeper) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.schedule(c)
	case *actor.Stopping:
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.outstanding > 0 || s.late > 0 {
			s.finish(false, "stop") // report what was deleted before the stop
		}
	case tick:
		if s.outstanding > 0 {
			s.finish(false, "next tick")
		}
		s.begin(c)
		s.schedule(c)
	case *Swept:
		if m.Round != s.round || s.outstanding == 0 || m.Target < 0 || m.Target >= len(s.cfg.Targets) {
			// An answer to a round already given up: not asked again, but
			// what it deleted is gone and goes in the next Report.
			s.late += max(m.Deleted, 0)
			return
		}
		s.deleted += m.Deleted
		if m.More {
			s.ask(c, m.Target)
			return
		}
		if s.outstanding--; s.outstanding == 0 {
			s.finish(true, "")
		}
	}
}

func (s *sweeper) schedule(c actor.Context) {
	self, root := c.Self(), c.ActorSystem().Root
	s.timer = s.cfg.Clock.AfterFunc(s.cfg.Interval, func() { root.Send(self, tick{}) })
}

func (s *sweeper) begin(c actor.Context) {
	s.round++
	s.start = s.cfg.Clock.Now()
	s.now = s.start
	s.deleted, s.batches = 0, 0
	s.outstanding = len(s.cfg.Targets)
	for i := range s.cfg.Targets {
		s.ask(c, i)
	}
	if s.outstanding == 0 {
		s.finish(true, "")
	}
}

func (s *sweeper) ask(c actor.Context, target int) {
	s.batches++
	c.Request(s.cfg.Targets[target], &Sweep{Round: s.round, Target: target, Now: s.now, Max: s.cfg.Batch})
}

// finish reports the round; cut names what cut an incomplete round short.
func (s *sweeper) finish(complete bool, cut string) {
	r := Report{Deleted: s.deleted + s.late, Batches: s.batches, Duration: s.cfg.Clock.Now().Sub(s.start), Complete: complete}
	s.outstanding, s.deleted, s.late, s.batches = 0, 0, 0, 0
	if !complete {
		s.cfg.Logger.Warn("sweep round cut short", "by", cut, "round", s.round, "deleted", r.Deleted)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.SweepDone(r)
	}
}
