// Ownership here: the fence, and the control loop that makes the local
// state of every vshard follow etcd. The fence runs where checks are
// decided, holding the shard's lock (serve, CheckAll): a check is decided
// only if its vshard is active here at an epoch at least the caller's and
// the lease holds by this member's monotonic clock; otherwise it is
// answered, uncounted, so that its caller routes it again. The control
// loop, one goroutine, starts serving the vshards etcd gives this member,
// claims the vshards no one ever owned and takes over those of members
// whose lease expired (when placement puts them here), hands off the ones
// placement puts elsewhere (cluster_handoff.go), and deletes the buckets
// of vshards it no longer serves.

package actors

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// pendingTTL is how long a copy received in a handoff waits for its
// commit before it is dropped.
const pendingTTL = 30 * time.Second

// txnBatch is the most vshards one etcd transaction moves (etcd allows
// 128 operations of each kind in a transaction by default).
const txnBatch = 48

// dropSlice is how many slots a deletion of buckets looks at while it
// holds a shard.
const dropSlice = 4096

// fence answers, holding sh.mu, the calls of batch that this member may
// not decide now (not counted: errMoved or errLeaseLapsed, which their
// callers route again), and returns the others, in place.
func (cl *cluster) fence(batch []*call) []*call {
	ok := cl.leaseValid()
	kept := batch[:0]
	for _, k := range batch {
		if err := cl.admit(k.vshard, k.epoch, ok); err != nil && k.state.CompareAndSwap(statePending, stateTaken) {
			cl.stats.fenced.Add(1)
			k.answer(err)
			continue
		}
		kept = append(kept, k)
	}
	clear(batch[len(kept):])
	return kept
}

// admit reports why a call for vshard v routed at epoch may not be
// decided here now, or nil; the caller holds v's shard.
func (cl *cluster) admit(v int32, epoch int64, leaseOK bool) error {
	if !leaseOK {
		return errLeaseLapsed
	}
	if s := &cl.vs[v]; s.state != vsActive || epoch > s.epoch {
		return errMoved
	}
	return nil
}

// lapsedErr is the error of a batch decided while the lease lapsed: its
// hits were counted here, but the member may no longer be the owner.
func (cl *cluster) lapsedErr() error {
	if cl.leaseValid() {
		return nil
	}
	return ErrClusterUnavailable
}

// activation starts serving vshard v here at epoch; keep says whether the
// buckets held for it (from the journal or a handoff) are its state.
type activation struct {
	v      int
	epoch  int64
	keep   bool
	reason string
	from   string
}

// activate starts serving the vshards of acts, deleting first the buckets
// of those not kept.
func (cl *cluster) activate(acts []activation) {
	if len(acts) == 0 {
		return
	}
	drop := make([]bool, cl.n)
	dropping := false
	for _, a := range acts {
		sh := cl.shardOf(a.v)
		sh.mu.Lock()
		if st := &cl.vs[a.v]; !a.keep && st.state != vsNone && st.state != vsActive {
			st.state = vsDropping
			drop[a.v], dropping = true, true
		}
		sh.mu.Unlock()
	}
	if dropping {
		cl.dropBuckets(drop)
	}
	now := time.Now()
	for _, a := range acts {
		sh := cl.shardOf(a.v)
		sh.mu.Lock()
		st := &cl.vs[a.v]
		if st.state != vsActive {
			*st = vshard{state: vsActive, epoch: a.epoch, since: now, gone: st.gone}
			cl.stats.ownershipChanges.Add(1)
			if a.reason == "handoff" && a.keep {
				cl.stats.vshardsIn.Add(1)
			}
			cl.log.Info("vshard serving", "vshard", a.v, "epoch", a.epoch, "reason", a.reason, "from", a.from, "kept", a.keep, "member", cl.id)
		}
		sh.mu.Unlock()
	}
}

// release stops serving vs here (logging each with its epoch and the last
// moment it may have been served, until) and deletes their buckets; gone
// is the epoch they left at (0: unchanged).
func (cl *cluster) release(vs []int, reason, to string, until time.Time, gone int64) {
	if len(vs) == 0 {
		return
	}
	drop := make([]bool, cl.n)
	for _, v := range vs {
		sh := cl.shardOf(v)
		sh.mu.Lock()
		st := &cl.vs[v]
		if st.state == vsActive || st.state == vsMoving {
			cl.stats.ownershipChanges.Add(1)
			cl.log.Info("vshard stopped", "vshard", v, "epoch", st.epoch, "reason", reason, "to", to,
				"served_until", until.Format(time.RFC3339Nano), "member", cl.id)
		}
		st.state = vsDropping
		st.gone = max(st.gone, gone)
		drop[v] = true
		sh.mu.Unlock()
	}
	cl.dropBuckets(drop)
}

