// CheckAll in cluster mode. The requests of one owner are one unit,
// decided there all or nothing, as on a single node (its shards held
// together, fenced, rolled back unless every check is admitted). With one
// owner, that unit is the CheckAll. With several, every unit is decided
// (in parallel) and each reports where its hits were counted; if any unit
// is denied, the admitted ones are refunded, each check exactly in the
// window its hits were counted in (Request.Window), so the CheckAll
// counts nothing; between the two, a concurrent check may see those hits
// (and be denied: never admitted because of them). A unit whose owner did
// not answer may or may not have been decided: the CheckAll fails
// (ErrClusterUnavailable), and the unit is sent again under its id, which
// its owner remembers for a while, until its outcome is known and what it
// admitted refunded.

package actors

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// unitRun is one owner's unit of a CheckAll.
type unitRun struct {
	owner string
	idx   []int // the unit's requests, by index in the CheckAll
	a     *allCall
	err   error
}

// checkAll is CheckAll across the owners of the requests' vshards.
func (cl *cluster) checkAll(ctx context.Context, reqs []table.Request) ([]table.Decision, bool, error) {
	vsh := make([]int32, len(reqs))
	for i := range reqs {
		vsh[i] = int32(shardOf(reqs[i].ID, cl.n))
	}
	var until time.Duration
	for first := true; ; first = false {
		ch := cl.changed()
		vw := cl.view.Load()
		units, err := cl.split(vw, reqs, vsh)
		if err == nil {
			decs, allowed, rerr, again := cl.runUnits(ctx, vw, reqs, units)
			if !again {
				return decs, allowed, rerr
			}
			err = rerr
		}
		if errors.Is(err, errUnreachable) {
			return cl.failAll(reqs, err)
		}
		if first {
			until = cl.mono() + cl.cfg.Timeout
		}
		if !cl.await(ctx, ch, until) {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			return cl.failAll(reqs, err)
		}
	}
}

// split groups the requests by the owner of their vshard, one unit each.
func (cl *cluster) split(vw *view, reqs []table.Request, vsh []int32) ([]*unitRun, error) {
	byOwner := map[string]*unitRun{}
	var units []*unitRun
	for i := range reqs {
		o := vw.owners[vsh[i]]
		if o == "" || !vw.live(o) {
			return nil, errNoOwner
		}
		u := byOwner[o]
		if u == nil {
			u = &unitRun{owner: o, a: &allCall{unit: cl.units.Add(1)}}
			byOwner[o] = u
			units = append(units, u)
		}
		u.idx = append(u.idx, i)
		u.a.reqs = append(u.a.reqs, reqs[i])
		u.a.vshards = append(u.a.vshards, vsh[i])
		u.a.epochs = append(u.a.epochs, vw.epochs[vsh[i]])
	}
	return units, nil
}

// runUnits decides the units; again reports that the CheckAll, which
// counted nothing, must be routed again (err says why).
func (cl *cluster) runUnits(ctx context.Context, vw *view, reqs []table.Request, units []*unitRun) (decs []table.Decision, allowed bool, err error, again bool) {
	if len(units) == 1 {
		u := units[0]
		cl.runUnit(ctx, vw, u)
		if u.err != nil {
			return nil, false, u.err, retryable(u.err)
		}
		return cl.merge(reqs, units), u.a.allowed, nil, false
	}
	var wg sync.WaitGroup
	for _, u := range units[1:] {
		wg.Go(func() { cl.runUnit(ctx, vw, u) })
	}
	cl.runUnit(ctx, vw, units[0])
	wg.Wait()
	ok, denied, moved := true, false, error(nil)
	var unknown []*unitRun
	for _, u := range units {
		switch {
		case u.err == nil:
			denied = denied || !u.a.allowed
		case retryable(u.err):
			ok, moved = false, u.err
		default:
			ok = false
			unknown = append(unknown, u)
		}
	}
	if ok && !denied {
		return cl.merge(reqs, units), true, nil, false
	}
	// Not all admitted: give back what was.
	for _, u := range units {
		if u.err == nil && u.a.allowed {
			cl.refund(u.a)
		}
	}
	for _, u := range unknown {
		if u.owner != cl.id {
			go cl.compensate(u)
		} else {
			cl.stats.refundsLost.Add(1)
		}
	}
	switch {
	case len(unknown) > 0:
		decs, allowed, err := cl.failAll(reqs, unknown[0].err)
		return decs, allowed, err, false
	case denied:
		return cl.merge(reqs, units), false, nil, false
	}
	return nil, false, moved, true
}

