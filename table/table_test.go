package table

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// t0 is the start of a one-hour window (and of every shorter window that divides an hour).
var t0 = time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestApplyFixedWindow(t *testing.T) {
	t.Parallel()
	type step struct {
		atMs  int64
		hits  int64
		limit int64
		want  Decision
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"first hit is checked against limit 0", []step{
			{0, 1, 0, Decision{Allowed: false, Count: 0, Limit: 0, Remaining: 0, ResetAfter: time.Second, RetryAfter: time.Second}},
		}},
		{"limit admits exactly limit hits", []step{
			{0, 1, 2, Decision{Allowed: true, Count: 1, Limit: 2, Remaining: 1, ResetAfter: time.Second}},
			{100, 1, 2, Decision{Allowed: true, Count: 2, Limit: 2, Remaining: 0, ResetAfter: 900 * time.Millisecond}},
			{250, 1, 2, Decision{Allowed: false, Count: 2, Limit: 2, Remaining: 0, ResetAfter: 750 * time.Millisecond, RetryAfter: 750 * time.Millisecond}},
		}},
		{"window boundary starts a new count", []step{
			{999, 2, 2, Decision{Allowed: true, Count: 2, Limit: 2, Remaining: 0, ResetAfter: time.Millisecond}},
			{999, 1, 2, Decision{Allowed: false, Count: 2, Limit: 2, Remaining: 0, ResetAfter: time.Millisecond, RetryAfter: time.Millisecond}},
			{1000, 1, 2, Decision{Allowed: true, Count: 1, Limit: 2, Remaining: 1, ResetAfter: time.Second}},
		}},
		{"cost larger than the limit is denied and consumes nothing", []step{
			{0, 5, 3, Decision{Allowed: false, Count: 0, Limit: 3, Remaining: 3, ResetAfter: time.Second, RetryAfter: time.Second}},
			{10, 3, 3, Decision{Allowed: true, Count: 3, Limit: 3, Remaining: 0, ResetAfter: 990 * time.Millisecond}},
		}},
		{"cost that does not fit is denied without consuming", []step{
			{0, 2, 3, Decision{Allowed: true, Count: 2, Limit: 3, Remaining: 1, ResetAfter: time.Second}},
			{1, 2, 3, Decision{Allowed: false, Count: 2, Limit: 3, Remaining: 1, ResetAfter: 999 * time.Millisecond, RetryAfter: 999 * time.Millisecond}},
			{2, 1, 3, Decision{Allowed: true, Count: 3, Limit: 3, Remaining: 0, ResetAfter: 998 * time.Millisecond}},
		}},
		{"peek reads without counting", []step{
			{0, 0, 1, Decision{Allowed: true, Count: 0, Limit: 1, Remaining: 1, ResetAfter: time.Second}},
			{1, 1, 1, Decision{Allowed: true, Count: 1, Limit: 1, Remaining: 0, ResetAfter: 999 * time.Millisecond}},
			{2, 0, 1, Decision{Allowed: false, Count: 1, Limit: 1, Remaining: 0, ResetAfter: 998 * time.Millisecond, RetryAfter: 998 * time.Millisecond}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tb := New(Config{})
			for i, s := range c.steps {
				got := tb.Apply(Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: s.limit}, Hits: s.hits}, at(s.atMs))
				if got != s.want {
					t.Fatalf("step %d at %dms: got %+v, want %+v", i, s.atMs, got, s.want)
				}
			}
		})
	}
}

func TestRetryAfterIsExactToTheNanosecond(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	req := Request{ID: "k", Policy: Policy{Scale: time.Minute, Limit: 1}, Hits: 1}
	tb.Apply(req, t0)
	now := t0.Add(12*time.Second + 345*time.Microsecond + 6)
	got := tb.Apply(req, now)
	want := time.Minute - (12*time.Second + 345*time.Microsecond + 6)
	if got.Allowed || got.RetryAfter != want || got.ResetAfter != want {
		t.Fatalf("got %+v, want denied with RetryAfter = ResetAfter = %v", got, want)
	}
}

func TestPeekNeverCreatesABucket(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	for i := range 10 {
		tb.Apply(Request{ID: fmt.Sprint("peek-", i), Policy: Policy{Scale: time.Second, Limit: 5}}, t0)
	}
	tb.Apply(Request{ID: "over", Policy: Policy{Scale: time.Second, Limit: 5}, Hits: 6}, t0)
	if got := tb.Len(); got != 0 {
		t.Fatalf("got %d buckets after peeks and an oversized cost, want 0", got)
	}
}

