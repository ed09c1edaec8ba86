// The sweeping loop: one goroutine per System (none when sweeping is off),
// started by Start and stopped by Stop. It owns the sweep policy (package
// sweeper) and its timers on Config.Clock: at every tick it starts a round,
// then carries the round's Sweeps out one at a time, each on one shard, as
// slices it sends to the shard's owner one after the other. The owner
// serves the checks queued before a slice, then deletes at most sweepSlice
// buckets or for at most sweepSliceTime, and answers; the next slice is
// sent after the answer, so it goes into the owner's mailbox behind the
// checks queued meanwhile. Each slice owes a pause of (sweepDuty-1) times
// its hold, slept once the debt reaches sweepPauseMin, so a large backlog
// takes at most 1/sweepDuty of one core, spread over time.
// Its fields are the loop's alone, but for ticks and resume (the timers'),
// answers (the owners'), quit (Stop's) and the counters (SweepStats').

package actors

import (
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock"
	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
)

const (
	// sweepSlice is the most expired buckets one slice deletes while it
	// holds a shard, whatever the clock says.
	sweepSlice = 512
	// sweepSliceTime bounds, on Config.Clock, how long one slice deletes
	// while it holds a shard: the wait it adds to a check that arrives then.
	sweepSliceTime = 25 * time.Microsecond
	// sweepDuty paces a backlog: a slice that held its shard for d owes
	// (sweepDuty-1)·d of pause, so that sweeping takes at most 1/sweepDuty
	// of one core and checks keep the rest.
	sweepDuty = 4
	// sweepPauseMin is the least pause the sweeping sleeps: the debt of
	// several slices is slept at once, since a timer much shorter than
	// this fires late on a busy machine and would slow the sweep well
	// below its duty.
	sweepPauseMin = time.Millisecond
)

// sliceMessage asks a shard's owner to delete up to most buckets expired
// at now, in one hold of the shard, and to answer on reply.
type sliceMessage struct {
	now   time.Time
	most  int
	reply chan<- sliceDone
}

// sliceDone is an owner's answer to a sliceMessage.
type sliceDone struct {
	deleted int
	more    bool          // the slice stopped on a bound: expired buckets may remain
	held    time.Duration // on Config.Clock, from the deletions' start to the shard's release
	ok      bool          // false: the slice panicked and the shard was repaired
}

// SweepStats is the pace of the sweeping, as System.SweepStats reports it.
type SweepStats struct {
	// Slices counts the slices carried out since Start, each one hold of
	// a shard.
	Slices int64
	// Backlog counts the shards whose last slice stopped on its bounds:
	// they hold expired buckets still to sweep.
	Backlog int
}

// SweepStats returns the pace of the sweeping (zero when it is off).
func (s *System) SweepStats() SweepStats {
	w := s.sweeping
	if w == nil {
		return SweepStats{}
	}
	return SweepStats{Slices: w.slices.Load(), Backlog: int(w.backlog.Load())}
}

// sweeping is the state of the sweeping loop.
type sweeping struct {
	shards  []*shard
	cfg     *Config
	policy  *sweeper.Policy
	timer   clock.Timer
	ticks   chan struct{}  // capacity 1: a tick already pending absorbs the next
	resume  chan struct{}  // capacity 1: the pause after a slice is over
	answers chan sliceDone // capacity 1: one slice at a time is out
	quit    chan struct{}  // closed by stop
	done    chan struct{}  // closed when the loop has ended

	cur      sweeper.Sweep // the Sweep being carried out, if busy
	deleted  int           // by cur's slices so far
	busy     bool          // cur is being carried out
	inflight bool          // a slice of cur is out at its owner
	pausing  bool          // the pause after the last slice is not over
	pause    clock.Timer   // its timer, if pausing
	debt     time.Duration // of pause, owed by the slices since the last one

	// For SweepStats: slices carried out, and the shards whose last slice
	// stopped on its bounds, still holding expired buckets to sweep.
	slices  atomic.Int64
	behind  []atomic.Bool
	backlog atomic.Int64
}