// retryable reports whether err says a request was not counted and may be
// routed again.
func retryable(err error) bool {
	return errors.Is(err, errMoved) || errors.Is(err, errLeaseLapsed) || errors.Is(err, errNoOwner)
}

// runUnit decides u on its owner; its outcome is in u.a, or u.err.
func (cl *cluster) runUnit(ctx context.Context, vw *view, u *unitRun) {
	a := u.a
	if u.owner == cl.id {
		a.decs, a.allowed, u.err = cl.s.checkAllLocal(ctx, a.reqs, a)
		return
	}
	ob := cl.link(u.owner, vw.members[u.owner].Addr)
	if ob == nil {
		u.err = errUnreachable
		return
	}
	s := cl.s
	c := s.calls.Get().(*call)
	c.op, c.all, c.vshard = opAll, a, a.vshards[0]
	if err := ob.push(c); err != nil {
		c.all = nil
		s.release(c)
		u.err = err
		return
	}
	s.wait(ctx, c)
	if c.state.Load() == stateCancelled {
		u.err = ctx.Err() // not taken, so not counted; the call is not reused
		return
	}
	u.err = c.err
	c.all = nil
	s.release(c)
}

// merge puts the units' decisions in the order of the requests.
func (cl *cluster) merge(reqs []table.Request, units []*unitRun) []table.Decision {
	decs := make([]table.Decision, len(reqs))
	for _, u := range units {
		for j, i := range u.idx {
			decs[i] = u.a.decs[j]
		}
	}
	return decs
}

// refund gives back the hits an admitted unit counted, each in its window.
func (cl *cluster) refund(a *allCall) {
	for j, req := range a.reqs {
		if req.Hits < 1 || a.wins[j] == 0 {
			continue
		}
		req.Window = a.wins[j]
		c, err := cl.route(context.Background(), opRefund, req)
		if err != nil {
			cl.stats.refundsLost.Add(1)
			cl.log.Warn("CheckAll: a refund was not acknowledged; its hits stay counted", "id", req.ID, "err", err)
			continue
		}
		cl.s.release(c)
	}
}

// compensate sends an unanswered unit again, under its id, until its
// owner says how it was decided, and refunds what it admitted.
func (cl *cluster) compensate(u *unitRun) {
	stop := cl.mono() + dedupFor - cl.cfg.ForwardTimeout
	for cl.mono() < stop && cl.stopCtx.Err() == nil {
		cl.sleep(100 * time.Millisecond)
		vw := cl.view.Load()
		if o := vw.owners[u.a.vshards[0]]; o != "" && vw.live(o) {
			u.owner = o
		}
		u.err = nil
		cl.runUnit(context.Background(), vw, u)
		if u.err == nil {
			if u.a.allowed {
				cl.refund(u.a)
			}
			return
		}
	}
	cl.stats.refundsLost.Add(1)
	cl.log.Warn("CheckAll: the outcome of a unit stays unknown; what it may have counted stays counted", "checks", len(u.a.reqs))
}

// failAll answers a CheckAll no member could decide in time: admitted
// uncounted with FailOpen, else ErrClusterUnavailable.
func (cl *cluster) failAll(reqs []table.Request, cause error) ([]table.Decision, bool, error) {
	if cl.cfg.OnError == FailOpen {
		cl.stats.admittedOpen.Add(int64(len(reqs)))
		decs := make([]table.Decision, len(reqs))
		for i, r := range reqs {
			decs[i] = table.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit}
		}
		return decs, true, nil
	}
	cl.stats.unavailable.Add(int64(len(reqs)))
	return nil, false, errors.Join(ErrClusterUnavailable, cause)
}

// admitAll reports why unit a may not be decided here now, holding the
// shards of its requests.
func (cl *cluster) admitAll(a *allCall) error {
	ok := cl.leaseValid()
	for i := range a.reqs {
		if err := cl.admit(a.vshards[i], a.epochs[i], ok); err != nil {
			cl.stats.fenced.Add(int64(len(a.reqs)))
			return err
		}
	}
	return nil
}
