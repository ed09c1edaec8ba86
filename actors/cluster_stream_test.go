package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// outboxOf returns m's outbox to member to.
func outboxOf(t *testing.T, m *member, to string) *outbox {
	t.Helper()
	v, ok := m.cl.links.Load(to)
	if !ok {
		t.Fatalf("%s has no link to %s", m.cl.id, to)
	}
	return v.(*outbox)
}

// waitFor polls cond until it holds, or fails after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// batchesSeen returns how many batches of sender's process to has taken
// in (counted when they arrive, before they are decided).
func batchesSeen(to *member, sender *member) int {
	d := &to.cl.dedup
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.logs[senderKey{sender.cl.id, sender.cl.incarnation}]
	if l == nil {
		return 0
	}
	return len(l.replies)
}

func TestClusterForwardsOnOneStreamAndOpensAnotherWhenItBreaks(t *testing.T) {
	t.Parallel()
	_, a, b := startPair(t)
	req := table.Request{ID: ownedBy(t, b, "s-"), Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 1}
	check := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if d, err := a.Check(context.Background(), req); err != nil || !d.Allowed {
					t.Errorf("a forwarded check: %+v, %v", d, err)
				}
			})
		}
		wg.Wait()
	}
	check(100)
	sa, _ := a.ClusterStatus()
	sb, _ := b.ClusterStatus()
	if sa.Stats.ForwardStreams != 1 || sa.Stats.ForwardedChecks != 100 || sb.Stats.ReceivedChecks != 100 || sb.Stats.ReceivedBatches != sa.Stats.ForwardedBatches {
		t.Fatalf("100 checks: a opened %d streams, forwarded %d checks in %d batches; b received %d in %d; want 1 stream, 100 checks, the same batches",
			sa.Stats.ForwardStreams, sa.Stats.ForwardedChecks, sa.Stats.ForwardedBatches, sb.Stats.ReceivedChecks, sb.Stats.ReceivedBatches)
	}
	// The stream breaks between batches: the next batch opens another.
	ob := outboxOf(t, a, "b")
	st := ob.current()
	st.ps.Close()
	waitFor(t, "a sees the stream broken", func() bool { return ob.current() != st })
	check(10)
	sa, _ = a.ClusterStatus()
	sb, _ = b.ClusterStatus()
	if sa.Stats.ForwardStreams != 2 || sb.Stats.ReceivedChecks != 110 || sb.Stats.Duplicates != 0 || sa.Stats.Unavailable != 0 {
		t.Fatalf("after a break: %d streams, b received %d checks (%d again), %d unavailable; want 2, 110, 0, 0",
			sa.Stats.ForwardStreams, sb.Stats.ReceivedChecks, sb.Stats.Duplicates, sa.Stats.Unavailable)
	}
	if got := countOf(t, b, req); got != 110 {
		t.Fatalf("count %d, want 110", got)
	}
}

// TestClusterSentBatchIsNotSentAgainWhenItsStreamBreaks: a batch its
// owner took in, whose stream breaks before the answer, is answered
// unavailable and never sent again: the owner decides it once.
func TestClusterSentBatchIsNotSentAgainWhenItsStreamBreaks(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t)
	cfgA := tc.config("a")
	cfgA.Cluster.ForwardTimeout = 5 * time.Second // the break, not the deadline, ends it
	cfgA.Cluster.Timeout = 5 * time.Second
	a := tc.start(cfgA)
	b := tc.start(tc.config("b"))
	tc.settle(a, b)
	req := table.Request{ID: ownedBy(t, b, "once-"), Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1}
	sh := b.cl.shardOf(shardOf(req.ID, b.cl.n))
	sh.mu.Lock() // b takes the batch in and cannot decide it yet
	errc := make(chan error, 1)
	go func() {
		_, err := a.Check(context.Background(), req)
		errc <- err
	}()
	waitFor(t, "b takes the batch in", func() bool { return batchesSeen(b, a) == 1 })
	outboxOf(t, a, "b").current().ps.Close()
	err := <-errc
	if !errors.Is(err, ErrClusterUnavailable) {
		sh.mu.Unlock()
		t.Fatalf("a check whose stream broke after it was sent: %v, want ErrClusterUnavailable", err)
	}
	sh.mu.Unlock()
	waitFor(t, "b decides the batch", func() bool { st, _ := b.ClusterStatus(); return st.Stats.ReceivedBatches == 1 })
	if got := countOf(t, b, req); got != 1 {
		t.Fatalf("count %d, want 1: decided once", got)
	}
	sa, _ := a.ClusterStatus()
	sb, _ := b.ClusterStatus()
	if sb.Stats.ReceivedBatches != 1 || sb.Stats.Duplicates != 0 || batchesSeen(b, a) != 1 || sa.Stats.Unavailable != 1 || sa.Stats.ForwardedBatches != 1 {
		t.Fatalf("b decided %d batches, saw %d again, took in %d; a: %d unavailable, %d batches; want 1, 0, 1, 1, 1",
			sb.Stats.ReceivedBatches, sb.Stats.Duplicates, batchesSeen(b, a), sa.Stats.Unavailable, sa.Stats.ForwardedBatches)
	}
}

