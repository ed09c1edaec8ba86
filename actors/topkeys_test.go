package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/actors/topk"
	"github.com/ratelimitd/ratelimitd/table"
)

// topEntry is what a test compares of a topk.Entry.
type topEntry struct {
	ID, Label string
	Count     uint64
}

func entries(keys []topk.Entry) []topEntry {
	out := make([]topEntry, len(keys))
	for i, k := range keys {
		out[i] = topEntry{k.ID, k.Label, k.Count}
	}
	return out
}

// top returns s.Top, failing the test on an error.
func top(t *testing.T, s *System, m topk.Metric, w topk.Window, now time.Time) TopKeys {
	t.Helper()
	tk, err := s.Top(m, w, -1, now)
	if err != nil {
		t.Fatalf("Top(%v, %v): %v", m, w, err)
	}
	return tk
}

func check(t *testing.T, s *System, req table.Request) table.Decision {
	t.Helper()
	d, err := s.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("Check(%+v): %v", req, err)
	}
	return d
}

// TestTopKeysCountChecks: with Config.TopKeys every check's hits count by
// hits under its label (the rule's name, or the ad-hoc policy's text), its
// denied hits by denials, over every shard; peeks and refunds count
// nothing, and a minute later the 1m window is empty while the 15m one
// still holds them.
func TestTopKeysCountChecks(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startSystem(t, Config{Shards: 4, Clock: clk, SweepInterval: -1, TopKeys: true})
	login := table.Request{ID: "alice", Policy: table.Policy{Scale: time.Minute, Limit: 5}, Hits: 1, Namespace: "login"}
	for range 20 {
		check(t, s, login)
	}
	adhoc := table.Request{ID: "bob", Policy: table.Policy{Scale: time.Minute, Limit: 100, Algorithm: table.TokenBucket}, Hits: 3}
	for range 4 {
		check(t, s, adhoc)
	}
	peek := adhoc
	peek.ID, peek.Hits = "carol", 0
	check(t, s, peek)
	refund := adhoc
	refund.Hits = 2
	if _, err := s.Refund(context.Background(), refund); err != nil {
		t.Fatal(err)
	}

	now := clk.Now()
	hits := top(t, s, topk.Hits, topk.Minute, now)
	want := []topEntry{{"alice", "login", 20}, {"bob", "100/1m0s/token_bucket", 12}}
	if got := entries(hits.Keys); !slices.Equal(got, want) || hits.Total != 32 || hits.Bound != 0 {
		t.Errorf("by hits: got %+v (total %d, bound %d), want %+v (total 32, bound 0)", got, hits.Total, hits.Bound, want)
	}
	denials := top(t, s, topk.Denials, topk.Minute, now)
	if got, want := entries(denials.Keys), []topEntry{{"alice", "login", 15}}; !slices.Equal(got, want) || denials.Total != 15 {
		t.Errorf("by denials: got %+v (total %d), want %+v (total 15)", got, denials.Total, want)
	}
	if tk, err := s.Top(topk.Hits, topk.Minute, 1, now); err != nil || len(tk.Keys) != 1 || tk.Keys[0].ID != "alice" {
		t.Errorf("Top(n=1): got %+v, %v; want alice only", tk, err)
	}

	later := now.Add(2 * time.Minute)
	if got := top(t, s, topk.Hits, topk.Minute, later); len(got.Keys) != 0 || got.Total != 0 {
		t.Errorf("1m window 2m later: got %+v, want empty", got)
	}
	if got := entries(top(t, s, topk.Hits, topk.FifteenMinutes, later).Keys); !slices.Equal(got, want) {
		t.Errorf("15m window 2m later: got %+v, want %+v", got, want)
	}
}

