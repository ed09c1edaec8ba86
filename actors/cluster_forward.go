// Checks in cluster mode. A check goes to the owner of its vshard, by this
// member's view: decided here (fenced like any other) when that is this
// member, else queued in the outbox of the owner, whose batches carry
// everything queued (as the shard inbox does for its owner actor), on one
// long-lived stream to that member, each reply matched to its batch by
// the batch's seq. A batch has an id (sender, process, sequence); its
// receiver keeps each reply a while and answers a batch it sees again
// with it. A batch that was sent is never sent again (a check is never
// decided twice); one that could not be sent is tried again, on a new
// stream, until ForwardTimeout. A check answered errMoved (not counted)
// waits for the view to change and goes again, within
// ClusterConfig.Timeout; one whose batch got no answer within
// ForwardTimeout may have been counted, and is answered
// ErrClusterUnavailable (or admitted, FailOpen).

package actors

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
		case o == opResetID && vw.members[owner].wire() < wireResetID:
			return nil, fmt.Errorf("%w: vshard %d: its owner %s runs a build without ResetID (DEL); upgrade it", ErrUnavailable, v, owner)
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
	served, err := s.serveDirect(ctx, sh, c)
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

// outbox queues the checks for one member and flies them there in
// batches, on one long-lived stream at a time: the first check into an
// idle outbox sends itself (with whatever is queued), and each answered
// batch sends what was queued meanwhile. A reply carries its batch's seq.
type outbox struct {
	cl   *cluster
	to   string // member id
	addr string
	cli  *peer.Client

	mu      sync.Mutex
	pending []*call
	flights int // batches taken from pending and not yet answered
	closed  bool
	st      *fstream // the stream batches go on; nil: the next batch opens one
	seq     atomic.Uint64

	openMu  sync.Mutex  // one stream opening at a time
	warming atomic.Bool // warmLinks is opening a stream
}

// fstream is one stream to the member and the batches in flight on it.
type fstream struct {
	ps       *peer.Stream
	mu       sync.Mutex
	inflight map[uint64]*flight
	dead     bool // broken or reset: nothing more goes on it
	draining bool // the member is stopping: closed once what it carries is answered
}

// flight is one batch, from its taking until its answer.
type flight struct {
	seq      uint64
	calls    []*call
	deadline time.Time // ForwardTimeout after it was taken
	timer    *time.Timer
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
	cli, err := peer.Dial(addr, cl.cfg.TLS)
	if err != nil {
		cl.log.Warn("cannot dial member", "member", to, "addr", addr, "err", err)
		return nil
	}
	ob := &outbox{cl: cl, to: to, addr: addr, cli: cli}
	cl.links.Store(to, ob)
	return ob
}

// warmLinks opens, in the background, a stream to each other member of vw
// that has none (a new member, or one whose stream broke), so that the
// first check forwarded there finds it open: otherwise that check waits
// for the connection and the stream's opening, which on a loaded host
// outlasted ForwardTimeout and answered the check unavailable. An opening
// is bounded by ForwardTimeout, like a batch's: a batch that comes
// meanwhile waits for it (openMu) no longer than it would open a stream
// itself. A failure is left for the next pass, or the next batch, to try
// again.
func (cl *cluster) warmLinks(vw *view) {
	for id, m := range vw.members {
		if id == cl.id || m.Leaving {
			continue
		}
		ob := cl.link(id, m.Addr)
		if ob == nil || ob.current() != nil || !ob.warming.CompareAndSwap(false, true) {
			continue
		}
		cl.loops.Add(1) // within the control loop, itself one of them
		go func() {
			defer cl.loops.Done()
			defer ob.warming.Store(false)
			if _, err := ob.stream(time.Now().Add(cl.cfg.ForwardTimeout)); err != nil && cl.stopCtx.Err() == nil {
				cl.log.Debug("opening a stream to a member ahead of its checks failed; the next pass tries again", "member", ob.to, "addr", ob.addr, "err", err)
			}
		}()
	}
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

// push queues c; if no batch flies (or many checks wait), the caller
// sends a batch itself.
func (o *outbox) push(c *call) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return errMoved
	}
	o.pending = append(o.pending, c)
	start := o.startLocked()
	o.mu.Unlock()
	if start {
		// Let the callers that are ready run and queue theirs first, so
		// that a batch is a batch (as the shard owners do).
		runtime.Gosched()
		o.fly()
	}
	return nil
}

// startLocked reports whether a batch should go now, and if so counts
// it, holding o.mu: when none flies, or when many checks wait and fewer
// than maxFlights fly.
func (o *outbox) startLocked() bool {
	n := len(o.pending)
	if n == 0 || o.flights > 0 && (o.flights >= maxFlights || n < flightKick) {
		return false
	}
	o.flights++
	return true
}

