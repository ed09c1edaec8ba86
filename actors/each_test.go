package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// failures returns the *table.IndexError of CheckEach's error err, by
// index; it fails the test if err holds anything else.
func failures(t *testing.T, err error) map[int]error {
	t.Helper()
	got := map[int]error{}
	if err == nil {
		return got
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("CheckEach error %v (%T): want an errors.Join of *table.IndexError", err, err)
	}
	last := -1
	for _, e := range joined.Unwrap() {
		ie, ok := e.(*table.IndexError)
		if !ok {
			t.Fatalf("CheckEach error holds %v (%T), want only *table.IndexError", e, e)
		}
		if ie.Index <= last {
			t.Fatalf("CheckEach error: index %d after %d, want them in order, once each", ie.Index, last)
		}
		last = ie.Index
		got[ie.Index] = ie.Err
	}
	return got
}

// journalRecords returns the records appended to every shard's journal.
func journalRecords(s *System) uint64 {
	var n uint64
	for _, sh := range s.shards {
		sh.mu.Lock()
		n += sh.j.Seq()
		sh.mu.Unlock()
	}
	return n
}

// TestCheckEachDecidesEachInOrder: the requests of a CheckEach are
// counted each on its own, in the order of reqs within a bucket: a denial
// undoes nothing (unlike CheckAll), and a request sees the hits before it.
func TestCheckEachDecidesEachInOrder(t *testing.T) {
	t.Parallel()
	const shards = 4
	s := startSystem(t, Config{Shards: shards, Clock: clocktest.New(time.Unix(1_700_000_000, 0))})
	same := sameShard("each", shards, 2) // two buckets of one shard, interleaved
	a, b := same[0], same[1]
	other := "each-other"
	for shardOf(other, shards) == shardOf(a, shards) {
		other += "+"
	}
	reqs := []table.Request{hit(a, 2), hit(b, 2), hit(a, 2), hit(other, 1), hit(a, 2), hit(b, 2), hit(other, 1)}
	reqs[4].Hits = 0 // a peek, after the denial of nothing: a is full
	decs := make([]table.Decision, len(reqs))
	if err := s.CheckEach(context.Background(), reqs, decs); err != nil {
		t.Fatalf("CheckEach: %v", err)
	}
	want := []struct {
		allowed bool
		count   int64
	}{{true, 1}, {true, 1}, {true, 2}, {true, 1}, {false, 2}, {true, 2}, {false, 1}}
	for i, w := range want {
		if decs[i].Allowed != w.allowed || decs[i].Count != w.count {
			t.Errorf("decision %d (%s, %d hits): got allowed %v count %d, want allowed %v count %d",
				i, reqs[i].ID, reqs[i].Hits, decs[i].Allowed, decs[i].Count, w.allowed, w.count)
		}
	}
	// Every admitted hit was kept: the batch's denials undid nothing.
	for id, count := range map[string]int64{a: 2, b: 2, other: 1} {
		peek := hit(id, 2)
		if id == other {
			peek.Limit = 1
		}
		peek.Hits = 0
		if d, err := s.Check(context.Background(), peek); err != nil || d.Count != count {
			t.Errorf("%s after the batch: got %+v, %v, want count %d", id, d, err, count)
		}
	}
}

// TestCheckEachInvalidRequest: an invalid request is reported as a
// *table.IndexError of its index, holding its *table.FieldError, and is
// not counted; the valid ones are decided.
func TestCheckEachInvalidRequest(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 2})
	bad := table.Request{ID: "b", Policy: table.Policy{Scale: time.Second, Limit: -1}, Hits: 1}
	reqs := []table.Request{hit("a", 5), bad, hit("a", 5), {Policy: table.Policy{Scale: time.Second, Limit: 1}}}
	decs := make([]table.Decision, len(reqs))
	decs[1].Count = 42 // left as it was
	err := s.CheckEach(context.Background(), reqs, decs)
	got := failures(t, err)
	if len(got) != 2 || got[1] == nil || got[3] == nil {
		t.Fatalf("got failures %v, want indexes 1 and 3", got)
	}
	var fe *table.FieldError
	if !errors.As(got[1], &fe) || *fe != (table.FieldError{Field: "limit", Message: table.MsgNotNegative}) {
		t.Errorf("index 1: got %v, want limit: %s", got[1], table.MsgNotNegative)
	}
	if !errors.As(got[3], &fe) || fe.Field != "id" {
		t.Errorf("index 3: got %v, want an error of field id", got[3])
	}
	if !errors.Is(err, table.ErrInvalid) {
		t.Errorf("got %v, want it to match table.ErrInvalid", err)
	}
	var ie *table.IndexError
	if !errors.As(err, &ie) || ie.Index != 1 || ie.Error() != "checks[1].limit: "+table.MsgNotNegative {
		t.Errorf("first failure: got %v, want checks[1].limit: %s", ie, table.MsgNotNegative)
	}
	if decs[0].Count != 1 || decs[2].Count != 2 || decs[1].Count != 42 {
		t.Errorf("got decisions %+v, want a's counts 1 and 2 and the invalid one untouched", decs)
	}
}

