package actors

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ratelimitd/ratelimitd/actors/internal/etcdtest"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestClusterCopyKeptAcrossAWholeRead: a member holds the copy of a vshard
// handed to it (pending: the move not yet known here) when it reads the
// cluster whole (it joins, and the move was sent before its first read;
// or its watch failed), and the move has committed. The whole read must
// still tell that this move, from the copy's sender at the copy's epoch,
// made the member the owner, so that the vshard starts with the copy's
// counts and not from nothing, which would admit again what the sender
// had counted. (Before it did, TestClusterJoinHandsTheCountsOffWithTheVShards
// failed about once in 400 runs under -race: a joining member started 32
// vshards empty.)
func TestClusterCopyKeptAcrossAWholeRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := etcdtest.Start(t)
	s, cl := loneMember(t, ClusterConfig{Etcd: []string{etcd.URL}, Name: "pending"})
	cli, err := clientv3.New(clientv3.Config{Endpoints: cl.cfg.Etcd, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	cl.etcd = cli

	// The copy: 6 hits on an id of vshard v, counted here as a Prepare
	// from a would have restored them.
	id := "user-0"
	v := shardOf(id, cl.n)
	req := table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 6}
	if d, err := s.Check(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("Check: %+v, %v", d, err)
	}
	put := func(key, val string) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, key, val)
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return resp.Header.Revision
	}
	for u := range cl.n {
		put(cl.ownerKey(u), "a")
	}
	epoch := put(cl.ownerKey(v), "a") // a's epoch of v, at which it made the copy
	sh := cl.shardOf(v)
	sh.mu.Lock()
	cl.vs[v] = vshard{state: vsPending, from: "a", epoch: epoch, xfer: 9, at: cl.mono()}
	sh.mu.Unlock()
	put(cl.prefix+"unrelated", "x")
	moved := put(cl.ownerKey(v), "b") // the move's transaction

	vw, err := cl.load(ctx)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if vw.owners[v] != "b" || vw.epochs[v] != moved || vw.prevOwners[v] != "a" || vw.prevEpochs[v] != epoch {
		t.Fatalf("vshard %d read whole: owner %q at %d, before it %q at %d; want b at %d, before it a at %d",
			v, vw.owners[v], vw.epochs[v], vw.prevOwners[v], vw.prevEpochs[v], moved, epoch)
	}
	for u := range cl.n {
		if u != v && (vw.prevOwners[u] != "" || vw.prevEpochs[u] != 0) {
			t.Fatalf("vshard %d (no copy waits here): previous owner %q at %d read; want none read", u, vw.prevOwners[u], vw.prevEpochs[u])
		}
	}

	// Reconciled with that view (both members live), the vshard serves
	// the copy.
	vw.members["a"] = memberInfo{Addr: "127.0.0.1:1", lease: 6}
	vw.members["b"] = memberInfo{Addr: "127.0.0.1:2", lease: 7}
	vw.place()
	cl.view.Store(vw)
	if !cl.reconcile() {
		t.Fatal("reconcile did not run")
	}
	if st := cl.vsState(v); st != vsActive {
		t.Fatalf("vshard %d is %s after reconcile, want active", v, st)
	}
	req.Hits = 0
	if d, err := s.Check(ctx, req); err != nil || d.Count != 6 {
		t.Fatalf("after the move: count %d (%v), want the copy's 6", d.Count, err)
	}
}
