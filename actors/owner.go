// The owner actors and their supervision. Each shard's owner is a
// protoactor actor, the shard's address for messages: it drains the
// shard's inbox when a drainMessage comes (from submit) and ends a
// snapshot when a snapshotDone comes (from the snapshot writer). It runs
// on its own goroutine (pinned) and touches its shard only holding sh.mu.
// The supervisor spawns the owners and restarts, one for one, an owner
// that failed; the shard itself is made sound by whoever held sh.mu when
// it crashed (repair), the owner included, before anyone serves it again.

package actors

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// drainMessage tells an owner that its inbox holds checks.
type drainMessage struct{}

// drainQuantum is how many checks an owner serves for one drainMessage
// before it lets the other messages of its mailbox through.
const drainQuantum = 4096

// owner is the actor of one shard. Its own failures (a panic while it
// serves a batch or ends a snapshot) are its supervisor's to handle: it
// repairs the shard, then fails, and the supervisor restarts it.
type owner struct {
	sh  *shard
	cfg *Config
}

func (o *owner) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case drainMessage:
		o.drainAll(c)
	case snapshotDone:
		o.locked(c, func() { o.sh.snapshotted(o.cfg, m) })
	case sliceMessage:
		m.reply <- o.sh.sweepSlice(o.cfg, m) // see sweep.go
	case *actor.Restarting:
		o.cfg.Logger.Warn("shard owner restarting", "shard", o.sh.index, "journal", o.sh.j != nil)
	}
}

// drainAll serves the inbox, batch after batch, until it stays empty or
// drainQuantum checks were served.
func (o *owner) drainAll(c actor.Context) {
	for served, last := 0, 0; ; {
		n := o.drain(c, last <= 1)
		if n == 0 && last <= 1 {
			return // settled: the next push sends a drainMessage
		}
		if n == 0 {
			// Checks were arriving together: let the callers that are
			// ready run and queue theirs, so that the next batch is a
			// batch, not one drainMessage each. Then settle.
			runtime.Gosched()
		}
		last = n
		if served += n; served >= drainQuantum {
			// Let the other messages of the mailbox through between
			// slices of a long drain.
			c.Send(c.Self(), drainMessage{})
			return
		}
	}
}

// drain answers one batch of queued checks and returns its size.
func (o *owner) drain(c actor.Context, settle bool) (n int) {
	var crash any
	o.locked(c, func() { n, crash = o.sh.serveQueued(o.cfg, settle) })
	if crash != nil {
		// The batch was answered and the shard repaired (serve); the
		// failure is the owner's, for its supervisor.
		o.fail(c, crash)
	}
	return n
}

// locked runs fn holding sh.mu. If fn panics, the shard is repaired before
// sh.mu is released, and then the owner fails.
func (o *owner) locked(c actor.Context, fn func()) {
	sh := o.sh
	sh.mu.Lock()
	defer func() {
		r := recover()
		if r != nil {
			sh.repair(o.cfg, r, 0)
		}
		sh.mu.Unlock()
		if r != nil {
			o.fail(c, r)
		}
	}()
	fn()
}

// fail hands the owner's failure r to its supervisor, which restarts it.
// The inbox counts on the owner to drain it, so the restarted owner is
// told to.
func (o *owner) fail(c actor.Context, r any) {
	c.Send(c.Self(), drainMessage{})
	panic(r)
}

// spawnOwners spawns every shard's owner under one supervisor and waits,
// within ctx, for their PIDs.
func (s *System) spawnOwners(ctx context.Context) error {
	props := make([]*actor.Props, len(s.shards))
	for i, sh := range s.shards {
		props[i] = actor.PropsFromProducer(func() actor.Actor { return &owner{sh: sh, cfg: &s.cfg} },
			actor.WithDispatcher(sh.dispatcher))
	}
	ready := make(chan []*actor.PID, 1)
	s.actors.Root.Spawn(actor.PropsFromProducer(
		func() actor.Actor { return &supervisor{children: props, ready: ready} },
		// One-for-one: a failed owner alone is restarted, however often;
		// its peers keep serving.
		actor.WithSupervisor(actor.NewRestartingStrategy()),
	))
	select {
	case pids := <-ready:
		for i, pid := range pids {
			s.shards[i].pid = pid
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: start: %w", ctx.Err())
	}
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

// pinned is a protoactor Dispatcher that runs one mailbox on one long-lived
// goroutine: protoactor's default dispatcher starts a goroutine per mailbox
// activation, whose stack then grows again on every batch.
type pinned struct {
	runs chan func() // a nil func stops the goroutine
	wg   sync.WaitGroup
	once sync.Once
}

// throughput is how many messages a mailbox run handles before yielding.
const throughput = 300

func newPinned() *pinned {
	p := &pinned{runs: make(chan func(), 1)}
	p.wg.Go(func() {
		for fn := <-p.runs; fn != nil; fn = <-p.runs {
			fn()
		}
	})
	return p
}

// Schedule implements actor.Dispatcher. It uses plain channel operations,
// not a select: this is on the path of every batch.
//
// Schedule never blocks for long: a mailbox schedules again only after the
// run it scheduled before has started, so the one slot is free again; and
// after stop, at most one more run is scheduled (it is never run: the
// mailbox stays "running" and schedules nothing more), which the slot holds.
func (p *pinned) Schedule(fn func()) { p.runs <- fn }

// Throughput implements actor.Dispatcher.
func (p *pinned) Throughput() int { return throughput }

// stop ends the goroutine, after the runs already scheduled, and waits for it.
func (p *pinned) stop() {
	p.once.Do(func() {
		p.runs <- nil
		p.wg.Wait()
	})
}