// servedUntil is the last moment this member may have decided a check:
// now, or the lease deadline if that passed.
func (cl *cluster) servedUntil() time.Time {
	now := time.Now()
	if d := time.Unix(0, cl.deadlineWall.Load()); !cl.leaseValid() && d.Before(now) {
		return d
	}
	return now
}

// stopServing stops every vshard served or moving here, keeping its
// buckets (stale) for a fresh view to decide on; for a lease etcd expired
// and for the end of a leave.
func (cl *cluster) stopServing(reason string) {
	until := cl.servedUntil()
	for v := range cl.vs {
		sh := cl.shardOf(v)
		sh.mu.Lock()
		if st := &cl.vs[v]; st.state == vsActive || st.state == vsMoving {
			cl.stats.ownershipChanges.Add(1)
			cl.log.Info("vshard stopped", "vshard", v, "epoch", st.epoch, "reason", reason,
				"served_until", until.Format(time.RFC3339Nano), "member", cl.id)
			*st = vshard{state: vsStale, gone: st.gone}
		}
		sh.mu.Unlock()
	}
}

// dropBuckets deletes the buckets of the vshards set in drop, a slice of
// slots at a time per shard, journaled, and leaves them vsNone.
func (cl *cluster) dropBuckets(drop []bool) {
	match := func(id string) bool { return drop[shardOf(id, cl.n)] }
	for i, sh := range cl.s.shards {
		any := false
		for v := i; v < cl.n; v += len(cl.s.shards) {
			any = any || drop[v]
		}
		if !any {
			continue
		}
		for from := 0; ; {
			sh.mu.Lock()
			t := sh.table
			_, next := t.DeleteMatching(match, from, dropSlice)
			_ = sh.finish(&cl.s.cfg, 0)
			if sh.table != t {
				next = 0 // rebuilt from the journal meanwhile: look again from the start
			}
			sh.mu.Unlock()
			if next == 0 {
				break
			}
			from = next
		}
		sh.mu.Lock()
		for v := i; v < cl.n; v += len(cl.s.shards) {
			if drop[v] && cl.vs[v].state == vsDropping {
				cl.vs[v] = vshard{gone: cl.vs[v].gone}
			}
		}
		sh.mu.Unlock()
	}
}

// controlLoop reconciles the local state with the view whenever the view
// changes, something asks (poke), or a tick comes; it signals ready after
// the first reconcile that could run.
func (cl *cluster) controlLoop() {
	defer cl.loops.Done()
	tick := time.NewTicker(max(cl.ttl/6, 100*time.Millisecond))
	defer tick.Stop()
	first := true
	for {
		ch := cl.changed()
		if cl.reconcile() && first {
			close(cl.ready)
			first = false
		}
		select {
		case <-cl.stopCtx.Done():
			return
		case <-ch:
		case <-cl.kick:
		case <-tick.C:
		}
	}
}

// reconcile makes the local state follow the view, once; it reports
// false if it could not run: no lease, a view older than this member's
// own last ownership transaction, or one that does not show this member
// under its current lease (one from before a relogin predates the
// takeovers its lease's expiry allowed).
func (cl *cluster) reconcile() bool {
	vw := cl.view.Load()
	me := cl.id
	if m, ok := vw.members[me]; !cl.leaseValid() || !ok || m.lease != cl.lease.Load() || vw.rev < cl.minRev.Load() {
		return false
	}
	cl.pruneLinks(vw)
	cl.warmLinks(vw)
	var acts []activation
	var lost, dropped []int
	var claims, takeovers []int
	moves := map[string][]int{}
	now := cl.mono()
	for v := range cl.n {
		owner, ep := vw.owners[v], vw.epochs[v]
		sh := cl.shardOf(v)
		sh.mu.Lock()
		st := &cl.vs[v]
		switch st.state {
		case vsNone:
			if owner == me && ep > st.gone {
				acts = append(acts, activation{v: v, epoch: ep, reason: "owner"})
			}
		case vsStale:
			switch owner {
			case me:
				acts = append(acts, activation{v: v, epoch: ep, keep: true, reason: "resume"})
			case "": // kept until someone claims it
			default:
				dropped = append(dropped, v)
			}
		case vsActive:
			to := vw.desired.of(v)
			switch {
			case owner != me && ep > st.epoch:
				lost = append(lost, v)
			case owner == me && ep == st.epoch && to != "" && to != me && vw.live(to):
				moves[to] = append(moves[to], v)
			}
		case vsReceiving:
			switch {
			case ep < st.epoch: // the view is older than the sender's
			case owner == me:
				acts = append(acts, activation{v: v, epoch: ep, reason: "owner"})
			case owner != st.from || ep != st.epoch:
				dropped = append(dropped, v)
			}
		case vsPending:
			switch {
			case ep < st.epoch:
			case owner == me:
				keep := vw.prevOwners[v] == st.from && vw.prevEpochs[v] == st.epoch
				acts = append(acts, activation{v: v, epoch: ep, keep: keep, reason: "handoff", from: st.from})
			case owner != st.from || ep != st.epoch || now-st.at > pendingTTL:
				dropped = append(dropped, v)
			}
		}
		sh.mu.Unlock()
		switch {
		case owner == "" && vw.desired.of(v) == me:
			claims = append(claims, v)
		case owner != "" && owner != me && !vw.live(owner) && vw.desired.of(v) == me:
			takeovers = append(takeovers, v)
		}
	}
	cl.release(lost, "lost", "", cl.servedUntil(), 0)
	cl.release(dropped, "dropped", "", time.Now(), 0)
	cl.activate(acts)
	cl.claim(vw, claims)
	cl.takeOver(vw, takeovers)
	// One handoff a round, the largest first: the loop comes back at once.
	best := ""
	for to, vs := range moves {
		if best == "" || len(vs) > len(moves[best]) || len(vs) == len(moves[best]) && to < best {
			best = to
		}
	}
	if best != "" {
		vs := moves[best]
		cl.handoff(best, vs[:min(len(vs), handoffBatch)])
		cl.poke()
	}
	return true
}

