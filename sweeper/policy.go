package sweeper

import "time"

// Defaults of the sweep settings (actors.Config.SweepInterval and SweepBatch).
const (
	DefaultInterval = 10 * time.Second
	DefaultBatch    = 10_000
)

// Sweep asks target Target to delete up to Max buckets expired at Now.
type Sweep struct {
	Round  uint64
	Target int
	Now    time.Time
	Max    int
}

// Swept is a target's answer to a Sweep.
type Swept struct {
	Round   uint64
	Target  int // the Target of the Sweep answered
	Deleted int
	// More reports that the target stopped at Max and may hold more expired
	// buckets; the policy then asks it again.
	More bool
}

// Report describes one finished sweep round over every target.
type Report struct {
	// Deleted counts the buckets deleted in the round, plus those reported
	// since the last Report by late answers to a round cut short, so the sum
	// of Deleted over all Reports is every bucket the targets swept.
	Deleted  int
	Batches  int           // Sweeps the round asked for
	Duration time.Duration // from the start of the round to the last answer
	Complete bool          // false when the round was cut short (the next tick, or Stop)
}

// Observer receives a Report after every round. It is called on the
// goroutine that drives the sweeping and must not block.
type Observer interface {
	SweepDone(Report)
}

// Policy decides what each round of sweeping asks of its targets: a Sweep
// per target at every tick, another while a target answers More, and when
// the round is over. It holds only the state of the rounds: whoever drives
// it reads the clock, carries the Sweeps out and hands back the answers.
// A Policy is not safe for concurrent use.
type Policy struct {
	targets int
	batch   int

	round       uint64
	start       time.Time
	now         time.Time // the time every Sweep of the round deletes at
	pending     []Sweep   // asked for, not yet handed out by Next
	outstanding int       // targets of the round still to answer their last Sweep
	deleted     int
	batches     int
	late        int // deleted by answers to a round cut short, not yet reported
}

// New returns the Policy of sweeping targets 0 to targets-1, at most batch
// buckets per Sweep; batch <= 0 means DefaultBatch.
func New(targets, batch int) *Policy {
	if batch <= 0 {
		batch = DefaultBatch
	}
	return &Policy{targets: max(targets, 0), batch: batch}
}

// Tick starts a round at now: a Sweep of every target at now, handed out by
// Next. A round still running is cut short and its Report (incomplete)
// returned, so a target that never answers cannot stop the sweeping. With
// no targets the new round is over at once, and its Report is returned.
func (p *Policy) Tick(now time.Time) (r Report, ok bool) {
	if p.outstanding > 0 {
		r, ok = p.finish(false, now), true
	}
	p.round++
	p.start, p.now = now, now
	p.deleted, p.batches = 0, 0
	p.outstanding = p.targets
	for i := range p.targets {
		p.ask(i)
	}
	if p.targets == 0 {
		r, ok = p.finish(true, now), true
	}
	return r, ok
}

// Next hands out the next Sweep to carry out, if the round has one pending.
func (p *Policy) Next() (Sweep, bool) {
	if len(p.pending) == 0 {
		return Sweep{}, false
	}
	m := p.pending[0]
	p.pending = p.pending[1:]
	return m, true
}

// Swept takes the answer to a Sweep, at now. If the target has more, its
// next Sweep is pending (Next); if this was the round's last answer, the
// round's Report is returned. An answer to a round cut short is not asked
// again, but what it deleted goes in the next Report.
func (p *Policy) Swept(m Swept, now time.Time) (r Report, ok bool) {
	if m.Round != p.round || p.outstanding == 0 || m.Target < 0 || m.Target >= p.targets {
		p.late += max(m.Deleted, 0)
		return Report{}, false
	}
	p.deleted += m.Deleted
	if m.More {
		p.ask(m.Target)
		return Report{}, false
	}
	if p.outstanding--; p.outstanding > 0 {
		return Report{}, false
	}
	return p.finish(true, now), true
}

// Stop ends the sweeping at now: it returns the Report (incomplete) of what
// was deleted and not yet reported, a round still running or late answers.
func (p *Policy) Stop(now time.Time) (r Report, ok bool) {
	if p.outstanding == 0 && p.late == 0 {
		return Report{}, false
	}
	return p.finish(false, now), true
}

func (p *Policy) ask(target int) {
	p.batches++
	p.pending = append(p.pending, Sweep{Round: p.round, Target: target, Now: p.now, Max: p.batch})
}

// finish ends the round and returns its Report.
func (p *Policy) finish(complete bool, now time.Time) Report {
	r := Report{Deleted: p.deleted + p.late, Batches: p.batches, Duration: now.Sub(p.start), Complete: complete}
	p.outstanding, p.deleted, p.late, p.batches = 0, 0, 0, 0
	p.pending = p.pending[:0]
	return r
}
