// What a member keeps in etcd and reads from it. Under /<name>/:
//
//	config        {"vshards":N}                 created once; a member with another N is refused
//	members/<id>  {"addr":…,"leaving":…,"wire":…} under the member's lease: it exists while the member lives
//	owners/<v>    <member id>                   the owner of vshard v; its ModRevision is v's epoch
//
// An epoch is an etcd revision. A vshard changes hands only in an etcd
// transaction that compares its epoch (and the members' leases), so two
// members never both own it at one epoch. The view is the member's copy
// of these keys at a revision, read once and then followed with a watch;
// the lease is renewed every third of its TTL, and a member may serve
// only until the TTL less a margin after the last renewal it sent, by its
// own monotonic clock, so that it stops before etcd can expire it.

package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdTimeout bounds one etcd request of the member's loops.
const etcdTimeout = time.Second

func (cl *cluster) configKey() string          { return cl.prefix + "config" }
func (cl *cluster) memberKey(id string) string { return cl.prefix + "members/" + id }
func (cl *cluster) ownerKey(v int) string      { return cl.prefix + "owners/" + strconv.Itoa(v) }

// memberInfo is a member's key: its value, and the lease it is under.
type memberInfo struct {
	Addr        string `json:"addr"`
	Leaving     bool   `json:"leaving,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
	// Wire is the level of the forwarded messages the member decodes
	// (wireLevel); an earlier build writes none, level 1.
	Wire  int `json:"wire,omitempty"`
	lease int64
}

// The levels of the members' wire format: what a member of each decodes.
// A message item another member cannot decode fails its whole batch and
// stream there, so an op a level adds goes only to members of that level,
// which keeps a rolling update safe.
const (
	wireLevel1  = 1 // every op until opResetID
	wireResetID = 2 // opResetID
	wireLevel   = wireResetID
)

// wire is m's wire level.
func (m memberInfo) wire() int { return max(m.Wire, wireLevel1) }

// view is a member's copy of the cluster's keys at revision rev. It is
// immutable once published: an update publishes a changed copy.
type view struct {
	rev     int64
	members map[string]memberInfo
	owners  []string // by vshard; "" when no one ever owned it
	epochs  []int64  // by vshard: the ModRevision of its owner key
	// prevOwners and prevEpochs are each vshard's owner and epoch before
	// the current ones, as the watch delivered them ("" and 0 when not
	// known), so that a copy received in a handoff is used only by the
	// move it was made for.
	prevOwners []string
	prevEpochs []int64
	desired    placement // over the members not leaving
}

func newView(n int) *view {
	vw := &view{
		members:    map[string]memberInfo{},
		owners:     make([]string, n),
		epochs:     make([]int64, n),
		prevOwners: make([]string, n),
		prevEpochs: make([]int64, n),
	}
	vw.place()
	return vw
}

func (vw *view) clone() *view {
	c := *vw
	c.members = make(map[string]memberInfo, len(vw.members))
	for k, v := range vw.members {
		c.members[k] = v
	}
	c.owners, c.epochs = slices.Clone(vw.owners), slices.Clone(vw.epochs)
	c.prevOwners, c.prevEpochs = slices.Clone(vw.prevOwners), slices.Clone(vw.prevEpochs)
	return &c
}

// place computes where each vshard belongs among the members not leaving.
func (vw *view) place() {
	var ids []string
	for id, m := range vw.members {
		if !m.Leaving {
			ids = append(ids, id)
		}
	}
	vw.desired = place(ids, len(vw.owners))
}

// ids returns the member ids, sorted.
func (vw *view) ids() []string {
	ids := make([]string, 0, len(vw.members))
	for id := range vw.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// live reports whether member id holds its key.
func (vw *view) live(id string) bool {
	_, ok := vw.members[id]
	return ok
}

// apply applies one key of the cluster to vw (deleted: its deletion); it
// reports whether the members changed. track keeps the previous owners.
func (cl *cluster) apply(vw *view, kv *mvccpb.KeyValue, deleted, track bool) (membersChanged bool) {
	key := strings.TrimPrefix(string(kv.Key), cl.prefix)
	switch {
	case strings.HasPrefix(key, "members/"):
		id := strings.TrimPrefix(key, "members/")
		if deleted {
			delete(vw.members, id)
			return true
		}
		var m memberInfo
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			cl.log.Warn("ignoring a member key that does not decode", "key", string(kv.Key), "err", err)
			return false
		}
		m.lease = kv.Lease
		vw.members[id] = m
		return true
	case strings.HasPrefix(key, "owners/"):
		v, err := strconv.Atoi(strings.TrimPrefix(key, "owners/"))
		if err != nil || v < 0 || v >= cl.n {
			cl.log.Warn("ignoring an owner key outside the vshards", "key", string(kv.Key))
			return false
		}
		if track {
			vw.prevOwners[v], vw.prevEpochs[v] = vw.owners[v], vw.epochs[v]
		} else {
			vw.prevOwners[v], vw.prevEpochs[v] = "", 0
		}
		if deleted {
			vw.owners[v], vw.epochs[v] = "", 0
		} else {
			vw.owners[v], vw.epochs[v] = string(kv.Value), kv.ModRevision
		}
	}
	return false
}

// load reads the whole view from etcd, at one revision.
func (cl *cluster) load(ctx context.Context) (*view, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	resp, err := cl.etcd.Get(ctx, cl.prefix, clientv3.WithPrefix())
	if err != nil {
		cl.stats.etcdErrors.Add(1)
		return nil, err
	}
	vw := newView(cl.n)
	vw.rev = resp.Header.Revision
	for _, kv := range resp.Kvs {
		cl.apply(vw, kv, false, false)
	}
	vw.place()
	cl.priorOwners(ctx, vw)
	return vw, nil
}

// priorOwners fills in, in vw (read whole, so without the owners before
// the current ones), the previous owner and epoch of each vshard that vw
// says is ours while a copy received in a handoff waits for its move here:
// they decide whether that move is the one the copy was made for, which a
// watch would have told, and a whole read does not. Both reads meet it: a
// member that joins is sent vshards as soon as its key is in etcd, and
// their move can commit before its first read; a member whose watch fails
// reads again while copies wait. Each is read from etcd's history, the
// owner key as it was just before its epoch; one that cannot be read
// (compacted away, or etcd not answering) stays unknown, and reconcile
// then starts the vshard without the copy.
func (cl *cluster) priorOwners(ctx context.Context, vw *view) {
	for v, owner := range vw.owners {
		if owner != cl.id || vw.epochs[v] <= 1 || cl.vsState(v) != vsPending {
			continue
		}
		resp, err := cl.etcd.Get(ctx, cl.ownerKey(v), clientv3.WithRev(vw.epochs[v]-1))
		if err != nil {
			cl.stats.etcdErrors.Add(1)
			cl.log.Warn("the owner before a move here could not be read; its copy is not used", "vshard", v, "epoch", vw.epochs[v], "err", err)
			continue
		}
		if len(resp.Kvs) == 1 {
			vw.prevOwners[v], vw.prevEpochs[v] = string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
		}
	}
}

// vsState returns the state of vshard v here.
func (cl *cluster) vsState(v int) vstate {
	sh := cl.shardOf(v)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return cl.vs[v].state
}

// publish makes vw the member's view and wakes whoever waits for a change.
// The view is stored before the channel is swapped, so that whoever reads
// the channel and then the view either sees vw or is woken.
func (cl *cluster) publish(vw *view) {
	cl.viewMu.Lock()
	cl.view.Store(vw)
	ch := make(chan struct{})
	close(*cl.viewCh.Swap(&ch))
	cl.viewMu.Unlock()
	cl.poke()
}

// changed returns a channel closed at the next change of the view; read it
// before the view it guards.
func (cl *cluster) changed() <-chan struct{} { return *cl.viewCh.Load() }

// watchLoop follows the cluster's keys from revision rev on, and reads
// them whole again when the watch fails (a compaction, a lost stream).
func (cl *cluster) watchLoop(rev int64) {
	defer cl.loops.Done()
	for cl.stopCtx.Err() == nil {
		wch := cl.etcd.Watch(cl.stopCtx, cl.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				cl.stats.etcdErrors.Add(1)
				cl.log.Warn("etcd watch failed; reading the cluster again", "err", err, "epoch", rev)
				break
			}
			if len(resp.Events) == 0 {
				continue
			}
			vw := cl.view.Load().clone()
			members := false
			for _, ev := range resp.Events {
				if cl.apply(vw, ev.Kv, ev.Type == clientv3.EventTypeDelete, true) {
					members = true
				}
			}
			vw.rev = resp.Header.Revision
			if members {
				vw.place()
			}
			rev = vw.rev
			cl.publish(vw)
		}
		for cl.stopCtx.Err() == nil {
			vw, err := cl.load(cl.stopCtx)
			if err == nil {
				rev = vw.rev
				cl.publish(vw)
				break
			}
			cl.sleep(200 * time.Millisecond)
		}
	}
}

// sleep waits d, or until the member stops.
func (cl *cluster) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cl.stopCtx.Done():
	}
}

// leaseMargin is how long before the end of its TTL, counted from the
// renewal it sent, a member stops serving: the renewal reached etcd after
// it was sent, so etcd expires the lease later still.
func leaseMargin(ttl time.Duration) time.Duration { return max(ttl/10, 100*time.Millisecond) }

// extend moves the serving deadline to the TTL less the margin after t0
// (monotonic) and w0 (wall), when the renewal granting ttl was sent.
func (cl *cluster) extend(t0 time.Duration, w0 time.Time, ttl time.Duration) {
	d := ttl - leaseMargin(ttl)
	cl.deadline.Store(int64(t0 + d))
	cl.deadlineWall.Store(w0.Add(d).UnixNano())
	if cl.lapsed.Swap(false) {
		cl.log.Info("lease renewed: serving again", "lease", cl.lease.Load(), "deadline", w0.Add(d))
		cl.poke()
	}
}

// leaseValid reports whether the member may serve now.
func (cl *cluster) leaseValid() bool { return int64(cl.mono()) < cl.deadline.Load() }

// noteLapse logs and counts, once per lapse, a deadline that passed.
func (cl *cluster) noteLapse() {
	if cl.leaseValid() || cl.lapsed.Swap(true) {
		return
	}
	cl.stats.leaseLapses.Add(1)
	cl.log.Warn("lease not renewed in time: serving nothing until etcd renews it",
		"lease", cl.lease.Load(), "served_until", time.Unix(0, cl.deadlineWall.Load()), "policy", cl.cfg.OnError)
}

// keepAliveLoop renews the lease every third of its TTL. A lease etcd no
// longer knows is gone for good: the member stops serving, registers
// under a new lease, and serves again what etcd still says is its own.
func (cl *cluster) keepAliveLoop() {
	defer cl.loops.Done()
	failures := 0
	for {
		period := cl.ttl / 3
		t0, w0 := cl.mono(), time.Now()
		ctx, cancel := context.WithTimeout(cl.stopCtx, period)
		resp, err := cl.etcd.KeepAliveOnce(ctx, clientv3.LeaseID(cl.lease.Load()))
		cancel()
		switch {
		case cl.stopCtx.Err() != nil:
			return
		case err == nil:
			if failures > 0 {
				cl.log.Info("etcd answers again", "failures", failures)
			}
			failures = 0
			cl.extend(t0, w0, time.Duration(resp.TTL)*time.Second)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			cl.stats.etcdErrors.Add(1)
			cl.noteLapse()
			cl.relogin()
			continue
		default:
			cl.stats.etcdErrors.Add(1)
			if failures++; failures == 1 || failures%10 == 0 {
				cl.log.Warn("etcd did not renew the lease", "err", err, "failures", failures,
					"serving_until", time.Unix(0, cl.deadlineWall.Load()))
			}
		}
		cl.noteLapse()
		if wait := t0 + period - cl.mono(); wait > 0 {
			cl.sleep(wait)
		}
	}
}

// relogin handles a lease etcd expired: every vshard served here stops
// (its buckets kept, stale) and the member registers under a new lease.
// It reads no view of its own: only the watch publishes views, in order,
// since a copy read here and published after the watch had moved past it
// would undo the moves in between for good. The control loop serves again
// once the view shows the new lease (see reconcile).
func (cl *cluster) relogin() {
	old := cl.lease.Load()
	cl.log.Warn("lease expired at etcd: registering again", "lease", old)
	cl.stopServing("lease expired")
	for cl.stopCtx.Err() == nil {
		ctx, cancel := context.WithTimeout(cl.stopCtx, 2*etcdTimeout)
		err := cl.register(ctx, 0)
		cancel()
		if err == nil {
			if cl.cfg.registered != nil {
				cl.cfg.registered()
			}
			cl.log.Info("registered again", "lease", cl.lease.Load(), "old_lease", old)
			cl.poke()
			return
		}
		cl.log.Warn("cannot register again yet", "err", err)
		cl.sleep(200 * time.Millisecond)
	}
}

// register puts the member's key under its lease: the old lease of a
// restart if etcd still keeps it, else a new one. A key held under
// another lease is another process with this id, or this member's
// previous life without a data directory: it waits for that lease to
// expire, at most its TTL and a little more.
func (cl *cluster) register(ctx context.Context, oldLease int64) error {
	lease := int64(0)
	if oldLease != 0 {
		t0, w0 := cl.mono(), time.Now()
		kctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		resp, err := cl.etcd.KeepAliveOnce(kctx, clientv3.LeaseID(oldLease))
		cancel()
		if err == nil {
			lease = oldLease
			cl.ttl = time.Duration(resp.TTL) * time.Second
			cl.extend(t0, w0, cl.ttl)
			cl.log.Info("kept the lease of the previous run", "lease", lease)
		}
	}
	if lease == 0 {
		t0, w0 := cl.mono(), time.Now()
		resp, err := cl.etcd.Grant(ctx, int64(cl.cfg.Lease/time.Second))
		if err != nil {
			cl.stats.etcdErrors.Add(1)
			return fmt.Errorf("actors: cluster: grant a lease: %w", err)
		}
		lease = int64(resp.ID)
		cl.ttl = time.Duration(resp.TTL) * time.Second
		cl.extend(t0, w0, cl.ttl)
	}
	cl.lease.Store(lease)
	if err := cl.saveIdentity(); err != nil {
		return err
	}
	key := cl.memberKey(cl.id)
	val := cl.memberValue()
	giveUp := time.Now().Add(cl.ttl + 2*time.Second)
	for logged := false; ; {
		resp, err := cl.etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(lease)))).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			cl.stats.etcdErrors.Add(1)
			return fmt.Errorf("actors: cluster: register: %w", err)
		}
		if resp.Succeeded {
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) > 0 && kvs[0].Lease == lease {
			return cl.putMember(ctx)
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("%w: member id %s is held in etcd by another live member (key %s); give each member its own id or data directory", ErrConfig, cl.id, key)
		}
		if !logged {
			cl.log.Warn("member id held under another lease; waiting for it to expire", "member", cl.id)
			logged = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("actors: cluster: register: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// memberValue is the value of the member's key.
func (cl *cluster) memberValue() string {
	b, _ := json.Marshal(memberInfo{Addr: cl.addr, Leaving: cl.leaving.Load(), Incarnation: strconv.FormatUint(cl.incarnation, 16), Wire: wireLevel})
	return string(b)
}

// putMember writes the member's key again (to say it is leaving).
func (cl *cluster) putMember(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	_, err := cl.etcd.Put(ctx, cl.memberKey(cl.id), cl.memberValue(), clientv3.WithLease(clientv3.LeaseID(cl.lease.Load())))
	if err != nil {
		cl.stats.etcdErrors.Add(1)
	}
	return err
}

// vshardsConfig is the value of the config key.
type vshardsConfig struct {
	VShards int `json:"vshards"`
}

// checkVShards writes the cluster's number of vshards if it is new, and
// refuses a member started with another one.
func (cl *cluster) checkVShards(ctx context.Context) error {
	key := cl.configKey()
	b, _ := json.Marshal(vshardsConfig{VShards: cl.n})
	resp, err := cl.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		cl.stats.etcdErrors.Add(1)
		return fmt.Errorf("actors: cluster: etcd %v: %w", cl.cfg.Etcd, err)
	}
	if resp.Succeeded {
		return nil
	}
	var c vshardsConfig
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || json.Unmarshal(kvs[0].Value, &c) != nil {
		return fmt.Errorf("%w: etcd key %s does not hold a cluster configuration", ErrConfig, key)
	}
	if c.VShards != cl.n {
		return fmt.Errorf("%w: cluster %q has %d vshards (kept in etcd at %s); this member was started with %d: start it with %d, which is fixed for the cluster's life", ErrConfig, cl.cfg.Name, c.VShards, key, cl.n, c.VShards)
	}
	return nil
}
