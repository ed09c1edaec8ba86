// Handoff: a vshard moves from its owner A to B with its buckets.
//
//  1. A fences the vshards (vsMoving: their checks are answered errMoved,
//     uncounted, and routed again once the move is done) and freezes each
//     shard's table (copy-on-write), holding the shard only for that.
//  2. A reads the buckets of those vshards off the frozen copies, each
//     vshard's in records of its own (table.Frozen.Partition), while its
//     shards go on serving their other vshards.
//  3. A sends them to B (Prepare, in parts of at most prepareBytes); B
//     restores them into its tables and journals them, the vshards
//     vsReceiving and, after the last part, vsPending.
//  4. A commits the move in one etcd transaction: each vshard's epoch
//     unchanged, A's and B's leases the ones A knows. So two members never
//     both own a vshard at one epoch.
//  5. A tells B (Commit), and B serves the vshards at the new epoch (B's
//     watch would tell it too); A deletes their buckets. If the move did
//     not commit, A tells B (Abort) and serves them again.
//
// A fenced vshard is paused for the time of steps 1 to 5: the time to
// ship its buckets, milliseconds for thousands of buckets on a LAN; the
// vshards not moving are never paused.

package actors

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ratelimitd/ratelimitd/table"
)

// handoffBatch is the most vshards one handoff moves.
const handoffBatch = 32

// prepareBytes bounds the records of one Prepare message.
const prepareBytes = 1 << 20

// handoff moves vs (active here) to member to. It runs on the control
// loop, and returns when the move committed or was undone.
func (cl *cluster) handoff(to string, vs []int) {
	vw := cl.view.Load()
	target, ok := vw.members[to]
	if !ok || target.Leaving {
		return
	}
	link := cl.link(to, target.Addr)
	if link == nil {
		return
	}
	start, t0 := time.Now(), cl.mono()
	xfer := newXfer()

	// 1. Fence and freeze.
	type frozen struct {
		sh *shard
		t  *table.Table
		f  *table.Frozen
	}
	var parts []frozen
	moving := make([]bool, cl.n)
	var list []int32
	var epochs []int64
	byShard := map[*shard][]int{}
	for _, v := range vs {
		byShard[cl.shardOf(v)] = append(byShard[cl.shardOf(v)], v)
	}
	for sh, group := range byShard {
		sh.mu.Lock()
		n := 0
		for _, v := range group {
			if st := &cl.vs[v]; st.state == vsActive && vw.owners[v] == cl.id && st.epoch == vw.epochs[v] {
				st.state = vsMoving
				moving[v] = true
				list = append(list, int32(v))
				epochs = append(epochs, st.epoch)
				n++
			}
		}
		if n > 0 {
			parts = append(parts, frozen{sh: sh, t: sh.table, f: sh.table.Freeze(cl.s.cfg.Clock.Now())})
		}
		sh.mu.Unlock()
	}
	if len(list) == 0 {
		return
	}
	fencedAt := time.Now()
	cl.hoMu.Lock()
	cl.handoffs[xfer] = &HandoffStatus{ID: xfer, From: cl.id, To: to, VShards: len(list), Since: start}
	cl.hoMu.Unlock()
	defer func() {
		cl.hoMu.Lock()
		delete(cl.handoffs, xfer)
		cl.hoMu.Unlock()
	}()

	// 2. The buckets of the moving vshards, each vshard's records apart.
	var recs []vrecord
	buckets := 0
	var err error
	for _, p := range parts {
		err = p.f.Partition(func(id string) int {
			if v := shardOf(id, cl.n); moving[v] {
				buckets++
				return v
			}
			return -1
		}, func(v int, rec []byte) error {
			recs = append(recs, vrecord{vshard: int32(v), rec: slices.Clone(rec)})
			return nil
		})
		p.sh.mu.Lock()
		if p.sh.table == p.t {
			p.t.Thaw(p.f)
		}
		p.sh.mu.Unlock()
	}

	// 3. Ship them.
	if err == nil {
		err = cl.prepare(link, xfer, list, epochs, recs)
	}
	// 4. Commit the move in etcd.
	var rev int64
	committed := false
	if err == nil {
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.LeaseValue(cl.memberKey(cl.id)), "=", cl.lease.Load()),
			clientv3.Compare(clientv3.LeaseValue(cl.memberKey(to)), "=", target.lease),
		}
		ops := make([]clientv3.Op, 0, len(list))
		for i, v := range list {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(cl.ownerKey(int(v))), "=", epochs[i]))
			ops = append(ops, clientv3.OpPut(cl.ownerKey(int(v)), to))
		}
		rev, committed, err = cl.moveTxn(cmps, ops, list, to)
	}
	if !committed {
		cl.stats.handoffFailures.Add(1)
		cl.log.Warn("handoff did not commit; serving the vshards here again", "to", to, "vshards", len(list), "err", err)
		_, _ = link.cli.Call(context.WithoutCancel(cl.stopCtx), "Abort", encodeMove(&moveMsg{xfer: xfer, vshards: list}))
		cl.unfence(list, epochs)
		return
	}
	// 5. Tell the new owner, and forget the buckets here.
	cctx, cancel := context.WithTimeout(cl.stopCtx, cl.cfg.ForwardTimeout)
	if _, err := link.cli.Call(cctx, "Commit", encodeMove(&moveMsg{xfer: xfer, epoch: rev, vshards: list})); err != nil {
		cl.log.Warn("new owner not told of the move; it learns it from etcd", "to", to, "err", err)
	}
	cancel()
	elapsed := cl.mono() - t0
	ints := make([]int, len(list))
	for i, v := range list {
		ints[i] = int(v)
	}
	cl.raise(rev)
	cl.release(ints, "handoff", to, fencedAt, rev)
	cl.stats.handoffsOut.Add(1)
	cl.stats.vshardsOut.Add(int64(len(list)))
	cl.stats.bucketsOut.Add(int64(buckets))
	cl.stats.handoffNanos.Add(int64(elapsed))
	cl.log.Info("handoff committed", "to", to, "vshards", len(list), "buckets", buckets, "epoch", rev,
		"pause", elapsed.Round(time.Microsecond))
}