// TestCheckEachOneRecordPerShard: a CheckEach appends one journal record
// per shard it touches, however many of its requests each shard decides,
// in every sync mode (with SyncAlways the owners decide, one batch per
// shard); a single Check appends one, its bucket's count with a tail
// (after the CheckEach's records, which have none), and a second round
// appends none: each rewrites its bucket's tail.
func TestCheckEachOneRecordPerShard(t *testing.T) {
	t.Parallel()
	forEverySyncMode(t, func(t *testing.T, mode SyncMode) {
		const shards = 4
		s := startSystem(t, Config{Shards: shards, DataDir: t.TempDir(), JournalSync: mode, SweepInterval: -1,
			Clock: clocktest.New(time.Unix(1_700_000_000, 0))})
		var reqs []table.Request
		touched := map[int]bool{}
		for i := range 30 {
			id := fmt.Sprint("rec-", i%6)
			touched[shardOf(id, shards)] = true
			reqs = append(reqs, hit(id, 100))
		}
		if len(touched) < 2 {
			t.Fatalf("the ids touch %d shard(s); the test needs several", len(touched))
		}
		before := journalRecords(s)
		decs := make([]table.Decision, len(reqs))
		if err := s.CheckEach(context.Background(), reqs, decs); err != nil {
			t.Fatalf("CheckEach: %v", err)
		}
		if got := journalRecords(s) - before; got != uint64(len(touched)) {
			t.Errorf("CheckEach of %d requests on %d shards appended %d records, want %d", len(reqs), len(touched), got, len(touched))
		}
		for i, d := range decs {
			if want := int64(i/6 + 1); !d.Allowed || d.Count != want {
				t.Errorf("decision %d: got %+v, want allowed with count %d", i, d, want)
			}
		}
		before = journalRecords(s)
		for _, r := range reqs[:6] {
			if _, err := s.Check(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		if got := journalRecords(s) - before; got != 6 {
			t.Errorf("6 single Checks appended %d records, want 6", got)
		}
		before = journalRecords(s)
		for _, r := range reqs[:6] {
			if d, err := s.Check(context.Background(), r); err != nil || d.Count != 7 {
				t.Fatalf("second single Check of %s: %+v, %v; want count 7", r.ID, d, err)
			}
		}
		if got := journalRecords(s) - before; got != 0 {
			t.Errorf("6 single Checks of buckets with tails appended %d records, want 0", got)
		}
	})
}

// TestCheckEachExactUnderConcurrency: batches racing each other and
// single checks on the same keys, some with a ctx that can end (which
// queue for the owner when the shard is busy), admit exactly the limit of
// each key.
func TestCheckEachExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const keys, limit, goroutines, rounds, batch = 5, 60, 8, 20, 12
	s := startSystem(t, Config{Shards: 4, DataDir: t.TempDir(), Clock: clocktest.New(time.Unix(1_700_000_000, 0))})
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ctx := context.Background()
			if g%2 == 1 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			reqs := make([]table.Request, batch)
			decs := make([]table.Decision, batch)
			for r := range rounds {
				for i := range reqs {
					reqs[i] = hit(fmt.Sprint("hot-", (g+r+i)%keys), limit)
				}
				if g%4 == 3 {
					// A single check among the batches.
					d, err := s.Check(ctx, reqs[0])
					if err != nil {
						t.Errorf("Check: %v", err)
						return
					}
					if d.Allowed {
						allowed[(g+r)%keys].Add(1)
					}
					continue
				}
				if err := s.CheckEach(ctx, reqs, decs); err != nil {
					t.Errorf("CheckEach: %v", err)
					return
				}
				for i, d := range decs {
					if d.Allowed {
						allowed[(g+r+i)%keys].Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if got := allowed[k].Load(); got != limit {
			t.Errorf("hot-%d: %d admitted, want exactly %d", k, got, limit)
		}
	}
}

// TestCheckEachCrash: a panic while a shard decides its run answers that
// run ErrUnavailable (its shard rebuilt), and the other shards' requests
// are decided and kept.
func TestCheckEachCrash(t *testing.T) {
	t.Parallel()
	const shards = 4
	s := startSystem(t, Config{Shards: shards, SweepInterval: -1, applyHook: poisonHook})
	victim := sameShard("poison", shards, 2)[1]
	safe := "safe"
	for shardOf(safe, shards) == shardOf("poison", shards) {
		safe += "+"
	}
	reqs := []table.Request{hit(safe, 10), hit(victim, 10), hit("poison", 10), hit(safe, 10)}
	decs := make([]table.Decision, len(reqs))
	err := s.CheckEach(context.Background(), reqs, decs)
	got := failures(t, err)
	if len(got) != 2 || !errors.Is(got[1], ErrUnavailable) || !errors.Is(got[2], ErrUnavailable) {
		t.Fatalf("got failures %v, want ErrUnavailable for indexes 1 and 2 (the crashed shard's)", got)
	}
	if decs[0].Count != 1 || decs[3].Count != 2 {
		t.Errorf("the other shard's decisions: got %+v and %+v, want counts 1 and 2", decs[0], decs[3])
	}
	if got := s.Stats().Restarts; got != 1 {
		t.Errorf("got %d restarts, want 1", got)
	}
	if d, err := s.Check(context.Background(), hit(victim, 10)); err != nil || d.Count != 1 {
		t.Errorf("%s after the crash: got %+v, %v, want its first hit on the rebuilt shard", victim, d, err)
	}
	if d, err := s.Check(context.Background(), hit(safe, 10)); err != nil || d.Count != 3 {
		t.Errorf("%s after the crash: got %+v, %v, want count 3 (the batch's 2 kept)", safe, d, err)
	}
}

// TestCheckEachStoppedAndCanceled: after Stop every request fails with
// ErrStopped, and with a done ctx with its error; nothing is counted.
func TestCheckEachStoppedAndCanceled(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 2})
	reqs := []table.Request{hit("a", 5), hit("b", 5), hit("a", 5)}
	decs := make([]table.Decision, len(reqs))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.CheckEach(ctx, reqs, decs)
	if got := failures(t, err); len(got) != 3 || !errors.Is(err, context.Canceled) {
		t.Fatalf("with a done ctx: got %v, want context.Canceled for all 3", err)
	}
	peek := hit("a", 5)
	peek.Hits = 0
	if d, err := s.Check(context.Background(), peek); err != nil || d.Count != 0 {
		t.Fatalf("a after the canceled batch: got %+v, %v, want count 0", d, err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = s.CheckEach(context.Background(), reqs, decs)
	if got := failures(t, err); len(got) != 3 || !errors.Is(got[0], ErrStopped) || !errors.Is(got[1], ErrStopped) || !errors.Is(got[2], ErrStopped) {
		t.Fatalf("after Stop: got %v, want ErrStopped for all 3", err)
	}
}

// TestCheckEachCanceledWhileQueued: the run of a busy shard is queued for
// its owner; when ctx ends before the owner takes it, those requests fail
// with ctx.Err() and are not counted, while the free shard's were decided.
func TestCheckEachCanceledWhileQueued(t *testing.T) {
	t.Parallel()
	const shards = 2
	ids := sameShard("slow", shards, 2)
	free := "free"
	for shardOf(free, shards) == shardOf(ids[0], shards) {
		free += "+"
	}
	blocked, release := make(chan struct{}), make(chan struct{})
	s := startSystem(t, Config{Shards: shards, applyHook: func(r table.Request) {
		if r.ID == ids[0] {
			close(blocked)
			<-release
		}
	}})
	go s.Check(context.Background(), hit(ids[0], 10)) //nolint:errcheck // only holds the shard
	<-blocked

	ctx, cancel := context.WithCancel(context.Background())
	reqs := []table.Request{hit(ids[1], 10), hit(free, 10), hit(ids[1], 10)}
	decs := make([]table.Decision, len(reqs))
	errc := make(chan error, 1)
	go func() { errc <- s.CheckEach(ctx, reqs, decs) }()
	q := &s.shards[shardOf(ids[1], shards)].q
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		q.mu.Lock()
		queued := len(q.pending)
		q.mu.Unlock()
		if queued == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the busy shard's run did not reach its inbox within 10s")
		}
	}
	cancel()
	err := <-errc
	got := failures(t, err)
	if len(got) != 2 || !errors.Is(got[0], context.Canceled) || !errors.Is(got[2], context.Canceled) {
		t.Fatalf("got failures %v, want context.Canceled for indexes 0 and 2", got)
	}
	if decs[1].Count != 1 || !decs[1].Allowed {
		t.Errorf("the free shard's request: got %+v, want allowed with count 1", decs[1])
	}
	close(release)
	peek := hit(ids[1], 10)
	peek.Hits = 0
	if d, err := s.Check(context.Background(), peek); err != nil || d.Count != 0 {
		t.Fatalf("%s after the canceled run: got %+v, %v, want count 0", ids[1], d, err)
	}
}

// TestCheckEachLengths: no request is nothing to do, and decisions of
// another length are a caller's bug.
func TestCheckEachLengths(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 2})
	if err := s.CheckEach(context.Background(), nil, nil); err != nil {
		t.Fatalf("no request: got %v, want nil", err)
	}
	defer func() {
		if r := recover(); r != "actors: CheckEach: 1 decisions for 2 requests" {
			t.Fatalf("got panic %v, want the lengths named", r)
		}
	}()
	_ = s.CheckEach(context.Background(), []table.Request{hit("a", 1), hit("b", 1)}, make([]table.Decision, 1))
}