// startSweeping starts the sweeping loop of shards, its first tick armed.
func startSweeping(shards []*shard, cfg *Config) *sweeping {
	w := &sweeping{
		shards:  shards,
		cfg:     cfg,
		policy:  sweeper.New(len(shards), cfg.SweepBatch),
		ticks:   make(chan struct{}, 1),
		resume:  make(chan struct{}, 1),
		answers: make(chan sliceDone, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		behind:  make([]atomic.Bool, len(shards)),
	}
	w.arm()
	go w.run()
	return w
}

// stop ends the loop, after the slice it has out, and waits for it.
func (w *sweeping) stop() {
	close(w.quit)
	<-w.done
}

func (w *sweeping) run() {
	defer close(w.done)
	for {
		if !w.inflight && !w.pausing {
			if !w.busy {
				w.cur, w.busy = w.policy.Next()
				w.deleted = 0
				if !w.busy {
					w.debt = 0 // idle: the pause is over
				}
			}
			if w.busy {
				w.send()
			}
		}
		select {
		case <-w.quit:
			if w.inflight {
				w.answered(<-w.answers) // its owner runs until the sweeping has stopped
			}
			w.end()
			return
		case <-w.ticks:
			w.tick()
		case a := <-w.answers:
			w.answered(a)
		case <-w.resume:
			w.pausing = false
		}
	}
}

// send hands the next slice of cur to its shard's owner. Being a message,
// it queues behind the checks sent to the owner before it.
func (w *sweeping) send() {
	sh := w.shards[w.cur.Target]
	w.inflight = true
	sh.root.Send(sh.pid, sliceMessage{now: w.cur.Now, most: min(sweepSlice, w.cur.Max-w.deleted), reply: w.answers})
}

// answered takes the answer to the slice out: it ends cur when its shard
// has nothing more expired or cur's bound is reached, handing the policy
// the answer, and adds the slice's pause to the debt, sleeping it once it
// is due.
func (w *sweeping) answered(a sliceDone) {
	w.inflight = false
	w.slices.Add(1)
	w.deleted += a.deleted
	more := a.ok && a.more
	w.setBehind(w.cur.Target, more)
	if !more || w.deleted >= w.cur.Max {
		w.busy = false
		m := sweeper.Swept{Round: w.cur.Round, Target: w.cur.Target, Deleted: w.deleted, More: more}
		if r, ok := w.policy.Swept(m, w.cfg.Clock.Now()); ok {
			w.report(r, "")
		}
	}
	if w.debt += (sweepDuty - 1) * a.held; w.debt >= sweepPauseMin {
		w.pausing = true
		w.pause = w.cfg.Clock.AfterFunc(w.debt, func() { w.resume <- struct{}{} })
		w.debt = 0
	}
}

// setBehind records whether shard i still holds expired buckets to sweep.
func (w *sweeping) setBehind(i int, behind bool) {
	if w.behind[i].Swap(behind) != behind {
		if behind {
			w.backlog.Add(1)
		} else {
			w.backlog.Add(-1)
		}
	}
}

// arm sets the timer of the next tick.
func (w *sweeping) arm() {
	w.timer = w.cfg.Clock.AfterFunc(w.cfg.SweepInterval, func() {
		select {
		case w.ticks <- struct{}{}:
		default:
		}
	})
}

// tick starts a round, cutting short the one still running, and arms the
// next tick. A Sweep being carried out goes on to its end; its answer is
// then a late one.
func (w *sweeping) tick() {
	if r, ok := w.policy.Tick(w.cfg.Clock.Now()); ok {
		w.report(r, "next tick")
	}
	w.arm()
}

// end stops the timers and reports what was swept and not yet reported.
func (w *sweeping) end() {
	w.timer.Stop()
	if w.pausing {
		w.pause.Stop()
	}
	if r, ok := w.policy.Stop(w.cfg.Clock.Now()); ok {
		w.report(r, "stop")
	}
}

// report tells the observer about a round; cut names what cut an
// incomplete round short.
func (w *sweeping) report(r sweeper.Report, cut string) {
	if !r.Complete {
		w.cfg.Logger.Warn("sweep round cut short", "by", cut, "deleted", r.Deleted)
	}
	if w.cfg.SweepObserver != nil {
		w.cfg.SweepObserver.SweepDone(r)
	}
}

// sweepSlice carries out m on sh, holding sh.mu: it serves the checks
// queued before it, deletes up to m.most buckets expired at m.now for at
// most sweepSliceTime, and serves what was queued meanwhile (journaling
// the deletions) before it lets go. A panic repairs the shard; ok is then
// false. The owner runs it when m reaches the head of its mailbox.
func (sh *shard) sweepSlice(cfg *Config, m sliceMessage) (a sliceDone) {
	sh.mu.Lock()
	defer func() {
		if r := recover(); r != nil {
			sh.repair(cfg, r, 0)
			a = sliceDone{}
		}
		sh.mu.Unlock()
	}()
	sh.serveQueued(cfg, false) // a crash there is repaired by serve
	if cfg.sweepHook != nil {
		cfg.sweepHook()
	}
	start := cfg.Clock.Now()
	deadline := start.Add(sweepSliceTime)
	sw := sh.table.DeleteExpiredSlice(m.now, table.Slice{Max: m.most, Over: func() bool {
		return !cfg.Clock.Now().Before(deadline)
	}})
	sh.serveQueued(cfg, false)
	return sliceDone{deleted: sw.Deleted, more: sw.More, held: cfg.Clock.Now().Sub(start), ok: true}
}
