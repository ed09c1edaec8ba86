package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ratelimitd/ratelimitd/table"
)

// ownedBy returns an id whose vshard m serves, with prefix.
func ownedBy(t testing.TB, m *member, prefix string) string {
	t.Helper()
	for i := 0; i < 100000; i++ {
		id := fmt.Sprint(prefix, i)
		v := shardOf(id, m.cl.n)
		sh := m.cl.shardOf(v)
		sh.mu.Lock()
		ok := m.cl.vs[v].state == vsActive
		sh.mu.Unlock()
		if ok {
			return id
		}
	}
	t.Fatalf("no id of prefix %s is served by %s", prefix, m.cl.id)
	return ""
}

func TestClusterAdmitsExactlyTheLimitAcrossMembers(t *testing.T) {
	t.Parallel()
	tc, a, b := startPair(t)
	for alg := range table.Algorithm(4) {
		for round := range 3 {
			id := fmt.Sprintf("key-%v-%d", alg, round)
			req := table.Request{ID: id, Policy: table.Policy{Algorithm: alg, Scale: time.Hour, Limit: 100, Burst: 100}, Hits: 1}
			if allowed, denied := checkConcurrently(t, 1000, req, a.System, b.System); allowed != 100 || denied != 900 {
				t.Fatalf("%v round %d: got %d allowed and %d denied, want 100 and 900", alg, round, allowed, denied)
			}
		}
	}
	sa, _ := a.ClusterStatus()
	sb, _ := b.ClusterStatus()
	if sa.Stats.ForwardedChecks+sb.Stats.ForwardedChecks == 0 || sa.Stats.ForwardedBatches+sb.Stats.ForwardedBatches == 0 {
		t.Fatalf("no check was forwarded: %+v %+v", sa.Stats, sb.Stats)
	}
	if got := sa.Serving + sb.Serving; got != 64 {
		t.Fatalf("the members serve %d vshards, want 64", got)
	}
	tc.ev.check(t)
}