// TestCheckEachOfOne: a CheckEach of one request (decided as Check decides
// it) counts it, names it by index 0 when it fails (invalid: not counted,
// decs[0] left as it was; a done ctx: not counted; a crash of its shard:
// ErrUnavailable and the shard rebuilt; after Stop: ErrStopped).
func TestCheckEachOfOne(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 2, SweepInterval: -1, applyHook: poisonHook})
	decs := make([]table.Decision, 1)
	for want := int64(1); want <= 3; want++ {
		if err := s.CheckEach(context.Background(), []table.Request{hit("a", 3)}, decs); err != nil || !decs[0].Allowed || decs[0].Count != want {
			t.Fatalf("hit %d of a: got %+v, %v, want allowed with count %d", want, decs[0], err, want)
		}
	}
	if err := s.CheckEach(context.Background(), []table.Request{hit("a", 3)}, decs); err != nil || decs[0].Allowed || decs[0].Count != 3 {
		t.Fatalf("hit 4 of a: got %+v, %v, want denied with count 3", decs[0], err)
	}

	decs[0] = table.Decision{Count: 42}
	bad := hit("a", 3)
	bad.Hits = -1
	err := s.CheckEach(context.Background(), []table.Request{bad}, decs)
	var fe *table.FieldError
	if got := failures(t, err); len(got) != 1 || !errors.As(got[0], &fe) || fe.Field != "hits" || !errors.Is(err, table.ErrInvalid) {
		t.Fatalf("an invalid request: got %v, want a FieldError on hits for index 0", err)
	}
	if decs[0].Count != 42 {
		t.Errorf("an invalid request changed decs[0] to %+v", decs[0])
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := failures(t, s.CheckEach(ctx, []table.Request{hit("b", 5)}, decs)); len(got) != 1 || !errors.Is(got[0], context.Canceled) {
		t.Fatalf("with a done ctx: got %v, want context.Canceled for index 0", got)
	}
	peek := hit("b", 5)
	peek.Hits = 0
	if d, err := s.Check(context.Background(), peek); err != nil || d.Count != 0 {
		t.Fatalf("b after the canceled check: got %+v, %v, want count 0", d, err)
	}

	if got := failures(t, s.CheckEach(context.Background(), []table.Request{hit("poison", 5)}, decs)); len(got) != 1 || !errors.Is(got[0], ErrUnavailable) {
		t.Fatalf("a request that crashes its shard: got %v, want ErrUnavailable for index 0", got)
	}
	if got := s.Stats().Restarts; got != 1 {
		t.Errorf("got %d restarts, want 1", got)
	}

	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := failures(t, s.CheckEach(context.Background(), []table.Request{hit("a", 3)}, decs)); len(got) != 1 || !errors.Is(got[0], ErrStopped) {
		t.Fatalf("after Stop: got %v, want ErrStopped for index 0", got)
	}
}

// TestCheckEachOfOneAllocatesNothing: a CheckEach of one request that is
// decided allocates nothing. (AllocsPerRun refuses to run in parallel.)
func TestCheckEachOfOneAllocatesNothing(t *testing.T) {
	s := startSystem(t, Config{Shards: 2})
	one := []table.Request{hit("c", 1<<40)}
	decs := make([]table.Decision, 1)
	if n := testing.AllocsPerRun(1000, func() {
		if err := s.CheckEach(context.Background(), one, decs); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a CheckEach of one allocates %.1f times, want 0", n)
	}
	if decs[0].Count != 1001 {
		t.Errorf("after 1001 hits of c (AllocsPerRun's warm-up and runs): count %d", decs[0].Count)
	}
}