// TestClusterStoppingOwnerAnswersWhatItWasSent: a member whose transport
// stops tells the streams to it, answers the batch it holds (not lost,
// not unavailable), and stops once its sender closed the stream, not at
// its deadline.
func TestClusterStoppingOwnerAnswersWhatItWasSent(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t)
	cfgA := tc.config("a")
	cfgA.Cluster.ForwardTimeout = 5 * time.Second
	cfgA.Cluster.Timeout = 5 * time.Second
	a := tc.start(cfgA)
	b := tc.start(tc.config("b"))
	tc.settle(a, b)
	req := table.Request{ID: ownedBy(t, b, "stop-"), Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1}
	sh := b.cl.shardOf(shardOf(req.ID, b.cl.n))
	sh.mu.Lock()
	type answer struct {
		d   table.Decision
		err error
	}
	ans := make(chan answer, 1)
	go func() {
		d, err := a.Check(context.Background(), req)
		ans <- answer{d, err}
	}()
	waitFor(t, "b takes the batch in", func() bool { return batchesSeen(b, a) == 1 })
	ob := outboxOf(t, a, "b")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		b.cl.srv.Stop(ctx)
		close(stopped)
	}()
	waitFor(t, "a hears b is stopping", func() bool { return ob.current() == nil })
	sh.mu.Unlock()
	got := <-ans
	if got.err != nil || !got.d.Allowed || got.d.Count != 1 {
		t.Fatalf("the check b held as it stopped: %+v, %v; want allowed, count 1", got.d, got.err)
	}
	<-stopped
	if ctx.Err() != nil {
		t.Fatal("b's transport stopped at its deadline, not when a closed the stream")
	}
}

// TestClusterMembersOpenTheirLinksBeforeTheFirstForward: each member opens
// its stream to every other member as soon as it sees it, and opens
// another when one breaks, before any check needs it; the first checks
// forwarded go on that stream, counted exactly.
func TestClusterMembersOpenTheirLinksBeforeTheFirstForward(t *testing.T) {
	t.Parallel()
	_, a, b := startPair(t)
	streams := func(m *member) int64 {
		st, _ := m.ClusterStatus()
		return st.Stats.ForwardStreams
	}
	waitFor(t, "a and b each open a stream to the other, no check forwarded", func() bool { return streams(a) == 1 && streams(b) == 1 })
	if sa, _ := a.ClusterStatus(); sa.Stats.ForwardedChecks != 0 {
		t.Fatalf("a forwarded %d checks before any was made", sa.Stats.ForwardedChecks)
	}
	req := table.Request{ID: ownedBy(t, b, "w-"), Policy: table.Policy{Scale: time.Hour, Limit: 1000}, Hits: 1}
	for range 10 {
		if d, err := a.Check(context.Background(), req); err != nil || !d.Allowed {
			t.Fatalf("a forwarded check: %+v, %v", d, err)
		}
	}
	sa, _ := a.ClusterStatus()
	if sa.Stats.ForwardStreams != 1 || sa.Stats.ForwardedChecks != 10 || sa.Stats.Unavailable != 0 {
		t.Fatalf("10 checks: a opened %d streams, forwarded %d, %d unavailable; want 1 (the one opened ahead), 10, 0",
			sa.Stats.ForwardStreams, sa.Stats.ForwardedChecks, sa.Stats.Unavailable)
	}
	// The stream breaks: a opens another without waiting for a check.
	ob := outboxOf(t, a, "b")
	st := ob.current()
	st.ps.Close()
	waitFor(t, "a opens another stream to b, no check forwarded", func() bool {
		cur := ob.current()
		return cur != nil && cur != st && streams(a) == 2
	})
	if got := countOf(t, b, req); got != 10 {
		t.Fatalf("count %d, want 10", got)
	}
}