// newXfer returns a random handoff id.
func newXfer() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// prepare sends the records to the new owner in parts, the last one
// marked.
func (cl *cluster) prepare(link *outbox, xfer uint64, list []int32, epochs []int64, recs []vrecord) error {
	m := prepareMsg{xfer: xfer, from: cl.id, vshards: list, epochs: epochs}
	for {
		size := 0
		n := 0
		for n < len(recs) && (n == 0 || size+len(recs[n].rec) <= prepareBytes) {
			size += len(recs[n].rec)
			n++
		}
		m.recs, recs = recs[:n], recs[n:]
		m.last = len(recs) == 0
		ctx, cancel := context.WithTimeout(cl.stopCtx, 2*cl.cfg.ForwardTimeout)
		_, err := link.cli.Call(ctx, "Prepare", encodePrepare(&m))
		cancel()
		if err != nil {
			return fmt.Errorf("prepare on %s: %w", link.to, err)
		}
		if m.last {
			return nil
		}
	}
}

// moveTxn runs the move's transaction. If etcd does not answer, the move
// may or may not have committed: the owner keys say which, once etcd
// answers again (the vshards stay fenced meanwhile).
func (cl *cluster) moveTxn(cmps []clientv3.Cmp, ops []clientv3.Op, list []int32, to string) (int64, bool, error) {
	ctx, cancel := context.WithTimeout(cl.stopCtx, etcdTimeout)
	resp, err := cl.etcd.Txn(ctx).If(cmps...).Then(ops...).Commit()
	cancel()
	if err == nil {
		if !resp.Succeeded {
			return 0, false, fmt.Errorf("the move's comparisons failed (an epoch or a lease changed)")
		}
		return resp.Header.Revision, true, nil
	}
	cl.stats.etcdErrors.Add(1)
	for cl.stopCtx.Err() == nil {
		ctx, cancel := context.WithTimeout(cl.stopCtx, etcdTimeout)
		got, gerr := cl.etcd.Get(ctx, cl.ownerKey(int(list[0])))
		cancel()
		if gerr == nil {
			if len(got.Kvs) == 1 && string(got.Kvs[0].Value) == to {
				return got.Kvs[0].ModRevision, true, nil // one transaction moved them all
			}
			return 0, false, err
		}
		cl.stats.etcdErrors.Add(1)
		cl.sleep(100 * time.Millisecond)
	}
	return 0, false, err
}

// unfence serves again the vshards of a handoff that did not commit, if
// they are still fenced for it.
func (cl *cluster) unfence(list []int32, epochs []int64) {
	for i, v := range list {
		sh := cl.shardOf(int(v))
		sh.mu.Lock()
		if st := &cl.vs[v]; st.state == vsMoving && st.epoch == epochs[i] {
			st.state = vsActive
		}
		sh.mu.Unlock()
	}
}