func TestLimitsDoNotShareCounters(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	a := Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 1}
	b := Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: 2}, Hits: 1}
	c := Request{ID: "k", Policy: Policy{Scale: 2 * time.Second, Limit: 1}, Hits: 1}
	for _, r := range []Request{a, b, c} {
		if d := tb.Apply(r, t0); !d.Allowed || d.Count != 1 {
			t.Fatalf("%+v: got %+v, want the first hit of its own bucket", r, d)
		}
	}
	if got := tb.Len(); got != 3 {
		t.Fatalf("got %d buckets, want 3", got)
	}
}

func TestBucketStamps(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	req := Request{ID: "k", Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 1}
	tb.Apply(req, at(1500))
	tb.Apply(req, at(2500))
	tb.Apply(Request{ID: "k", Policy: Policy{Scale: time.Hour, Limit: 10}, Hits: 0}, at(3500))
	got, ok := tb.Get(req, at(4000))
	want := Bucket{
		ID:         "k",
		Policy:     Policy{Algorithm: FixedWindow, Scale: time.Hour, Limit: 10},
		Window:     t0.UnixMilli() / 3_600_000,
		Count:      2,
		CreatedAt:  at(1500),
		ModifiedAt: at(2500),
	}
	if !ok || got != want {
		t.Fatalf("got %+v (found %v), want %+v", got, ok, want)
	}
}

func TestClockSteppingBackNeverReopensAWindow(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	req := Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 1}
	tb.Apply(req, at(1500))
	if n := tb.DeleteExpired(at(1500), 100); n != 0 {
		t.Fatalf("swept %d live buckets", n)
	}
	if d := tb.Apply(req, at(500)); d.Allowed || d.Count != 1 {
		t.Fatalf("after the clock stepped back: got %+v, want denied with count 1", d)
	}
}

func TestDeleteExpired(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	// 100 ids in a 1s window, 50 in a 10s window, 10 in a 1h window, all at t0.
	for i := range 100 {
		tb.Apply(Request{ID: fmt.Sprint("s", i), Policy: Policy{Scale: time.Second, Limit: 5}, Hits: 1}, t0)
	}
	for i := range 50 {
		tb.Apply(Request{ID: fmt.Sprint("m", i), Policy: Policy{Scale: 10 * time.Second, Limit: 5}, Hits: 1}, t0)
	}
	for i := range 10 {
		tb.Apply(Request{ID: fmt.Sprint("h", i), Policy: Policy{Scale: time.Hour, Limit: 5}, Hits: 1}, t0)
	}
	steps := []struct {
		atMs     int64
		max      int
		want     int
		wantLeft int
	}{
		{999, 1000, 0, 160},      // nothing has ended
		{1000, 30, 30, 130},      // the 1s windows ended; bounded by max
		{1000, 1000, 70, 60},     // the rest of them
		{9999, 1000, 0, 60},      // the 10s windows are open
		{10_000, 1000, 50, 10},   // now they ended
		{3_599_999, 1000, 0, 10}, // the hour is open
		{3_600_000, 1000, 10, 0},
	}
	for i, s := range steps {
		if got := tb.DeleteExpired(at(s.atMs), s.max); got != s.want {
			t.Fatalf("step %d at %dms: deleted %d, want %d", i, s.atMs, got, s.want)
		}
		if got := tb.Len(); got != s.wantLeft {
			t.Fatalf("step %d: %d buckets left, want %d", i, got, s.wantLeft)
		}
	}
	if len(tb.groups) != 0 || tb.due.Len() != 0 {
		t.Fatalf("got %d groups and %d due entries left in an empty table, want 0", len(tb.groups), tb.due.Len())
	}
}

func TestDeleteExpiredNeverDeletesALiveBucket(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	req := Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: 3}, Hits: 1}
	// Windows 0, 1 and 2 each get a bucket; the sweep at 2.5s may delete 0 and 1 only.
	for ms := int64(0); ms < 3000; ms += 1000 {
		tb.Apply(req, at(ms))
		tb.Apply(req, at(ms))
	}
	if got := tb.DeleteExpired(at(2500), 100); got != 2 {
		t.Fatalf("deleted %d, want the 2 ended windows", got)
	}
	if d := tb.Apply(req, at(2600)); d.Count != 3 || !d.Allowed {
		t.Fatalf("open window after the sweep: got %+v, want its third hit", d)
	}
}