func TestClusterRefusesAnotherNumberOfVShards(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t)
	tc.start(tc.config("a"))
	cfg := tc.config("b")
	cfg.Cluster.VShards = 128
	_, err := Start(context.Background(), cfg)
	if !errors.Is(err, ErrConfig) || !containsAll(err.Error(), "has 64 vshards", "started with 128", "start it with 64") {
		t.Fatalf("got %v, want ErrConfig naming 64 and 128", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// spend counts hits on n ids of prefix (limit 10, an hour) through m and
// returns their requests.
func spend(t testing.TB, m *member, prefix string, n int, hits int64) []table.Request {
	t.Helper()
	reqs := make([]table.Request, n)
	for i := range reqs {
		reqs[i] = table.Request{ID: fmt.Sprint(prefix, i), Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: hits}
		if d, err := m.Check(context.Background(), reqs[i]); err != nil || !d.Allowed {
			t.Fatalf("spend %s: %+v, %v", reqs[i].ID, d, err)
		}
	}
	return reqs
}

func TestClusterJoinHandsTheCountsOffWithTheVShards(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t)
	a := tc.start(tc.config("a"))
	tc.settle(a)
	reqs := spend(t, a, "user-", 200, 7)
	b := tc.start(tc.config("b"))
	tc.settle(a, b)
	moved := 0
	for i, req := range reqs {
		if servedHere(b, req.ID) {
			moved++
		}
		if got := countOf(t, []*member{a, b}[i%2], req); got != 7 {
			sa, _ := a.ClusterStatus()
			sb, _ := b.ClusterStatus()
			t.Fatalf("%s (on %s after the join): count %d, want the 7 counted before it\na: %+v\nb: %+v", req.ID, map[bool]string{true: "b", false: "a"}[servedHere(b, req.ID)], got, sa.Stats, sb.Stats)
		}
	}
	sa, _ := a.ClusterStatus()
	sb, _ := b.ClusterStatus()
	if moved < 50 || sa.Stats.HandoffsOut == 0 || sb.Stats.VShardsIn != sa.Stats.VShardsOut || sa.Stats.BucketsOut < int64(moved) || sa.Stats.VShardsOut != int64(sb.Serving) {
		t.Fatalf("%d of 200 ids moved; a: %+v; b serves %d: %+v", moved, sa.Stats, sb.Serving, sb.Stats)
	}
	if n := tc.ev.check(t); n != 64 {
		t.Fatalf("%d vshards were served, want 64", n)
	}
}

func TestClusterLeaveHandsEveryVShardOff(t *testing.T) {
	t.Parallel()
	tc, a, b := startPair(t)
	reqs := spend(t, a, "user-", 200, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st, _ := b.ClusterStatus(); st.Serving != 64 || st.Stats.Takeovers != 0 {
		t.Fatalf("after a left, b serves %d vshards (want 64), with %d taken over (want 0: all handed off)", st.Serving, st.Stats.Takeovers)
	}
	for _, req := range reqs {
		if got := countOf(t, b, req); got != 3 {
			t.Fatalf("%s: count %d after the leave, want 3", req.ID, got)
		}
	}
	tc.ev.check(t)
}

func TestClusterCrashedMembersVShardsAreTakenOverWithinTheLease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for leases to expire: skipped with -short")
	}
	_, a, b := startPair(t)
	id := ownedBy(t, a, "victim-")
	req := table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 4}
	if d, err := b.Check(context.Background(), req); err != nil || !d.Allowed {
		t.Fatalf("Check: %+v, %v", d, err)
	}
	st, _ := b.ClusterStatus()
	crashed := time.Now()
	a.crash(t)
	for !servedHere(b, id) {
		if time.Since(crashed) > st.LeaseTTL+time.Second {
			t.Fatalf("b did not take the vshard of %s over within the lease (%v) + 1s", id, st.LeaseTTL)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(crashed)
	// The new owner starts from nothing: the crash costs at most one limit.
	if got := countOf(t, b, req); got != 0 {
		t.Fatalf("after the takeover the count is %d, want 0 (the crashed owner's state is lost)", got)
	}
	sb, _ := b.ClusterStatus()
	if sb.Serving != 64 || sb.Stats.Takeovers != int64(64-st.Serving) {
		t.Fatalf("b serves %d vshards with %d takeovers, want 64 and %d", sb.Serving, sb.Stats.Takeovers, 64-st.Serving)
	}
	t.Logf("taken over %v after the crash (lease %v)", took.Round(time.Millisecond), st.LeaseTTL)
}

func TestClusterRestartWithinTheLeaseResumesFromTheJournal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for leases to expire: skipped with -short")
	}
	tc := newTestCluster(t)
	cfgA := tc.config("a")
	cfgA.DataDir = t.TempDir()
	a := tc.start(cfgA)
	b := tc.start(tc.config("b"))
	tc.settle(a, b)
	id := ownedBy(t, a, "keep-")
	req := table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 6}
	if d, err := b.Check(context.Background(), req); err != nil || !d.Allowed {
		t.Fatalf("Check: %+v, %v", d, err)
	}
	a.crash(t)
	a2 := tc.start(cfgA)
	awaitAddr(t, b, "a", a2.cl.addr) // on a loaded machine the watch can take longer than a check may wait
	if got := countOf(t, b, req); got != 6 {
		t.Fatalf("after the restart the count is %d, want 6 (resumed from the journal)", got)
	}
	if !servedHere(a2, id) {
		t.Fatalf("the restarted member does not serve %s again", id)
	}
	if sb, _ := b.ClusterStatus(); sb.Stats.Takeovers != 0 {
		t.Fatalf("b took %d vshards over; the restart kept its lease, so none should move", sb.Stats.Takeovers)
	}
}

func TestClusterCheckAllAcrossOwnersIsAllOrNothing(t *testing.T) {
	t.Parallel()
	_, a, b := startPair(t)
	pol := table.Policy{Scale: time.Hour, Limit: 5}
	onA := table.Request{ID: ownedBy(t, a, "x-"), Policy: pol, Hits: 1}
	onB := table.Request{ID: ownedBy(t, b, "y-"), Policy: pol, Hits: 1}
	onA2 := table.Request{ID: ownedBy(t, a, "z-"), Policy: pol, Hits: 1}
	for _, via := range []*member{a, b} {
		if _, ok, err := via.CheckAll(context.Background(), []table.Request{onA, onB}); err != nil || !ok {
			t.Fatalf("CheckAll across owners via %s: %v, %v", via.cl.id, ok, err)
		}
	}
	// Exhaust onB: a CheckAll across owners is then denied, and counts
	// nothing on a either.
	full := onB
	full.Hits = 3
	if d, err := a.Check(context.Background(), full); err != nil || !d.Allowed {
		t.Fatalf("Check: %+v, %v", d, err)
	}
	for range 3 {
		decs, ok, err := b.CheckAll(context.Background(), []table.Request{onA, onB})
		if err != nil || ok || decs[1].Allowed || !decs[0].Allowed {
			t.Fatalf("CheckAll with onB full: ok=%v decs=%+v err=%v, want denied by onB only", ok, decs, err)
		}
	}
	if got := countOf(t, a, onA); got != 2 {
		t.Fatalf("onA counts %d after three denied CheckAlls, want 2 (each refunded)", got)
	}
	// One owner: its own all-or-nothing unit.
	onA2.Hits = 5
	if _, ok, err := b.CheckAll(context.Background(), []table.Request{onA2, {ID: onA.ID, Policy: pol, Hits: 4}}); err != nil || ok {
		t.Fatalf("a CheckAll on one owner that cannot fit: ok=%v err=%v, want denied", ok, err)
	}
	if got := countOf(t, b, onA2); got != 0 {
		t.Fatalf("onA2 counts %d after a denied unit, want 0 (rolled back)", got)
	}
}