// close fails what is queued (errMoved: it was not sent) and ends the
// streams: the batches in flight on them are unanswered.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	pending, st := o.pending, o.st
	o.pending, o.st = nil, nil
	o.mu.Unlock()
	for _, c := range pending {
		c.fail(errMoved)
	}
	if st != nil {
		o.reset(st, fmt.Errorf("%w: member %s at %s: link closed", errUnreachable, o.to, o.addr))
	}
	_ = o.cli.Close()
}

// fly sends a batch of what is queued, counted in o.flights already, and
// again for as long as a batch fails before it was sent and more wait.
func (o *outbox) fly() {
	for {
		f := o.take()
		if f == nil {
			return
		}
		h := fwdHeader{sender: o.cl.id, incarnation: o.cl.incarnation, seq: f.seq}
		err := o.send(f, encodeForward(nil, h, f.calls))
		if err == nil {
			return // its reply, or its deadline, lands it
		}
		if !o.land(f, err) {
			return
		}
	}
}

// take takes a batch from what is queued: nil, with its flight uncounted,
// if every check queued was cancelled meanwhile (or none is).
func (o *outbox) take() *flight {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.pending) > 0 {
		n := min(len(o.pending), maxBatchCalls)
		calls := make([]*call, 0, n)
		for _, c := range o.pending[:n] {
			if c.state.CompareAndSwap(statePending, stateTaken) {
				calls = append(calls, c)
			}
		}
		rest := copy(o.pending, o.pending[n:])
		clear(o.pending[rest:])
		o.pending = o.pending[:rest]
		if len(calls) > 0 {
			return &flight{seq: o.seq.Add(1), calls: calls, deadline: time.Now().Add(o.cl.cfg.ForwardTimeout)}
		}
	}
	o.flights--
	return nil
}

// send sends batch f (encoded in req) on the stream, opening one if need
// be, until its deadline; only a batch that was not sent is tried again,
// so that nothing is decided twice. On success its reply or its deadline
// will land it; on an error it was not sent.
func (o *outbox) send(f *flight, req []byte) error {
	var last error
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		left := time.Until(f.deadline)
		if left <= 0 {
			break
		}
		st, err := o.stream(f.deadline)
		if err == nil {
			if !st.register(f, left, func() { o.expire(st, f) }) {
				o.forget(st)
				continue // it closes: the next stream
			}
			if err = st.ps.Send(req); err == nil {
				return nil
			}
			if !st.unregister(f) {
				return nil // the stream broke meanwhile and landed f
			}
			f.timer.Stop()
			o.reset(st, fmt.Errorf("%w: member %s at %s: %v", errUnreachable, o.to, o.addr, err))
		}
		switch {
		case errors.Is(err, errMoved):
			return err
		case errors.Is(err, peer.ErrRemote):
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		last = err
		t := time.NewTimer(min(wait, left))
		select {
		case <-t.C:
			continue
		case <-o.cl.stopCtx.Done():
			t.Stop()
		}
		break
	}
	// The transport's error as text only: its deadline is this batch's,
	// not the caller's, whose check is unavailable, not canceled.
	return fmt.Errorf("%w: member %s at %s: %v", errUnreachable, o.to, o.addr, last)
}

// stream returns the stream batches go on, opening one (by deadline) if
// there is none.
func (o *outbox) stream(deadline time.Time) (*fstream, error) {
	o.mu.Lock()
	closed, st := o.closed, o.st
	o.mu.Unlock()
	switch {
	case closed:
		return nil, errMoved
	case st != nil:
		return st, nil
	}
	o.openMu.Lock()
	defer o.openMu.Unlock()
	o.mu.Lock()
	st = o.st
	o.mu.Unlock()
	if st != nil {
		return st, nil
	}
	ctx, cancel := context.WithDeadline(o.cl.stopCtx, deadline)
	ps, err := o.cli.Open(ctx, "Forwards")
	cancel()
	if err != nil {
		return nil, err
	}
	o.cl.stats.forwardStreams.Add(1)
	st = &fstream{ps: ps, inflight: map[uint64]*flight{}}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		ps.Close()
		return nil, errMoved
	}
	o.st = st
	o.mu.Unlock()
	go o.read(st)
	return st, nil
}

// forget stops sending on st.
func (o *outbox) forget(st *fstream) {
	o.mu.Lock()
	if o.st == st {
		o.st = nil
	}
	o.mu.Unlock()
}

// register adds f to the batches in flight on st, with its deadline's
// timer, unless st takes no more.
func (st *fstream) register(f *flight, left time.Duration, expire func()) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dead || st.draining {
		return false
	}
	st.inflight[f.seq] = f
	f.timer = time.AfterFunc(left, expire)
	return true
}