func TestBucketTTLDelaysButNeverHastens(t *testing.T) {
	t.Parallel()
	tb := New(Config{BucketTTL: 5 * time.Second})
	tb.Apply(Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: 3}, Hits: 1}, t0)
	if got := tb.DeleteExpired(at(5999), 10); got != 0 {
		t.Fatalf("deleted %d before window end + TTL, want 0", got)
	}
	if got := tb.DeleteExpired(at(6000), 10); got != 1 {
		t.Fatalf("deleted %d at window end + TTL, want 1", got)
	}
}

func TestGroupIDsAreReused(t *testing.T) {
	t.Parallel()
	tb := New(Config{})
	for round := range 5 {
		now := at(int64(round) * 10_000)
		for limit := int64(1); limit <= 100; limit++ {
			tb.Apply(Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: limit}, Hits: 1}, now)
		}
		tb.DeleteExpired(now.Add(time.Second), 1000)
	}
	if got := len(tb.byID); got != 100 {
		t.Fatalf("got %d group ids after 5 rounds of 100 groups, want 100", got)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := Request{ID: "k", Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 1}
	cases := []struct {
		mod   func(*Request)
		field string
	}{
		{func(r *Request) { r.ID = "" }, "id"},
		{func(r *Request) { r.ID = string(make([]byte, MaxIDLen+1)) }, "id"},
		{func(r *Request) { r.Scale = 0 }, "scale"},
		{func(r *Request) { r.Scale = 1500 * time.Microsecond }, "scale"},
		{func(r *Request) { r.Scale = MaxScale + time.Millisecond }, "scale"},
		{func(r *Request) { r.Limit = -1 }, "limit"},
		{func(r *Request) { r.Hits = -1 }, "hits"},
		{func(r *Request) { r.Algorithm = 9 }, "algorithm"},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid request: got %v", err)
	}
	for _, c := range cases {
		r := ok
		c.mod(&r)
		err := r.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want a FieldError on %q matching ErrInvalid", r, err, c.field)
		}
	}
}

// TestAgainstOracle drives a Table and a brute-force model with the same
// random sequence of hits, peeks and sweeps and compares every decision.
func TestAgainstOracle(t *testing.T) {
	t.Parallel()
	rng, seed := seeded(t, 0)
	tb := New(Config{})
	type key struct {
		id            string
		scale, window int64
		limit         int64
	}
	model := map[key]int64{}
	now := int64(0)
	steps := 20_000
	if testing.Short() {
		steps = 2_000
	}
	for i := range steps {
		now += int64(rng.IntN(40))
		if rng.IntN(50) == 0 {
			tb.DeleteExpired(at(now), rng.IntN(20))
			continue
		}
		scale := []int64{10, 100, 250}[rng.IntN(3)]
		req := Request{
			ID:     fmt.Sprint("id", rng.IntN(8)),
			Policy: Policy{Scale: time.Duration(scale) * time.Millisecond, Limit: int64(rng.IntN(6))},
			Hits:   int64(rng.IntN(4)),
		}
		ms := t0.UnixMilli() + now
		k := key{req.ID, scale, ms / scale, req.Limit}
		count := model[k]
		wantAllowed := req.Hits <= req.Limit-count && (req.Hits > 0 || count < req.Limit)
		if wantAllowed {
			count += req.Hits
			model[k] = count
		}
		got := tb.Apply(req, at(now))
		if got.Allowed != wantAllowed || got.Count != count || got.Remaining != req.Limit-count {
			t.Fatalf("step %d (seed %d) %+v at %dms: got %+v, want allowed=%v count=%d", i, seed, req, now, got, wantAllowed, count)
		}
	}
}

func TestBucketKeepsItsOwnCopyOfTheID(t *testing.T) {
	t.Parallel()
	line := "GET /check_rate?id=abc&scale=1000&limit=" + strings.Repeat("0", 4096) + "1 HTTP/1.1"
	id := line[strings.Index(line, "abc"):][:3]
	tb := New(Config{})
	req := Request{ID: id, Policy: Policy{Scale: time.Hour, Limit: 5}, Hits: 1}
	tb.Apply(req, t0)
	b, ok := tb.Get(req, t0)
	if !ok || b.ID != "abc" {
		t.Fatalf("got %+v (found %v), want the bucket of abc", b, ok)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(line)))
	if p := uintptr(unsafe.Pointer(unsafe.StringData(b.ID))); p >= start && p < start+uintptr(len(line)) {
		t.Fatal("the stored id points into the caller's request line, keeping it alive")
	}
}

// seeded returns a generator of a new seed on stream, and the seed, which
// it logs so that a failing run can be told from others.
func seeded(t testing.TB, stream uint64) (*rand.Rand, uint64) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, stream)), seed
}
