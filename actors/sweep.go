// The sweeping loop: one goroutine per System (none when sweeping is off),
// started by Start and stopped by Stop. It owns the sweep policy (package
// sweeper) and its timer on Config.Clock: at every tick it starts a round,
// then carries the round's Sweeps out one at a time, each on one shard,
// holding the shard's sh.mu for one slice at a time and serving the checks
// queued meanwhile before it lets go, as a caller serving itself would.
// Its fields are the loop's alone, but for ticks (the timer's) and quit
// (Stop's).

package actors

import (
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock"
	"github.com/ratelimitd/ratelimitd/sweeper"
)

// sweepSlice is how many expired buckets a sweep deletes while it holds a
// shard, so that a large expiry lets the checks in between slices.
const sweepSlice = 1000

// sweeping is the state of the sweeping loop.
type sweeping struct {
	shards []*shard
	cfg    *Config
	policy *sweeper.Policy
	timer  clock.Timer
	ticks  chan struct{} // capacity 1: a tick already pending absorbs the next
	quit   chan struct{} // closed by stop
	done   chan struct{} // closed when the loop has ended
}

// startSweeping starts the sweeping loop of shards, its first tick armed.
func startSweeping(shards []*shard, cfg *Config) *sweeping {
	w := &sweeping{
		shards: shards,
		cfg:    cfg,
		policy: sweeper.New(len(shards), cfg.SweepBatch),
		ticks:  make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	w.arm()
	go w.run()
	return w
}

// stop ends the loop, after the Sweep it is carrying out, and waits for it.
func (w *sweeping) stop() {
	close(w.quit)
	<-w.done
}

func (w *sweeping) run() {
	defer close(w.done)
	for {
		m, ok := w.policy.Next()
		if ok {
			w.carryOut(m)
		}
		if w.await(!ok) {
			w.end()
			return
		}
	}
}

// await handles a tick, waiting for one if block is set, and reports
// whether the loop must stop instead.
func (w *sweeping) await(block bool) (quit bool) {
	if !block {
		select {
		case <-w.quit:
			return true
		case <-w.ticks:
			w.tick()
		default:
		}
		return false
	}
	select {
	case <-w.quit:
		return true
	case <-w.ticks:
		w.tick()
		return false
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
// next tick.
func (w *sweeping) tick() {
	if r, ok := w.policy.Tick(w.cfg.Clock.Now()); ok {
		w.report(r, "next tick")
	}
	w.arm()
}

// carryOut sweeps the shard m asks for and hands the answer to the policy.
func (w *sweeping) carryOut(m sweeper.Sweep) {
	a := w.shards[m.Target].sweep(w.cfg, m)
	if r, ok := w.policy.Swept(a, w.cfg.Clock.Now()); ok {
		w.report(r, "")
	}
}

// end stops the timer and reports what was swept and not yet reported.
func (w *sweeping) end() {
	w.timer.Stop()
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

// sweep carries out m on sh: it deletes up to m.Max buckets expired at
// m.Now, a slice at a time, and answers how many.
func (sh *shard) sweep(cfg *Config, m sweeper.Sweep) sweeper.Swept {
	n := 0
	for n < m.Max {
		k, ok := sh.sweepSlice(cfg, m.Now, min(sweepSlice, m.Max-n))
		if n += k; !ok || k < sweepSlice {
			break
		}
	}
	return sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max}
}

// sweepSlice deletes up to most buckets expired at now, holding sh.mu, and
// serves what was queued meanwhile before it lets go. A panic repairs the
// shard; ok is then false.
func (sh *shard) sweepSlice(cfg *Config, now time.Time, most int) (n int, ok bool) {
	sh.mu.Lock()
	defer func() {
		if r := recover(); r != nil {
			sh.repair(cfg, r, 0)
			n, ok = 0, false
		}
		sh.mu.Unlock()
	}()
	if cfg.sweepHook != nil {
		cfg.sweepHook()
	}
	n = sh.table.DeleteExpired(now, most)
	sh.serveQueued(cfg, false) // a crash there is repaired by serve
	return n, true
}