// unregister removes f from st and reports whether it was there: whoever
// removes a flight lands it.
func (st *fstream) unregister(f *flight) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.inflight[f.seq] != f {
		return false
	}
	delete(st.inflight, f.seq)
	return true
}

// read lands the batches of st as their replies come, until st ends.
func (o *outbox) read(st *fstream) {
	for {
		msg, err := st.ps.Recv()
		if errors.Is(err, peer.ErrGoingAway) {
			o.forget(st)
			st.mu.Lock()
			st.draining = true
			idle := len(st.inflight) == 0
			st.mu.Unlock()
			if idle {
				st.ps.CloseSend()
			}
			continue
		}
		if err != nil {
			if errors.Is(err, peer.ErrRemote) {
				err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			} else {
				err = fmt.Errorf("%w: member %s at %s: %v", errUnreachable, o.to, o.addr, err)
			}
			o.reset(st, err)
			return
		}
		seq, n := binary.Uvarint(msg)
		if n <= 0 {
			o.reset(st, fmt.Errorf("%w: %w: a reply without its batch's seq", ErrUnavailable, errBadWire))
			return
		}
		st.mu.Lock()
		f := st.inflight[seq]
		delete(st.inflight, seq)
		idle := st.draining && len(st.inflight) == 0
		st.mu.Unlock()
		if idle {
			st.ps.CloseSend()
		}
		if f == nil {
			continue // landed already (its deadline passed)
		}
		f.timer.Stop()
		if err := decodeReply(msg[n:], f.calls, o.to); err != nil {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			if o.land(f, err) {
				go o.fly()
			}
			o.reset(st, err) // a stream that garbles one reply may garble the next
			return
		}
		if o.land(f, nil) {
			if o.current() == st {
				o.fly()
			} else {
				// The next batch opens a stream: not on the goroutine that
				// reads the answers of st's other batches meanwhile.
				go o.fly()
			}
		}
	}
}

// current returns the stream batches go on now.
func (o *outbox) current() *fstream {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.st
}

// expire lands f, unanswered at its deadline, and resets its stream:
// what follows f there waits behind it.
func (o *outbox) expire(st *fstream, f *flight) {
	st.mu.Lock()
	_, ok := st.inflight[f.seq]
	st.mu.Unlock()
	if ok {
		o.reset(st, fmt.Errorf("%w: member %s at %s: no answer within %v", errUnreachable, o.to, o.addr, o.cl.cfg.ForwardTimeout))
	}
}

// reset ends st: its batches in flight land with err (they may or may
// not have been decided), and the next batch opens another stream.
func (o *outbox) reset(st *fstream, err error) {
	st.mu.Lock()
	st.dead = true
	lost := make([]*flight, 0, len(st.inflight))
	for _, f := range st.inflight {
		lost = append(lost, f)
	}
	clear(st.inflight)
	st.mu.Unlock()
	o.forget(st)
	st.ps.Close()
	for _, f := range lost {
		f.timer.Stop()
		if o.land(f, err) {
			go o.fly()
		}
	}
}

// land answers the calls of f (with err, or as its reply filled them)
// and reports whether another batch should go now, counted in o.flights.
func (o *outbox) land(f *flight, err error) bool {
	o.cl.countBatch(len(f.calls))
	for _, c := range f.calls {
		if err != nil {
			c.err = err
		}
		c.answer(c.err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flights--
	return !o.closed && o.startLocked()
}

// serveForwards decides the batches of one stream from a member, in
// their order, each answered by its seq and its reply.
func (cl *cluster) serveForwards(st *peer.ServerStream) error {
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rep, err := cl.decideBatch(req)
		if err != nil {
			return err
		}
		if err := st.Send(rep); err != nil {
			return err
		}
	}
}

// decideBatch decides a forwarded batch, or finds the reply kept for it
// if it was seen before: its seq, then its reply.
func (cl *cluster) decideBatch(req []byte) ([]byte, error) {
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
		return encodeReply(binary.AppendUvarint(nil, h.seq), calls)
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
		switch {
		case c.err != nil:
			// Refused as it was decoded (invalid): answered with its error.
		case c.op == opAll:
			cl.serveUnit(h, c)
		default:
			byShard = append(byShard, c)
		}
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
		served, err := s.serveDirect(context.Background(), sh, g...) // a forwarded batch waits for its shards
		switch {
		case err != nil:
			for _, c := range g {
				c.err = err
			}
		case !served:
			// All of them queued, then their answers: one batch of the owner.
			queued := g[:0:0]
			for _, c := range g {
				if err := s.submit(sh, c); err != nil {
					c.err = err
					continue
				}
				queued = append(queued, c)
			}
			for _, c := range queued {
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