// handlePrepare receives a part of a handoff: it restores the records
// into the tables (journaled) of vshards that hold nothing here.
func (cl *cluster) handlePrepare(_ context.Context, req []byte) ([]byte, error) {
	m, err := decodePrepare(req, cl.n)
	if err != nil {
		return nil, err
	}
	if !cl.leaseValid() || cl.leaving.Load() {
		return nil, fmt.Errorf("member %s takes no vshards now (lease lapsed or leaving)", cl.id)
	}
	// Every vshard of the move must be free here, or already receiving it.
	for i, v := range m.vshards {
		sh := cl.shardOf(int(v))
		sh.mu.Lock()
		st := &cl.vs[v]
		switch {
		case st.state == vsNone:
			*st = vshard{state: vsReceiving, from: m.from, epoch: m.epochs[i], xfer: m.xfer}
		case (st.state == vsReceiving || st.state == vsPending) && st.xfer == m.xfer:
		default:
			err = fmt.Errorf("vshard %d is %s on member %s", v, st.state, cl.id)
		}
		sh.mu.Unlock()
		if err != nil {
			cl.abortIn(m.xfer, m.vshards)
			return nil, err
		}
	}
	if len(m.recs) > 0 {
		byShard := map[*shard][]vrecord{}
		for _, r := range m.recs {
			byShard[cl.shardOf(int(r.vshard))] = append(byShard[cl.shardOf(int(r.vshard))], r)
		}
		for sh, rs := range byShard {
			if err = cl.restore(sh, m.xfer, rs); err != nil {
				cl.abortIn(m.xfer, m.vshards)
				return nil, err
			}
		}
	}
	if m.last {
		at := cl.mono()
		for _, v := range m.vshards {
			sh := cl.shardOf(int(v))
			sh.mu.Lock()
			if st := &cl.vs[v]; st.state == vsReceiving && st.xfer == m.xfer {
				st.state, st.at = vsPending, at
			}
			sh.mu.Unlock()
		}
		cl.hoMu.Lock()
		cl.handoffs[m.xfer] = &HandoffStatus{ID: m.xfer, From: m.from, To: cl.id, VShards: len(m.vshards), Since: time.Now()}
		cl.hoMu.Unlock()
	}
	return nil, nil
}

// restore applies records of one shard's vshards, receiving in xfer, and
// journals them as they are (the journal's records are the table's).
func (cl *cluster) restore(sh *shard, xfer uint64, rs []vrecord) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.broken != nil {
		return fmt.Errorf("shard %d serves without its journal", sh.index)
	}
	now := cl.s.cfg.Clock.Now()
	for _, r := range rs {
		if st := &cl.vs[r.vshard]; st.state != vsReceiving || st.xfer != xfer {
			continue
		}
		if err := sh.table.Restore(r.rec, now); err != nil {
			return err
		}
		if sh.j != nil {
			if err := sh.j.Append(r.rec); err != nil {
				return fmt.Errorf("journal the handoff: %w", err)
			}
		}
	}
	if err := sh.finish(&cl.s.cfg, 0); err != nil {
		return err
	}
	return nil
}

// abortIn drops what a handoff to here brought.
func (cl *cluster) abortIn(xfer uint64, vs []int32) {
	var drop []int
	for _, v := range vs {
		sh := cl.shardOf(int(v))
		sh.mu.Lock()
		if st := &cl.vs[v]; (st.state == vsReceiving || st.state == vsPending) && st.xfer == xfer {
			drop = append(drop, int(v))
		}
		sh.mu.Unlock()
	}
	cl.release(drop, "aborted", "", time.Now(), 0)
	cl.hoMu.Lock()
	delete(cl.handoffs, xfer)
	cl.hoMu.Unlock()
}

// handleCommit starts serving the vshards of a committed handoff.
func (cl *cluster) handleCommit(_ context.Context, req []byte) ([]byte, error) {
	m, err := decodeMove(req, cl.n)
	if err != nil {
		return nil, err
	}
	var acts []activation
	for _, v := range m.vshards {
		sh := cl.shardOf(int(v))
		sh.mu.Lock()
		if st := &cl.vs[v]; st.state == vsPending && st.xfer == m.xfer {
			acts = append(acts, activation{v: int(v), epoch: m.epoch, keep: true, reason: "handoff", from: st.from})
		}
		sh.mu.Unlock()
	}
	if len(acts) > 0 {
		cl.raise(m.epoch)
	}
	cl.activate(acts)
	cl.hoMu.Lock()
	delete(cl.handoffs, m.xfer)
	cl.hoMu.Unlock()
	return nil, nil
}

// handleAbort drops what an undone handoff brought.
func (cl *cluster) handleAbort(_ context.Context, req []byte) ([]byte, error) {
	m, err := decodeMove(req, cl.n)
	if err != nil {
		return nil, err
	}
	cl.abortIn(m.xfer, m.vshards)
	return nil, nil
}
