package actors

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestLimiterCountsAsCheck(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	s := startSystem(t, Config{Clock: clk, SweepInterval: -1})
	ctx := context.Background()
	p := table.Policy{Scale: time.Minute, Limit: 3}
	l, err := s.Limiter(p)
	if err != nil {
		t.Fatal(err)
	}
	if l.Policy() != p {
		t.Errorf("Policy() = %+v, want %+v", l.Policy(), p)
	}
	for i, want := range []bool{true, true, true, false, false} {
		ok, err := l.Allow(ctx, "alice")
		if err != nil || ok != want {
			t.Fatalf("Allow #%d = %v, %v; want %v", i+1, ok, err, want)
		}
	}
	// The Limiter's buckets are Check's for the same policy, and back.
	d, err := s.Check(ctx, table.Request{ID: "alice", Policy: p})
	if err != nil || d.Allowed || d.Count != 3 || d.Remaining != 0 || d.RetryAfter != time.Minute-time.Duration(1_700_000_000%60)*time.Second {
		t.Errorf("Check's peek after 5 Allows: %+v, %v", d, err)
	}
	if d, err := s.Check(ctx, table.Request{ID: "bob", Policy: p, Hits: 2}); err != nil || !d.Allowed || d.Count != 2 {
		t.Fatalf("Check bob: %+v, %v", d, err)
	}
	d, err = l.Check(ctx, "bob", 1)
	if err != nil || !d.Allowed || d.Count != 3 || d.Remaining != 0 || d.Limit != 3 {
		t.Errorf("Limiter.Check bob, 1 hit: %+v, %v", d, err)
	}
	if d, err := l.Check(ctx, "bob", 0); err != nil || d.Allowed || d.Count != 3 {
		t.Errorf("Limiter.Check bob, a peek at the limit: %+v, %v", d, err)
	}
	// A cost that does not fit is denied and consumes nothing.
	if d, err := l.Check(ctx, "carol", 4); err != nil || d.Allowed || d.Count != 0 {
		t.Errorf("Limiter.Check carol, 4 hits of 3: %+v, %v", d, err)
	}
	// Another policy is other buckets; the window's end frees alice.
	other, err := s.Limiter(table.Policy{Scale: time.Minute, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := other.Check(ctx, "alice", 1); err != nil || !d.Allowed || d.Count != 1 {
		t.Errorf("alice under limit 5: %+v, %v", d, err)
	}
	clk.Advance(time.Minute)
	if ok, err := l.Allow(ctx, "alice"); !ok || err != nil {
		t.Errorf("alice in the next window: %v, %v", ok, err)
	}
}

func TestLimiterRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{})
	for _, tc := range []struct {
		p     table.Policy
		field string
	}{
		{table.Policy{Limit: 10}, "scale"},
		{table.Policy{Scale: time.Microsecond, Limit: 10}, "scale"},
		{table.Policy{Scale: time.Second, Limit: -1}, "limit"},
		{table.Policy{Scale: time.Second, Limit: 1, Burst: -1}, "burst"},
		{table.Policy{Scale: time.Second, Limit: 1, Algorithm: table.Algorithm(99)}, "algorithm"},
	} {
		l, err := s.Limiter(tc.p)
		var fe *table.FieldError
		if l != nil || !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, table.ErrInvalid) {
			t.Errorf("Limiter(%+v) = %v, %v; want a FieldError of %q", tc.p, l, err, tc.field)
		}
	}
	l, err := s.Limiter(table.Policy{Scale: time.Second, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		id    string
		hits  int64
		field string
	}{
		{"", 1, "id"},
		{string(make([]byte, table.MaxIDLen+1)), 1, "id"},
		{"bad\xff", 1, "id"},
		{"ok", -1, "hits"},
	} {
		d, err := l.Check(ctx, tc.id, tc.hits)
		var fe *table.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || d != (table.Decision{}) {
			t.Errorf("Check(%.10q, %d) = %+v, %v; want a FieldError of %q", tc.id, tc.hits, d, err, tc.field)
		}
		if tc.hits == 1 {
			if ok, err := l.Allow(ctx, tc.id); ok || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Allow(%.10q) = %v, %v; want a FieldError of %q", tc.id, ok, err, tc.field)
			}
		}
	}
	// Nothing was counted by the refused calls.
	if d, err := l.Check(ctx, "ok", 0); err != nil || d.Count != 0 {
		t.Errorf("peek at ok: %+v, %v", d, err)
	}
}

