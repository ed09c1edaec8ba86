package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/sweeper"
	"github.com/ratelimitd/ratelimitd/table"
)

func startSystem(t testing.TB, cfg Config) *System {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

func hit(id string, limit int64) table.Request {
	return table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: limit}, Hits: 1}
}

// checkConcurrently makes n checks of req at once, through via in turn,
// and returns how many were allowed and how many denied; a check that
// errs fails the test.
func checkConcurrently(t testing.TB, n int, req table.Request, via ...*System) (allowed, denied int64) {
	t.Helper()
	var a, d atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := via[i%len(via)]
			dec, err := s.Check(context.Background(), req)
			switch {
			case err != nil:
				t.Errorf("Check via system %d: %v", i%len(via), err)
			case dec.Allowed:
				a.Add(1)
			default:
				d.Add(1)
			}
		})
	}
	wg.Wait()
	return a.Load(), d.Load()
}

// sameShard returns n distinct ids that all map to the shard of first.
func sameShard(first string, shards, n int) []string {
	want := shardOf(first, shards)
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprint(first, "-", i); shardOf(id, shards) == want {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestConcurrentChecksAdmitExactlyTheLimit(t *testing.T) {
	t.Parallel()
	// A manual clock that never moves keeps every check in one window.
	s := startSystem(t, Config{Clock: clocktest.New(time.Unix(1_700_000_000, 0))})
	for round := range 5 {
		if allowed, denied := checkConcurrently(t, 1000, hit(fmt.Sprint("key-", round), 100), s); allowed != 100 || denied != 900 {
			t.Fatalf("round %d: got %d allowed and %d denied, want 100 and 900", round, allowed, denied)
		}
	}
}

func TestInvalidRequestIsRejectedBeforeAnyOwner(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{})
	_, err := s.Check(context.Background(), table.Request{ID: "k", Policy: table.Policy{Scale: 0, Limit: 1}, Hits: 1})
	var fe *table.FieldError
	if !errors.As(err, &fe) || fe.Field != "scale" {
		t.Fatalf("got %v, want a FieldError on scale", err)
	}
}

// TestCrashedShardIsRebuiltAndServesOn: a check that panics is answered
// with ErrUnavailable; its shard is rebuilt (empty, without a journal) and
// serves on, and the other shards keep their tables.
func TestCrashedShardIsRebuiltAndServesOn(t *testing.T) {
	t.Parallel()
	const shards = 4
	ids := sameShard("victim", shards, 2)
	var other string
	for i := 0; other == ""; i++ {
		if id := fmt.Sprint("bystander-", i); shardOf(id, shards) != shardOf(ids[0], shards) {
			other = id
		}
	}
	s := startSystem(t, Config{Shards: shards, applyHook: func(r table.Request) {
		if r.ID == "poison" {
			panic("poisoned request")
		}
	}})
	ctx := context.Background()
	for range 3 {
		if _, err := s.Check(ctx, hit(other, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Check(ctx, hit("poison", 10)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("poisoned check: got %v, want ErrUnavailable", err)
	}
	for _, id := range append(ids, "poison-free") {
		if d, err := s.Check(ctx, hit(id, 10)); err != nil || !d.Allowed || d.Count != 1 {
			t.Fatalf("%s after the crash: got %+v, %v, want its first hit allowed", id, d, err)
		}
	}
	// One-for-one: the other shards kept their tables.
	if d, err := s.Check(ctx, hit(other, 10)); err != nil || d.Count != 4 {
		t.Fatalf("bystander in another shard: got %+v, %v, want count 4", d, err)
	}
	if got := s.Stats().Restarts; got != 1 {
		t.Fatalf("got %d restarts, want 1", got)
	}
}

func TestCancelledCheckIsNotCounted(t *testing.T) {
	t.Parallel()
	const shards = 2
	ids := sameShard("slow", shards, 2)
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
	errc := make(chan error, 1)
	go func() {
		_, err := s.Check(ctx, hit(ids[1], 10))
		errc <- err
	}()
	// The shard is held on ids[0], so the check of ids[1] (whose ctx can end) waits in the inbox.
	q := &s.shards[shardOf(ids[1], shards)].q
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		q.mu.Lock()
		queued := len(q.pending)
		q.mu.Unlock()
		if queued == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the check did not reach the inbox within 10s")
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(release)
	peek := hit(ids[1], 10)
	peek.Hits = 0
	if d, err := s.Check(context.Background(), peek); err != nil || d.Count != 0 {
		t.Fatalf("peek after the cancelled check: got %+v, %v, want count 0", d, err)
	}
	if _, err := s.Check(ctx, hit(ids[1], 10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("check with a done ctx: got %v, want context.Canceled", err)
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	s, err := Start(context.Background(), Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Checks racing with Stop are either answered or refused with ErrStopped.
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			_, err := s.Check(context.Background(), hit(fmt.Sprint("k", i%7), 1000))
			if err != nil && !errors.Is(err, ErrStopped) {
				t.Errorf("check during Stop: %v", err)
			}
		})
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	wg.Wait()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := s.Check(context.Background(), hit("k", 1)); !errors.Is(err, ErrStopped) {
		t.Fatalf("Check after Stop: got %v, want ErrStopped", err)
	}
}

type sweepReports chan SweepReport

func (r sweepReports) SweepDone(rep SweepReport) { r <- rep }

func TestSweeperDeletesOnlyExpiredBuckets(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
	clock := clocktest.New(t0)
	reports := make(sweepReports, 4)
	s := startSystem(t, Config{Shards: 3, Clock: clock, SweepInterval: 10 * time.Second, SweepBatch: 7, SweepObserver: reports})
	ctx := context.Background()
	for i := range 100 {
		if _, err := s.Check(ctx, table.Request{ID: fmt.Sprint("short-", i), Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := s.Check(ctx, hit("open", 3)); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats().Buckets; got != 101 {
		t.Fatalf("got %d buckets, want 101", got)
	}
	clock.BlockUntil(1)
	clock.Advance(10 * time.Second)
	var rep SweepReport
	select {
	case rep = <-reports:
	case <-time.After(10 * time.Second):
		t.Fatal("no sweep report within 10s")
	}
	if rep.Deleted != 100 || !rep.Complete || rep.Batches < 100/7 {
		t.Fatalf("got %+v, want 100 deleted in at least %d bounded batches, complete", rep, 100/7)
	}
	if got := s.Stats().Buckets; got != 1 {
		t.Fatalf("got %d buckets after the sweep, want the 1 open one", got)
	}
	if d, err := s.Check(ctx, hit("open", 3)); err != nil || d.Allowed || d.Count != 3 {
		t.Fatalf("open window after the sweep: got %+v, %v, want denied at count 3", d, err)
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{Shards: -1}, {Shards: MaxShards + 1}, {BucketTTL: -time.Second}, {SweepBatch: -1}} {
		if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", cfg, err)
		}
	}
}

var _ sweeper.Observer = sweepReports(nil)

// TestInboxSendsOneDrainMessagePerDrain pins the inbox protocol: only a push
// into an idle inbox asks for a drainMessage, and the inbox turns idle only
// when the owner settles on finding it empty, so no check is ever left
// without a drainMessage on its way.
func TestInboxSendsOneDrainMessagePerDrain(t *testing.T) {
	t.Parallel()
	var q inbox
	push := func() bool {
		kick, err := q.push(&call{})
		if err != nil {
			t.Fatalf("push: %v", err)
		}
		return kick
	}
	if !push() {
		t.Fatal("first push into an idle inbox: got no kick, want one")
	}
	if push() {
		t.Fatal("second push before any take: got a kick, want none (one is on its way)")
	}
	if got := len(q.take(nil, false)); got != 2 {
		t.Fatalf("take: got %d checks, want 2", got)
	}
	if push() {
		t.Fatal("push while the owner is still draining: got a kick, want none")
	}
	if got := len(q.take(nil, true)); got != 1 {
		t.Fatalf("take: got %d checks, want 1", got)
	}
	if got := len(q.take(nil, false)); got != 0 {
		t.Fatalf("take of an empty inbox: got %d checks, want 0", got)
	}
	if push() {
		t.Fatal("push after an unsettled empty take: got a kick, want none (the owner will settle)")
	}
	q.take(nil, true)
	if got := len(q.take(nil, true)); got != 0 {
		t.Fatalf("settling take: got %d checks, want 0", got)
	}
	if !push() {
		t.Fatal("push after the owner settled: got no kick, want one")
	}
	q.close()
	if _, err := q.push(&call{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("push into a closed inbox: got %v, want ErrStopped", err)
	}
}

// TestCrashDuringASweepRebuildsTheShard: a panic while the sweeping holds a
// shard rebuilds the shard's table (empty, without a journal) before the
// shard is let go, and counts the crash; the shard serves on.
func TestCrashDuringASweepRebuildsTheShard(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	clock := clocktest.New(t0)
	var crash atomic.Bool
	crash.Store(true)
	s := startSystem(t, Config{Shards: 1, Clock: clock, SweepInterval: 10 * time.Second, sweepHook: func() {
		if crash.Swap(false) {
			panic("injected sweep crash")
		}
	}})
	ctx := context.Background()
	for range 3 {
		if _, err := s.Check(ctx, hit("kept", 10)); err != nil {
			t.Fatal(err)
		}
	}
	clock.BlockUntil(1)
	clock.Advance(10 * time.Second)
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Restarts != 1; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("restarts: got %d within 10s, want 1", s.Stats().Restarts)
		}
	}
	// Served again, from a rebuilt (here: empty) table.
	if d, err := s.Check(ctx, hit("kept", 10)); err != nil || !d.Allowed || d.Count != 1 {
		t.Fatalf("check after the crash: got %+v, %v, want allowed at count 1 (the table was rebuilt empty)", d, err)
	}
}

// TestSweepLetsChecksInBetweenSlices: a check queued while a shard is swept
// is answered between two slices of the sweep, not after the whole sweep.
func TestSweepLetsChecksInBetweenSlices(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)
	clock := clocktest.New(t0)
	inSlice := make(chan int, 8)
	proceed := make(chan struct{})
	slices := 0
	s := startSystem(t, Config{Shards: 1, Clock: clock, SweepInterval: 10 * time.Second, SweepBatch: 3 * sweepSlice,
		sweepHook: func() {
			slices++
			inSlice <- slices
			<-proceed
		}})
	t.Cleanup(func() { close(proceed) }) // before Stop, which waits for the sweeping
	ctx := context.Background()
	for i := range 3 * sweepSlice {
		if _, err := s.Check(ctx, table.Request{ID: fmt.Sprint("short-", i), Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1}); err != nil {
			t.Fatal(err)
		}
	}
	clock.BlockUntil(1)
	clock.Advance(10 * time.Second)
	if n := <-inSlice; n != 1 {
		t.Fatalf("got slice %d first, want 1", n)
	}
	// The sweeping holds the shard in slice 1: a check that may not wait
	// queues.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := s.Check(cctx, hit("during-the-sweep", 10))
		answered <- err
	}()
	q := &s.shards[0].q
	for deadline := time.Now().Add(10 * time.Second); q.queued.Load() != 1; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the check did not reach the inbox within 10s")
		}
	}
	proceed <- struct{}{}
	if n := <-inSlice; n != 2 {
		t.Fatalf("got slice %d next, want 2", n)
	}
	// The sweeping holds the shard in slice 2 until proceed: the check can
	// only have been answered between the slices.
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("check during the sweep: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the check queued during slice 1 was not answered before slice 2")
	}
}

// TestJournaledChecksAreExactAndSurviveARestart: concurrent checks on a
// journaled System, served by callers and by owners alike, admit exactly
// the limit, and a restart finds every admitted hit.
func TestJournaledChecksAreExactAndSurviveARestart(t *testing.T) {
	t.Parallel()
	cfg := Config{Shards: 4, DataDir: t.TempDir(), Clock: clocktest.New(time.Unix(1_700_000_000, 0))}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ids, perID, limit = 8, 300, 200
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			ctx := context.Background()
			if g%2 == 1 {
				// A ctx that can end: these give up on a busy shard and queue.
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			for i := range ids * perID / 16 {
				d, err := s.Check(ctx, hit(fmt.Sprint("key-", (g+i)%ids), limit))
				if err != nil {
					t.Errorf("Check: %v", err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got, want := allowed.Load(), int64(ids*limit); got != want {
		t.Fatalf("got %d admitted, want %d (%d ids × limit %d)", got, want, ids, limit)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = startSystem(t, cfg)
	for i := range ids {
		peek := hit(fmt.Sprint("key-", i), limit)
		peek.Hits = 0
		if d, err := s.Check(context.Background(), peek); err != nil || d.Count != limit {
			t.Fatalf("key-%d after the restart: got %+v, %v, want count %d", i, d, err, limit)
		}
	}
}
