// Checks in cluster mode. A check goes to the owner of its vshard, by this
// member's view: decided here (fenced like any other) when that is this
// member, else queued in the outbox of the owner, whose flights carry
// everything queued in one batch (as the shard inbox does for its owner
// actor). A batch has an id (sender, process, sequence); its receiver
// keeps each reply a while and answers a batch it sees again with it, so
// a retry never counts twice. A check answered errMoved (not counted)
// waits for the view to change and goes again, within ClusterConfig.Timeout;
// one whose batch got no answer within ForwardTimeout may have been
// counted, and is answered ErrClusterUnavailable (or admitted, FailOpen).

package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/internal/peer"
	"github.com/ratelimitd/ratelimitd/table"
)

// Bounds of the outboxes.
const (
	maxBatchCalls = 4096 // checks one forwarded batch carries at most
	maxFlights    = 4    // batches in flight to one member at most
	flightKick    = 64   // checks queued that start another flight
)

// dedupFor is how long a member keeps the reply of a batch (and the
// outcome of a CheckAll unit) for a sender that sends it again: well past
// ForwardTimeout, when the sender stops retrying.
const dedupFor = 5 * time.Second

// allCall is a CheckAll unit (or part of one) for one member.
type allCall struct {
	unit    uint64 // the unit's id at its sender, for a retry to find its outcome
	reqs    []table.Request
	vshards []int32
	epochs  []int64
	decs    []table.Decision
	wins    []int64 // where each check's hits were counted (Reservation.Window)
	allowed bool
}

// route sends one validated request to the owner of its vshard and waits
// for the answer, as System.call does for one shard.
func (cl *cluster) route(ctx context.Context, o op, req table.Request) (*call, error) {
	v := int32(shardOf(req.ID, cl.n))
	var until time.Duration
	for first := true; ; first = false {
		ch := cl.changed()
		vw := cl.view.Load()
		owner, ep := vw.owners[v], vw.epochs[v]
		var c *call
		var err error
		switch {
		case owner == cl.id:
			c, err = cl.local(ctx, o, req, v, ep)
		case owner == "" || !vw.live(owner):
			err = errNoOwner
		default:
			c, err = cl.forward(ctx, vw, owner, o, req, v, ep)
		}
		switch {
		case err == nil:
			return c, nil
		case errors.Is(err, errUnreachable):
			return cl.fail(o, req, v, err)
		case !errors.Is(err, errMoved) && !errors.Is(err, errLeaseLapsed) && !errors.Is(err, errNoOwner):
			return nil, err
		}
		if first {
			until = cl.mono() + cl.cfg.Timeout
		}
		if !cl.await(ctx, ch, until) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return cl.fail(o, req, v, err)
		}
	}
}

// await waits for the view to change (or a short while: a renewed lease
// does not change it), and reports false once until (monotonic) has
// passed or ctx ended.
func (cl *cluster) await(ctx context.Context, ch <-chan struct{}, until time.Duration) bool {
	left := until - cl.mono()
	if left <= 0 {
		return false
	}
	t := time.NewTimer(min(left, 20*time.Millisecond))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// fail answers a request no member could decide in time: admitted
// uncounted with FailOpen (a check), else ErrClusterUnavailable.
func (cl *cluster) fail(o op, req table.Request, v int32, cause error) (*call, error) {
	if cl.cfg.OnError == FailOpen && o == opCheck {
		cl.stats.admittedOpen.Add(1)
		c := cl.s.calls.Get().(*call)
		c.res = table.Reservation{Decision: table.Decision{Allowed: true, Limit: req.Limit, Remaining: req.Limit}}
		return c, nil
	}
	if n := cl.stats.unavailable.Add(1); n == 1 || n%1000 == 0 {
		cl.log.Warn("checks without a serving owner answered unavailable", "vshard", v, "cause", cause, "count", n, "policy", cl.cfg.OnError)
	}
	return nil, fmt.Errorf("%w: vshard %d: %w", ErrClusterUnavailable, v, cause)
}

// local decides a request of vshard v, owned here by the view at epoch,
// on its shard: the fence there refuses it if that is no longer so.
func (cl *cluster) local(ctx context.Context, o op, req table.Request, v int32, epoch int64) (*call, error) {
	s := cl.s
	c := s.calls.Get().(*call)
	c.op, c.req, c.vshard, c.epoch = o, req, v, epoch
	sh := s.shards[int(v)%len(s.shards)]
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
			return nil, ctx.Err()
		}
	}
	if err := c.err; err != nil {
		s.release(c)
		return nil, err
	}
	return c, nil
}