func TestClusterEtcdDownServesUntilTheLeaseThenFailsClosedAndResumes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for leases to expire: skipped with -short")
	}
	tc := newTestCluster(t)
	a := tc.start(tc.config("a"))
	cfgB := tc.config("b")
	cfgB.Cluster.OnError = FailOpen
	b := tc.start(cfgB)
	tc.settle(a, b)
	st, _ := a.ClusterStatus()
	onA := table.Request{ID: ownedBy(t, a, "p-"), Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 1}
	onB := table.Request{ID: ownedBy(t, b, "q-"), Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 1}
	killed := time.Now()
	tc.etcd.Kill()
	// Until its deadline a member serves what it holds, then fails (closed
	// on a, open on b).
	for {
		_, err := a.Check(context.Background(), onA)
		if err != nil {
			if !errors.Is(err, ErrClusterUnavailable) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("with etcd down: %v, want ErrClusterUnavailable", err)
			}
			break
		}
		if time.Since(killed) > st.LeaseTTL+2*time.Second {
			t.Fatalf("a still serves %v after etcd died, past its lease of %v", time.Since(killed), st.LeaseTTL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if elapsed := time.Since(killed); elapsed > st.LeaseTTL+time.Second {
		t.Fatalf("a failed closed %v after etcd died; want within the lease %v", elapsed, st.LeaseTTL)
	}
	for {
		d, err := b.Check(context.Background(), onB)
		if err != nil {
			t.Fatalf("b (fail open): %v", err)
		}
		if sb, _ := b.ClusterStatus(); d.Allowed && sb.Stats.AdmittedOpen > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	tc.etcd.Restart()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := a.Check(context.Background(), onA); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a did not serve again within 20s of etcd's return")
		}
		time.Sleep(20 * time.Millisecond)
	}
	tc.settle(a, b)
	sa, _ := a.ClusterStatus()
	if sa.Stats.Takeovers != 0 || sa.Stats.LeaseLapses == 0 || sa.Stats.EtcdErrors == 0 {
		t.Fatalf("a after etcd's return: %+v, want lapses and etcd errors counted and no takeover", sa.Stats)
	}
	tc.ev.check(t)
}

// TestClusterCheckEachRoutesToTheOwners: a CheckEach on one member decides
// each check at its vshard's owner, so a pipeline on one member and checks
// on another share the limit exactly.
func TestClusterCheckEachRoutesToTheOwners(t *testing.T) {
	t.Parallel()
	tc, a, b := startPair(t)
	ctx := context.Background()
	for _, owner := range []*member{a, b} {
		id := ownedBy(t, owner, "each-")
		req := table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
		reqs := make([]table.Request, 150)
		for i := range reqs {
			reqs[i] = req
		}
		decs := make([]table.Decision, len(reqs))
		if err := a.CheckEach(ctx, reqs, decs); err != nil {
			t.Fatalf("CheckEach: %v", err)
		}
		allowed := 0
		for i, d := range decs {
			if d.Allowed {
				allowed++
				if d.Count != int64(i+1) {
					t.Fatalf("check %d: got count %d, want %d (in order)", i, d.Count, i+1)
				}
			}
		}
		if allowed != 100 {
			t.Fatalf("id owned by %s: CheckEach on a admitted %d of 150, want 100", owner.cl.id, allowed)
		}
		if d, err := b.Check(ctx, req); err != nil || d.Allowed || d.Count != 100 {
			t.Fatalf("id owned by %s, a check on b after the pipeline: got %+v, %v, want denied at count 100", owner.cl.id, d, err)
		}
	}
	tc.ev.check(t)
}

