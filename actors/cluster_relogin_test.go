package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ratelimitd/ratelimitd/table"
)

// settledPair reports whether a and b serve every vshard between them,
// each where placement puts it, with no handoff in flight.
func settledPair(a, b *member) bool {
	served := 0
	for _, m := range []*member{a, b} {
		st, _ := m.ClusterStatus()
		served += st.Serving
		if len(st.Members) != 2 || len(st.Handoffs) > 0 {
			return false
		}
		for _, mem := range st.Members {
			if mem.VShards != mem.Placed {
				return false
			}
		}
	}
	return served == a.cl.n
}

// etcdOwners returns the owner of every vshard as etcd has it now, and the
// revision it was read at.
func etcdOwners(t *testing.T, m *member) ([]string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := m.cl.etcd.Get(ctx, m.cl.prefix+"owners/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("read the owners from etcd: %v", err)
	}
	owners := make([]string, m.cl.n)
	for _, kv := range resp.Kvs {
		v, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), m.cl.prefix+"owners/"))
		if err != nil {
			t.Fatalf("owner key %s: %v", kv.Key, err)
		}
		owners[v] = string(kv.Value)
	}
	return owners, resp.Header.Revision
}

// TestClusterReloginFollowsTheMovesMadeMeanwhile: etcd expires a member's
// lease (a pause past it); the other member takes its vshards over and,
// once it has registered again, hands them back. Those moves commit while
// the member is still registering; its view must show them afterwards, so
// that it routes their checks to itself, not to the member that handed
// them back (which answers "moved" for ever). And a member whose view is
// stale that way costs only liveness: the stale owner never counts.
func TestClusterReloginFollowsTheMovesMadeMeanwhile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for a lease to be renewed and vshards to move twice: skipped with -short")
	}
	tc := newTestCluster(t)
	a := tc.start(tc.config("a"))

	// b's monotonic clock can jump, as it does for a paused process.
	start := time.Now()
	var skew atomic.Int64
	cfgB := tc.config("b")
	cfgB.Cluster.mono = func() time.Duration { return time.Since(start) + time.Duration(skew.Load()) }
	var bm atomic.Pointer[member]
	handedBack := make(chan error, 1)
	var once sync.Once
	// Registered again, b waits until a has handed its vshards back: those
	// moves commit after b registered, while b finishes its relogin.
	cfgB.Cluster.registered = func() {
		once.Do(func() {
			b := bm.Load()
			for deadline := time.Now().Add(20 * time.Second); !settledPair(a, b); {
				if time.Now().After(deadline) {
					handedBack <- errors.New("a did not hand b's vshards back within 20s of b registering again")
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			handedBack <- nil
		})
	}
	b := tc.start(cfgB)
	bm.Store(b)
	tc.settle(a, b)
	onB := table.Request{ID: ownedBy(t, b, "k-"), Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 1}

	// A pause past the lease: b's clock passes its deadline (it serves
	// nothing), and etcd expires its lease.
	skew.Store(int64(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.cl.etcd.Revoke(ctx, clientv3.LeaseID(b.cl.lease.Load())); err != nil {
		t.Fatalf("revoke b's lease: %v", err)
	}
	select {
	case err := <-handedBack:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("b did not register again within 30s of its lease's expiry")
	}

	// One more change in etcd, which b's watch delivers: b's view is then
	// at least as new as everything before it.
	put, err := b.cl.etcd.Put(ctx, b.cl.prefix+"test/after-relogin", "1")
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); b.cl.view.Load().rev < put.Header.Revision; {
		if time.Now().After(deadline) {
			t.Fatalf("b's view is at revision %d, 10s after etcd's %d", b.cl.view.Load().rev, put.Header.Revision)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want, rev := etcdOwners(t, b)
	if rev != put.Header.Revision {
		t.Fatalf("etcd moved on to revision %d after %d; the cluster should be still", rev, put.Header.Revision)
	}
	for name, m := range map[string]*member{"a": a, "b": b} {
		vw := m.cl.view.Load()
		var wrong []string
		for v, o := range want {
			if vw.owners[v] != o {
				wrong = append(wrong, fmt.Sprintf("%d: %q, etcd %q", v, vw.owners[v], o))
			}
		}
		if len(wrong) > 0 {
			t.Fatalf("%s's view at revision %d has the wrong owner for %d of %d vshards: %v", name, vw.rev, len(wrong), len(want), wrong)
		}
	}
	if sb, _ := b.ClusterStatus(); sb.Stats.LeaseLapses != 1 || sb.Stats.VShardsIn == 0 {
		t.Fatalf("b after its relogin: %+v, want 1 lease lapse and vshards handed in", sb.Stats)
	}
	if !servedHere(b, onB.ID) {
		t.Fatalf("b does not serve the vshard of %s again", onB.ID)
	}
	d, err := b.Check(context.Background(), onB)
	if err != nil || !d.Allowed {
		t.Fatalf("a check on b for its own vshard: %+v, %v; want allowed", d, err)
	}
	count := d.Count

	// A stale view (a owns onB's vshard, at an older epoch) sends the check
	// to a, which does not serve that vshard: answered "moved", never
	// counted, and unavailable once the member's Timeout has passed.
	v := shardOf(onB.ID, b.cl.n)
	cur := b.cl.view.Load()
	stale := cur.clone()
	stale.owners[v], stale.epochs[v] = "a", cur.epochs[v]-1
	fencedBefore := a.cl.stats.fenced.Load()
	b.cl.publish(stale)
	if _, err := b.Check(context.Background(), onB); !errors.Is(err, ErrClusterUnavailable) {
		t.Fatalf("a check routed by a stale view: %v, want ErrClusterUnavailable", err)
	}
	if got := a.cl.stats.fenced.Load() - fencedBefore; got == 0 {
		t.Fatal("a fenced nothing of the checks a stale view sent it")
	}
	b.cl.publish(cur)
	if got := countOf(t, a, onB); got != count {
		t.Fatalf("%s counts %d after the checks a stale view routed, want %d (none counted)", onB.ID, got, count)
	}
	if d, err := b.Check(context.Background(), onB); err != nil || !d.Allowed || d.Count != count+1 {
		t.Fatalf("with its view current again: %+v, %v; want allowed, count %d", d, err, count+1)
	}
}

// TestClusterResumesNothingBeforeItsViewShowsItsLease: after a relogin, a
// view that still shows the member's key under its old lease predates the
// expiry of that lease, and so the takeovers it allowed: the member must
// not resume the vshards such a view says are its own.
func TestClusterResumesNothingBeforeItsViewShowsItsLease(t *testing.T) {
	t.Parallel()
	_, cl := loneMember(t, ClusterConfig{Etcd: []string{"http://127.0.0.1:1"}})
	for v := range cl.vs {
		cl.vs[v].state = vsStale // its buckets kept when etcd expired lease 5
	}
	viewWith := func(lease int64, rev int64) *view {
		vw := newView(cl.n)
		vw.rev = rev
		vw.members["b"] = memberInfo{Addr: "127.0.0.1:1", lease: lease}
		for v := range vw.owners {
			vw.owners[v], vw.epochs[v] = "b", 3
		}
		vw.place()
		return vw
	}
	served := func() (n int) {
		for v := range cl.vs {
			if cl.vs[v].state == vsActive {
				n++
			}
		}
		return n
	}
	cl.view.Store(viewWith(5, 10))
	if ran := cl.reconcile(); ran || served() != 0 {
		t.Fatalf("a view of the old lease: reconcile ran %v and serves %d vshards; want not run, 0", ran, served())
	}
	cl.view.Store(viewWith(7, 12))
	if ran := cl.reconcile(); !ran || served() != 8 {
		t.Fatalf("a view of the current lease: reconcile ran %v and serves %d vshards; want run, 8", ran, served())
	}
}

// TestClusterOwnerTooSlowIsUnavailableNotCanceled: a forwarded check whose
// owner does not answer within ForwardTimeout is ErrClusterUnavailable, and
// not the caller's cancellation (context.DeadlineExceeded), which a
// transport answers as "the check was canceled" and does not log.
func TestClusterOwnerTooSlowIsUnavailableNotCanceled(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t)
	cfgA := tc.config("a")
	cfgA.Cluster.ForwardTimeout = 200 * time.Millisecond
	a := tc.start(cfgA)
	b := tc.start(tc.config("b"))
	tc.settle(a, b)
	req := table.Request{ID: ownedBy(t, b, "slow-"), Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1}
	// b's shard of that id is held: b decides nothing of it until released.
	sh := b.cl.shardOf(shardOf(req.ID, b.cl.n))
	sh.mu.Lock()
	_, err := a.Check(context.Background(), req)
	sh.mu.Unlock()
	if !errors.Is(err, ErrClusterUnavailable) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a check whose owner did not answer in time: %v, want ErrClusterUnavailable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("a check whose owner did not answer in time: %v, which matches the caller's own cancellation", err)
	}
	if sa, _ := a.ClusterStatus(); sa.Stats.Unavailable != 1 {
		t.Fatalf("a counts %d unavailable checks, want 1", sa.Stats.Unavailable)
	}
}