// forward sends a request to its owner and waits for the answer. Until
// its batch takes it, ctx can cancel it (uncounted); then it waits for
// the batch, at most ForwardTimeout.
func (cl *cluster) forward(ctx context.Context, vw *view, owner string, o op, req table.Request, v int32, epoch int64) (*call, error) {
	ob := cl.link(owner, vw.members[owner].Addr)
	if ob == nil {
		return nil, errUnreachable
	}
	s := cl.s
	c := s.calls.Get().(*call)
	c.op, c.req, c.vshard, c.epoch = o, req, v, epoch
	if err := ob.push(c); err != nil {
		s.release(c)
		return nil, err
	}
	s.wait(ctx, c)
	if c.state.Load() == stateCancelled {
		return nil, ctx.Err()
	}
	if err := c.err; err != nil {
		s.release(c)
		return nil, err
	}
	return c, nil
}

// outbox queues the checks for one member and flies them there in batches.
type outbox struct {
	cl   *cluster
	to   string // member id
	addr string
	cli  *peer.Client

	mu      sync.Mutex
	pending []*call
	flights int
	closed  bool
	seq     atomic.Uint64
}

// link returns the outbox of member to at addr, making it (or a new one,
// if the member moved) if need be; nil if it cannot be dialled.
func (cl *cluster) link(to, addr string) *outbox {
	if v, ok := cl.links.Load(to); ok && v.(*outbox).addr == addr {
		return v.(*outbox)
	}
	cl.linkMu.Lock()
	defer cl.linkMu.Unlock()
	if v, ok := cl.links.Load(to); ok {
		if ob := v.(*outbox); ob.addr == addr {
			return ob
		}
		v.(*outbox).close()
	}
	cli, err := peer.Dial(addr)
	if err != nil {
		cl.log.Warn("cannot dial member", "member", to, "addr", addr, "err", err)
		return nil
	}
	ob := &outbox{cl: cl, to: to, addr: addr, cli: cli}
	cl.links.Store(to, ob)
	return ob
}

// pruneLinks closes the outboxes of members gone from vw.
func (cl *cluster) pruneLinks(vw *view) {
	cl.links.Range(func(k, v any) bool {
		if !vw.live(k.(string)) {
			cl.links.Delete(k)
			v.(*outbox).close()
		}
		return true
	})
}

// push queues c, starting a flight if none flies or many checks wait.
func (o *outbox) push(c *call) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return errMoved
	}
	o.pending = append(o.pending, c)
	start := o.flights == 0 || o.flights < maxFlights && len(o.pending) >= flightKick
	if start {
		o.flights++
	}
	o.mu.Unlock()
	if start {
		go o.fly()
	}
	return nil
}

// close fails what is queued (errMoved: it was not sent) and closes the
// connection once the flights in progress are done with it.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	pending := o.pending
	o.pending = nil
	o.mu.Unlock()
	for _, c := range pending {
		c.fail(errMoved)
	}
	_ = o.cli.Close()
}

