package actors

import "sync"

// pinned is a protoactor Dispatcher that runs one mailbox on one long-lived
// goroutine. protoactor's default dispatcher starts a goroutine per mailbox
// activation, whose stack then grows on every batch; an owner activated
// hundreds of thousands of times a second spent most of its time there.
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