// TestTopKeysFullTableAndBatches: a check refused because its table is full
// counts its hits but not as denied (the id's limit did not deny it); in a
// CheckAll, only the check whose own limit denied it counts as denied, not
// the others of the refused batch.
func TestTopKeysFullTableAndBatches(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startSystem(t, Config{Shards: 1, Clock: clk, SweepInterval: -1, MaxBuckets: 2, TopKeys: true})
	one := func(id string, limit int64) table.Request {
		return table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: limit}, Hits: 1, Namespace: "r"}
	}
	batch := []table.Request{one("tight", 1), one("loose", 100)}
	for i, wantAllowed := range []bool{true, false} {
		if _, allowed, err := s.CheckAll(context.Background(), batch); err != nil || allowed != wantAllowed {
			t.Fatalf("CheckAll %d: allowed %v, %v; want %v", i, allowed, err, wantAllowed)
		}
	}
	if d := check(t, s, one("newcomer", 100)); !d.Full {
		t.Fatalf("a third bucket: got %+v, want Full", d)
	}
	now := clk.Now()
	if got, want := entries(top(t, s, topk.Hits, topk.Minute, now).Keys), []topEntry{{"loose", "r", 2}, {"tight", "r", 2}, {"newcomer", "r", 1}}; !slices.Equal(got, want) {
		t.Errorf("by hits: got %+v, want %+v", got, want)
	}
	if got, want := entries(top(t, s, topk.Denials, topk.Minute, now).Keys), []topEntry{{"tight", "r", 1}}; !slices.Equal(got, want) {
		t.Errorf("by denials: got %+v, want %+v", got, want)
	}
}

// TestTopKeysOff: a System without Config.TopKeys tracks nothing and says
// so.
func TestTopKeysOff(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 2, SweepInterval: -1})
	check(t, s, hit("alice", 10))
	if tk, err := s.Top(topk.Hits, topk.Minute, 10, time.Now()); !errors.Is(err, ErrNoTopKeys) || len(tk.Keys) != 0 {
		t.Errorf("Top without TopKeys: got %+v, %v; want ErrNoTopKeys", tk, err)
	}
}

// TestTopKeysAfterCrash: a shard that crashes starts its top keys afresh,
// as it does its table; the other shards keep theirs.
func TestTopKeysAfterCrash(t *testing.T) {
	t.Parallel()
	const shards = 2
	clk := clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startSystem(t, Config{Shards: shards, Clock: clk, SweepInterval: -1, TopKeys: true, applyHook: poisonHook})
	crashed := sameShard("poison", shards, 2)[1]
	var other string
	for i := 0; other == ""; i++ {
		if id := fmt.Sprint("other-", i); shardOf(id, shards) != shardOf("poison", shards) {
			other = id
		}
	}
	check(t, s, hit(crashed, 10))
	check(t, s, hit(other, 10))
	if _, err := s.Check(context.Background(), hit("poison", 10)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("poisoned check: got %v, want ErrUnavailable", err)
	}
	check(t, s, hit(crashed, 10))
	got := entries(top(t, s, topk.Hits, topk.Minute, clk.Now()).Keys)
	want := []topEntry{{crashed, "10/1h0m0s", 1}, {other, "10/1h0m0s", 1}}
	slices.SortFunc(want, func(a, b topEntry) int { return cmp.Compare(a.ID, b.ID) })
	if !slices.Equal(got, want) {
		t.Errorf("after the crash: got %+v, want %+v (the crashed shard's first hit forgotten)", got, want)
	}
}

// TestTopKeysCheckAllocatesNothing: with top keys, a check, by rule or with
// an ad-hoc policy, allocates nothing once its id is known: the policy's
// label is made once per shard, not per check. (AllocsPerRun refuses to
// run in parallel.)
func TestTopKeysCheckAllocatesNothing(t *testing.T) {
	s := startSystem(t, Config{Shards: 1, SweepInterval: -1, TopKeys: true})
	ctx := context.Background()
	for _, req := range []table.Request{hit("alice", 1<<40), {ID: "bob", Policy: table.Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1, Namespace: "api"}} {
		check(t, s, req)
		if n := testing.AllocsPerRun(1000, func() { _, _ = s.Check(ctx, req) }); n != 0 {
			t.Errorf("Check(%+v) with top keys: %v allocations, want 0", req, n)
		}
	}
}

// TestTopKeysSampledAllocatesNothing: a check of a shard that samples
// (10,000 checks at one instant of a manual clock put it past
// TopKeysSampleAbove) allocates nothing either, picked or skipped, by rule
// or with an ad-hoc policy; Top says the hits are sampled. (AllocsPerRun
// refuses to run in parallel.)
func TestTopKeysSampledAllocatesNothing(t *testing.T) {
	clk := clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startSystem(t, Config{Shards: 1, Clock: clk, SweepInterval: -1, TopKeys: true})
	ctx := context.Background()
	for _, req := range []table.Request{hit("alice", 1<<40), {ID: "bob", Policy: table.Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1, Namespace: "api"}} {
		for range 10_000 {
			check(t, s, req)
		}
		if n := testing.AllocsPerRun(5000, func() { _, _ = s.Check(ctx, req) }); n != 0 {
			t.Errorf("Check(%+v) with top keys, sampled: %v allocations, want 0", req, n)
		}
	}
	if tk := top(t, s, topk.Hits, topk.Minute, clk.Now()); !tk.Sampled {
		t.Errorf("Top: not sampled after 30,000 checks at one instant: %+v", tk)
	}
}