// fly sends batches of what is queued until nothing is.
func (o *outbox) fly() {
	var buf []byte
	var batch []*call
	for {
		// Let the callers that are ready run and queue theirs first, so
		// that a batch is a batch (as the shard owners do).
		runtime.Gosched()
		o.mu.Lock()
		n := min(len(o.pending), maxBatchCalls)
		if n == 0 {
			o.flights--
			o.mu.Unlock()
			return
		}
		batch = append(batch[:0], o.pending[:n]...)
		rest := copy(o.pending, o.pending[n:])
		clear(o.pending[rest:])
		o.pending = o.pending[:rest]
		o.mu.Unlock()
		taken := batch[:0]
		for _, c := range batch {
			if c.state.CompareAndSwap(statePending, stateTaken) {
				taken = append(taken, c)
			}
		}
		if len(taken) == 0 {
			continue
		}
		h := fwdHeader{sender: o.cl.id, incarnation: o.cl.incarnation, seq: o.seq.Add(1)}
		buf = encodeForward(buf[:0], h, taken)
		o.send(buf, taken)
		clear(batch)
	}
}

// send sends one batch, again (the same id) while it fails, until
// ForwardTimeout; then it answers its calls.
func (o *outbox) send(req []byte, calls []*call) {
	cl := o.cl
	ctx, cancel := context.WithTimeout(cl.stopCtx, cl.cfg.ForwardTimeout)
	defer cancel()
	var err error
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var rep []byte
		if rep, err = o.cli.Call(ctx, "Forward", req); err == nil {
			err = decodeReply(rep, calls, o.to)
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			break
		}
		if errors.Is(err, peer.ErrRemote) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
			t.Stop()
		}
		// The transport's error as text only: its deadline is this batch's,
		// not the caller's, whose check is unavailable, not canceled.
		err = fmt.Errorf("%w: member %s at %s: %v", errUnreachable, o.to, o.addr, err)
		break
	}
	cl.countBatch(len(calls))
	for _, c := range calls {
		if err != nil {
			c.err = err
		}
		c.answer(c.err)
	}
}

// handleForward decides a batch forwarded to this member, or answers it
// with the reply kept for it if it was seen before.
func (cl *cluster) handleForward(_ context.Context, req []byte) ([]byte, error) {
	s := cl.s
	h, calls, err := decodeForward(req, cl.n, func() *call { return s.calls.Get().(*call) })
	defer func() {
		for _, c := range calls {
			c.vshard, c.epoch, c.all = 0, 0, nil
			s.release(c)
		}
	}()
	if err != nil {
		return nil, err
	}
	rep, dup := cl.dedup.do(h, func() []byte {
		cl.serveForwarded(h, calls)
		return encodeReply(nil, calls)
	})
	if dup {
		cl.stats.duplicates.Add(1)
	} else {
		cl.stats.receivedBatches.Add(1)
		cl.stats.receivedChecks.Add(int64(len(calls)))
	}
	return rep, nil
}

// serveForwarded decides the calls of a batch: each shard's in one go on
// this goroutine (or by the shard's owner actor, with SyncAlways), and
// each CheckAll unit on its own.
func (cl *cluster) serveForwarded(h fwdHeader, calls []*call) {
	s := cl.s
	// The calls by shard, in one slice: sorted by shard, stably.
	byShard := make([]*call, 0, len(calls))
	for _, c := range calls {
		if c.op == opAll {
			cl.serveUnit(h, c)
			continue
		}
		byShard = append(byShard, c)
	}
	nsh := int32(len(s.shards))
	slices.SortStableFunc(byShard, func(a, b *call) int { return int(a.vshard%nsh) - int(b.vshard%nsh) })
	for len(byShard) > 0 {
		i := byShard[0].vshard % nsh
		n := 1
		for n < len(byShard) && byShard[n].vshard%nsh == i {
			n++
		}
		g := byShard[:n]
		byShard = byShard[n:]
		sh := s.shards[i]
		served, err := s.serveDirect(sh, true, g...)
		switch {
		case err != nil:
			for _, c := range g {
				c.err = err
			}
		case !served:
			for _, c := range g {
				if err := s.submit(sh, c); err != nil {
					c.err = err
					continue
				}
				<-c.done
			}
		}
	}
}