// TestClusterIDOperationsReachTheOwner: Buckets, Reset and ResetID of an
// id another member owns are forwarded to it and act there, as checks are
// (Buckets' request did not validate on the wire: the owner refused the
// whole batch and the stream, and the caller got "unavailable").
func TestClusterIDOperationsReachTheOwner(t *testing.T) {
	t.Parallel()
	tc, a, b := startPair(t)
	ctx := context.Background()
	id := ownedBy(t, b, "ids-")
	pol := table.Policy{Algorithm: table.TokenBucket, Scale: time.Hour, Limit: 10}
	small := table.Request{ID: id, Policy: pol, Hits: 3, Namespace: "cell"}
	large := small
	large.Burst = 20
	adhoc := small
	adhoc.Namespace = ""
	for _, r := range []table.Request{small, large, adhoc} {
		if d, err := a.Check(ctx, r); err != nil || !d.Allowed {
			t.Fatalf("check %+v via a: %+v, %v", r, d, err)
		}
	}
	bs, err := a.Buckets(ctx, id)
	if err != nil || len(bs) != 3 {
		t.Fatalf("Buckets via a: %d buckets, %v; want 3", len(bs), err)
	}
	if n, err := a.ResetID(ctx, "cell", id); err != nil || n != 2 {
		t.Fatalf("ResetID via a: %d, %v; want 2 deleted", n, err)
	}
	if n, err := a.Reset(ctx, adhoc); err != nil || n != 1 {
		t.Fatalf("Reset via a: %d, %v; want 1 deleted", n, err)
	}
	for _, r := range []table.Request{small, large, adhoc} {
		if c := countOf(t, b, r); c != 0 {
			t.Fatalf("%+v on its owner b after the resets: count %d, want 0", r, c)
		}
	}
	if bs, err := b.Buckets(ctx, id); err != nil || len(bs) != 0 {
		t.Fatalf("Buckets on b after the resets: %+v, %v; want none", bs, err)
	}
	if sa, _ := a.ClusterStatus(); sa.Stats.ForwardedChecks < 6 {
		t.Fatalf("a forwarded %d calls, want the 3 checks, Buckets, ResetID and Reset at least", sa.Stats.ForwardedChecks)
	}
	tc.ev.check(t)
}

// TestClusterResetIDWaitsForTheOwnersLevel: a member of an earlier build
// (its key without "wire") cannot decode opResetID and would refuse the
// whole batch and stream holding it, so ResetID of an id it owns is
// answered unavailable without forwarding it, while checks go on; once the
// member says it decodes it, ResetID goes through.
func TestClusterResetIDWaitsForTheOwnersLevel(t *testing.T) {
	t.Parallel()
	tc, a, b := startPair(t)
	ctx := context.Background()
	id := ownedBy(t, b, "level-")
	req := table.Request{ID: id, Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Hour, Limit: 10}, Hits: 1, Namespace: "cell"}
	mustCheck(t, a.System, req)
	setB := func(value string, wire int) {
		t.Helper()
		if _, err := a.cl.etcd.Put(ctx, a.cl.memberKey("b"), value, clientv3.WithIgnoreLease()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a's view of b's wire level", func() bool { return a.cl.view.Load().members["b"].Wire == wire })
	}
	setB(`{"addr":"`+b.cl.addr+`","incarnation":"`+strconv.FormatUint(b.cl.incarnation, 16)+`"}`, 0)
	if n, err := a.ResetID(ctx, "cell", id); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "runs a build without ResetID") || n != 0 {
		t.Fatalf("ResetID of an id an earlier build owns: %d, %v; want ErrUnavailable naming the build", n, err)
	}
	if d := mustCheck(t, a.System, req); !d.Allowed || d.Count != 2 {
		t.Fatalf("a check beside it: %+v, want allowed at count 2 (forwarded, the stream intact)", d)
	}
	setB(b.cl.memberValue(), wireLevel)
	if n, err := a.ResetID(ctx, "cell", id); err != nil || n != 1 {
		t.Fatalf("ResetID once b says it decodes it: %d, %v; want 1", n, err)
	}
	tc.ev.check(t)
}