// TestTopKeysSampled: by default (DefaultTopKeysSample) the admitted
// checks of a busy shard are sampled and the denied ones all counted.
// Checks 1 ms apart on a manual clock are few enough to count exactly:
// "slow" counts its 500 and Sampled is false. 32,000 admitted checks of
// "busy" and 3,000 denied ones of "hammered" (after its 10 admitted), all
// at one instant: by denials "hammered" counts exactly 3,000 of a total of
// 3,000, Sampled false; by hits Top reports Sample 32 and Sampled, "busy"
// first, within five standard deviations of the sampling's error
// (√(31·32000) ≈ 996) of 32,000, and "hammered" at 3,000 denied hits and
// its admitted ones sampled. Config refuses a sample rate out of range.
func TestTopKeysSampled(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startSystem(t, Config{Shards: 2, Clock: clk, SweepInterval: -1, TopKeys: true})
	slow := table.Request{ID: "slow", Policy: table.Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1, Namespace: "api"}
	for range 500 {
		clk.Advance(time.Millisecond)
		check(t, s, slow)
	}
	hits := top(t, s, topk.Hits, topk.Minute, clk.Now())
	if got, want := entries(hits.Keys), []topEntry{{"slow", "api", 500}}; !slices.Equal(got, want) || hits.Sampled {
		t.Fatalf("slow checks by hits: %+v (sampled %v), want %+v, not sampled", got, hits.Sampled, want)
	}
	clk.Advance(time.Minute) // the slow checks leave the minute's window
	busy := table.Request{ID: "busy", Policy: table.Policy{Scale: time.Hour, Limit: 1 << 40}, Hits: 1, Namespace: "api"}
	hammered := table.Request{ID: "hammered", Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1, Namespace: "api"}
	for range 32_000 {
		check(t, s, busy)
	}
	for i := range 3_010 {
		if d := check(t, s, hammered); d.Allowed != (i < 10) {
			t.Fatalf("hammered check %d: allowed %v", i, d.Allowed)
		}
	}
	now := clk.Now()
	denials := top(t, s, topk.Denials, topk.Minute, now)
	if got, want := entries(denials.Keys), []topEntry{{"hammered", "api", 3_000}}; !slices.Equal(got, want) || denials.Total != 3_000 || denials.Sampled {
		t.Errorf("by denials: got %+v (total %d, sampled %v), want %+v (total 3000, not sampled)", got, denials.Total, denials.Sampled, want)
	}
	hits = top(t, s, topk.Hits, topk.Minute, now)
	got := entries(hits.Keys)
	if !hits.Sampled || hits.Sample != DefaultTopKeysSample {
		t.Errorf("by hits: sampled %v, sample %d; want true, %d", hits.Sampled, hits.Sample, DefaultTopKeysSample)
	}
	if len(got) == 0 || got[0].ID != "busy" || got[0].Count < 32_000-4980 || got[0].Count > 32_000+4980 {
		t.Fatalf("by hits: got %+v, want busy first, 32000 ± 4980", got)
	}
	for _, e := range got[1:] {
		if e.ID != "hammered" || e.Count < 3_000 || e.Count > 3_010+10*DefaultTopKeysSample {
			t.Errorf("by hits: %+v, want hammered at 3000 + its 10 admitted, sampled", e)
		}
	}
	t.Logf("by hits: %+v (total %d)", got, hits.Total)
	for _, bad := range []int{-1, 3, topk.MaxSample + 1} {
		if _, err := Start(context.Background(), Config{TopKeys: true, TopKeysSample: bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("TopKeysSample %d: %v, want ErrConfig", bad, err)
		}
	}
}

// TestTopKeysCapacity: the sketches hold 256 counters per summary in all,
// at least 8 and at most topk.DefaultCapacity per shard, and a front of 16
// ids per counter.
func TestTopKeysCapacity(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ shards, want int }{{1, 32}, {8, 32}, {9, 29}, {16, 16}, {32, 8}, {256, 8}, {MaxShards, 8}} {
		if got := topKeysCapacity(c.shards); got != c.want {
			t.Errorf("topKeysCapacity(%d) = %d, want %d", c.shards, got, c.want)
		}
	}
	// Top's documentation (and README's) of a shard's sketch's memory.
	for _, c := range []struct{ shards, bytes int }{{8, 414_328}, {64, 112_120}} {
		if got := newSketch(&Config{Shards: c.shards}).Bytes(); got != c.bytes {
			t.Errorf("%d shards: a sketch of %d bytes, want %d", c.shards, got, c.bytes)
		}
	}
}