// serveUnit decides a forwarded CheckAll unit here, or finds the outcome
// it had when it came before.
func (cl *cluster) serveUnit(h fwdHeader, c *call) {
	a := c.all
	if u, ok := cl.dedup.unit(h, a.unit); ok {
		a.allowed, a.decs, a.wins, c.err = u.allowed, u.decs, u.wins, u.err
		return
	}
	a.decs, a.allowed, c.err = cl.s.checkAllLocal(context.Background(), a.reqs, a)
	if !errors.Is(c.err, errMoved) && !errors.Is(c.err, errLeaseLapsed) {
		cl.dedup.keepUnit(h, a.unit, unitOutcome{allowed: a.allowed, decs: a.decs, wins: a.wins, err: c.err})
	}
}

// dedupe keeps, per sender process, the replies of its recent batches and
// the outcomes of its recent CheckAll units.
type dedupe struct {
	mu    sync.Mutex
	logs  map[senderKey]*sentLog
	calls int // since the last sweep of idle senders
}

type senderKey struct {
	sender      string
	incarnation uint64
}

type sentLog struct {
	replies map[uint64]*keptReply
	order   []keptAt // in arrival order, for expiry
	units   map[uint64]unitOutcome
	uorder  []keptAt
	used    time.Time
}

type keptAt struct {
	seq uint64
	at  time.Time
}

type keptReply struct {
	done  chan struct{}
	reply []byte
}

type unitOutcome struct {
	allowed bool
	decs    []table.Decision
	wins    []int64
	err     error
}

func (d *dedupe) init() { d.logs = map[senderKey]*sentLog{} }

// log returns the log of h's sender, holding d.mu, expiring old entries.
func (d *dedupe) log(h fwdHeader, now time.Time) *sentLog {
	k := senderKey{h.sender, h.incarnation}
	l := d.logs[k]
	if l == nil {
		l = &sentLog{replies: map[uint64]*keptReply{}, units: map[uint64]unitOutcome{}}
		d.logs[k] = l
	}
	l.used = now
	for len(l.order) > 0 && now.Sub(l.order[0].at) > dedupFor {
		delete(l.replies, l.order[0].seq)
		l.order = l.order[1:]
	}
	for len(l.uorder) > 0 && now.Sub(l.uorder[0].at) > dedupFor {
		delete(l.units, l.uorder[0].seq)
		l.uorder = l.uorder[1:]
	}
	if d.calls++; d.calls >= 1024 {
		d.calls = 0
		for k, o := range d.logs {
			if now.Sub(o.used) > 2*dedupFor {
				delete(d.logs, k)
			}
		}
	}
	return l
}

// do runs fn for batch h unless it ran before (or runs now), and returns
// its reply; dup reports a batch seen before.
func (d *dedupe) do(h fwdHeader, fn func() []byte) (reply []byte, dup bool) {
	now := time.Now()
	d.mu.Lock()
	l := d.log(h, now)
	if k := l.replies[h.seq]; k != nil {
		d.mu.Unlock()
		<-k.done
		return k.reply, true
	}
	k := &keptReply{done: make(chan struct{})}
	l.replies[h.seq] = k
	l.order = append(l.order, keptAt{seq: h.seq, at: now})
	d.mu.Unlock()
	k.reply = fn()
	close(k.done)
	return k.reply, false
}

// unit returns the outcome kept for unit u of h's sender.
func (d *dedupe) unit(h fwdHeader, u uint64) (unitOutcome, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.log(h, time.Now()).units[u]
	return o, ok
}

// keepUnit keeps the outcome of unit u of h's sender.
func (d *dedupe) keepUnit(h fwdHeader, u uint64, o unitOutcome) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.log(h, now)
	l.units[u] = o
	l.uorder = append(l.uorder, keptAt{seq: u, at: now})
}