// claim makes this member the owner of vs, which no one ever owned.
func (cl *cluster) claim(vw *view, vs []int) {
	for len(vs) > 0 {
		n := min(len(vs), txnBatch)
		batch := vs[:n]
		vs = vs[n:]
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(cl.memberKey(cl.id)), "=", cl.lease.Load())}
		ops := make([]clientv3.Op, 0, n)
		for _, v := range batch {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(cl.ownerKey(v)), "=", 0))
			ops = append(ops, clientv3.OpPut(cl.ownerKey(v), cl.id))
		}
		rev, ok := cl.txn(cmps, ops)
		if !ok {
			return // someone else claimed some: the view will say who
		}
		cl.stats.claims.Add(int64(n))
		acts := make([]activation, n)
		for i, v := range batch {
			acts[i] = activation{v: v, epoch: rev, keep: true, reason: "claim"}
		}
		cl.activate(acts)
	}
}

// takeOver makes this member the owner of vs, whose owners' leases
// expired: the buckets start from nothing, unless a complete copy arrived
// here in a handoff from that owner at that epoch.
func (cl *cluster) takeOver(vw *view, vs []int) {
	for len(vs) > 0 {
		n := min(len(vs), txnBatch)
		batch := vs[:n]
		vs = vs[n:]
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(cl.memberKey(cl.id)), "=", cl.lease.Load())}
		dead := map[string]bool{}
		ops := make([]clientv3.Op, 0, n)
		for _, v := range batch {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(cl.ownerKey(v)), "=", vw.epochs[v]))
			ops = append(ops, clientv3.OpPut(cl.ownerKey(v), cl.id))
			if o := vw.owners[v]; !dead[o] {
				dead[o] = true
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(cl.memberKey(o)), "=", 0))
			}
		}
		rev, ok := cl.txn(cmps, ops)
		if !ok {
			return
		}
		cl.stats.takeovers.Add(int64(n))
		acts := make([]activation, n)
		kept := 0
		for i, v := range batch {
			sh := cl.shardOf(v)
			sh.mu.Lock()
			st := &cl.vs[v]
			keep := st.state == vsPending && st.from == vw.owners[v] && st.epoch == vw.epochs[v]
			sh.mu.Unlock()
			if keep {
				kept++
			}
			acts[i] = activation{v: v, epoch: rev, keep: keep, reason: "takeover", from: vw.owners[v]}
		}
		cl.log.Warn("took over the vshards of members whose lease expired", "vshards", n, "with_their_buckets", kept, "epoch", rev)
		cl.activate(acts)
	}
}

// txn runs one ownership transaction; it returns the revision it
// committed at, or false if a comparison failed or etcd did not answer.
func (cl *cluster) txn(cmps []clientv3.Cmp, ops []clientv3.Op) (int64, bool) {
	ctx, cancel := context.WithTimeout(cl.stopCtx, etcdTimeout)
	defer cancel()
	resp, err := cl.etcd.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		cl.stats.etcdErrors.Add(1)
		cl.log.Warn("etcd transaction failed", "err", err)
		return 0, false
	}
	if resp.Succeeded {
		cl.raise(resp.Header.Revision)
	}
	return resp.Header.Revision, resp.Succeeded
}

// raise notes a revision of our own doing: views before it are out of date.
func (cl *cluster) raise(rev int64) {
	for {
		cur := cl.minRev.Load()
		if rev <= cur || cl.minRev.CompareAndSwap(cur, rev) {
			return
		}
	}
}