// TestIDHashIsTopkHash: the hash that picks an id's shard is the one the
// shard's sketch takes (ObserveHashed), and stays what it was: shards
// depend on it across restarts.
func TestIDHashIsTopkHash(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "alice", "user-7919", "<img src=x onerror=alert(1)>", string(make([]byte, 300))} {
		if got, want := idHash(id), topk.Hash(id); got != want {
			t.Errorf("idHash(%q) = %#x, topk.Hash = %#x", id, got, want)
		}
	}
	// FNV-1a 64 of "alice" and "user-7919".
	if got := idHash("alice"); got != 0x508b2abb65a03907 {
		t.Errorf(`idHash("alice") = %#x, want 0x508b2abb65a03907`, got)
	}
	if got, want := shardOf("user-7919", 12), int(uint64(0xb1f62164af10cc6f)%12); got != want {
		t.Errorf(`shardOf("user-7919", 12) = %d, want %d`, got, want)
	}
}

// TestTopKeysCallWithoutHash: a call that reaches its shard without its
// id's hash (one not made by System.call) is counted under the id's own
// hash: a long id is not confused with another of the same first bytes.
func TestTopKeysCallWithoutHash(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startSystem(t, Config{Shards: 1, Clock: clk, SweepInterval: -1, TopKeys: true})
	long := strings.Repeat("x", topk.IDBytes)
	sh := s.shards[0]
	for i, id := range []string{long + "a", long + "b", long + "b"} {
		c := &call{op: opCheck, req: table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, done: make(chan struct{}, 1)}
		if served, err := s.serveDirect(context.Background(), sh, c); !served || err != nil || c.err != nil {
			t.Fatalf("serveDirect %d: %v, %v, %v", i, served, err, c.err)
		}
	}
	keys := top(t, s, topk.Hits, topk.Minute, clk.Now()).Keys
	var counts []uint64
	for _, k := range keys {
		counts = append(counts, k.Count)
	}
	if !slices.Equal(counts, []uint64{2, 1}) {
		t.Errorf("two long ids of the same first bytes: counts %v, want [2 1]", counts)
	}
}

// TestShardLayout: in every shard of a System, the sampler, whose count
// a check writes at each admitted check with top keys, shares mu's
// 64-byte line, which every check writes anyway; the table and sketch
// pointers, which checks only read holding mu, are in another line,
// since the callers waiting for the shard keep taking mu's line from its
// holder (see shard).
func TestShardLayout(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 8, SweepInterval: -1, TopKeys: true})
	lines := func(p unsafe.Pointer, size uintptr) [2]uintptr {
		return [2]uintptr{uintptr(p) / 64, (uintptr(p) + size - 1) / 64}
	}
	for _, sh := range s.shards {
		mu := lines(unsafe.Pointer(&sh.mu), unsafe.Sizeof(sh.mu))
		if got := lines(unsafe.Pointer(&sh.sample), unsafe.Sizeof(sh.sample)); mu[0] != mu[1] || got != mu {
			t.Errorf("shard %d: mu in lines %v, the sampler in %v; want one line for both", sh.index, mu, got)
		}
		for name, got := range map[string][2]uintptr{
			"table": lines(unsafe.Pointer(&sh.table), unsafe.Sizeof(sh.table)),
			"top":   lines(unsafe.Pointer(&sh.top), unsafe.Sizeof(sh.top)),
		} {
			if got[0] == mu[0] || got[1] == mu[0] {
				t.Errorf("shard %d: %s in lines %v, with mu", sh.index, name, got)
			}
		}
	}
}