// TestLimiterExactUnderConcurrency: however many goroutines ask, a bucket
// admits its limit and no more, through a Limiter as through Check.
func TestLimiterExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 4, SweepInterval: -1})
	const ids, limit, goroutines, tries = 5, 300, 16, 200
	l, err := s.Limiter(table.Policy{Scale: time.Hour, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var admitted [ids]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range tries {
				k := (g + i) % ids
				ok, err := l.Allow(ctx, "user-"+strconv.Itoa(k))
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range ids {
		if n := admitted[k].Load(); n != limit {
			t.Errorf("user-%d: %d admitted, want exactly %d (of %d tries)", k, n, limit, goroutines*tries/ids)
		}
	}
}

// TestLimiterAllocatesNothing: a check through a Limiter of an existing
// bucket allocates nothing, Allow or Check. (AllocsPerRun refuses to run in
// parallel.)
func TestLimiterAllocatesNothing(t *testing.T) {
	s := startSystem(t, Config{SweepInterval: -1}) // nothing else allocates meanwhile
	l, err := s.Limiter(table.Policy{Scale: time.Hour, Limit: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := []string{"a", "bb", "ccc", "dddd"}
	for _, id := range ids {
		if ok, err := l.Allow(ctx, id); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		i++
		if ok, err := l.Allow(ctx, ids[i%len(ids)]); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}); n != 0 {
		t.Errorf("Allow: %v allocations a check, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		i++
		if d, err := l.Check(ctx, ids[i%len(ids)], 1); !d.Allowed || err != nil {
			t.Fatal(d, err)
		}
	}); n != 0 {
		t.Errorf("Check: %v allocations a check, want 0", n)
	}
}

func TestLimiterAfterStop(t *testing.T) {
	t.Parallel()
	s, err := Start(context.Background(), Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Limiter(table.Policy{Scale: time.Second, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Allow(context.Background(), "a"); ok || !errors.Is(err, ErrStopped) {
		t.Errorf("Allow after Stop: %v, %v; want ErrStopped", ok, err)
	}
}

// BenchmarkLimiter measures Limiter.Allow against Check with a request
// written for each call, as a caller with a fixed limit writes it (a
// literal of the id and the policy), at 1k keys on one System, in
// alternating rounds (see pairedChecks): x-check is the Limiter's checks/s
// ÷ Check's in the same round, the median over the rounds. p=1 runs
// GOMAXPROCS goroutines.
func BenchmarkLimiter(b *testing.B) {
	ids := make([]string, benchKeys)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i*7919)
	}
	p := table.Policy{Scale: time.Hour, Limit: 1 << 50}
	for _, par := range []int{1, 64} {
		b.Run("p="+strconv.Itoa(par), func(b *testing.B) {
			s := startSystem(b, Config{})
			l, err := s.Limiter(p)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var next atomic.Uint64
			loop := func(allow func(id string) (bool, error)) func(int) func(int) bool {
				return func(int) func(int) bool {
					at := int(next.Add(7))
					return func(n int) bool {
						i := at
						defer func() { at = i }()
						for range n {
							i++
							if ok, err := allow(ids[i%len(ids)]); !ok || err != nil {
								b.Errorf("check: %v, %v", ok, err)
								return false
							}
						}
						return true
					}
				}
			}
			check := loop(func(id string) (bool, error) {
				d, err := s.Check(ctx, table.Request{ID: id, Policy: p, Hits: 1})
				return d.Allowed, err
			})
			allow := loop(func(id string) (bool, error) { return l.Allow(ctx, id) })
			b.ReportAllocs()
			x, rate, base := alternating(b, par*runtime.GOMAXPROCS(0), check, allow)
			b.ReportMetric(rate, "checks/s")
			b.ReportMetric(base, "check-checks/s")
			b.ReportMetric(x, "x-check")
		})
	}
}

// TestLimiterHonoursContext: a check whose context has ended is not taken,
// and counts nothing.
func TestLimiterHonoursContext(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{SweepInterval: -1})
	l, err := s.Limiter(table.Policy{Scale: time.Hour, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := l.Allow(ctx, "a"); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("Allow with a cancelled context: %v, %v; want context.Canceled", ok, err)
	}
	if d, err := l.Check(ctx, "a", 2); d.Allowed || !errors.Is(err, context.Canceled) {
		t.Errorf("Check with a cancelled context: %+v, %v; want context.Canceled", d, err)
	}
	if d, err := l.Check(context.Background(), "a", 0); err != nil || d.Count != 0 {
		t.Errorf("peek after the cancelled checks: %+v, %v; want count 0", d, err)
	}
}
