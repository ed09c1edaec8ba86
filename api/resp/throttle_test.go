package resp_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/resp"
)

// TestThrottleRateLimits is redis-cell's it_rate_limits (src/cell/mod.rs,
// brandur/redis-cell v0.5.0): max_burst 4 at 1 per second, 15 steps on a
// clock that moves only when the table says. Its expectations are in
// durations; here they are the reply's seconds, rounded as redis-cell
// rounds them (3.9 s → 4).
func TestThrottleRateLimits(t *testing.T) {
	t.Parallel()
	sys, clock := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	steps := []struct {
		at       time.Duration // since the start
		quantity int64
		want     []int64 // limited, limit, remaining, retry_after, reset_after
	}{
		// You can never make a request larger than the maximum.
		{0, 6, []int64{1, 5, 5, -1, 0}},
		// Rate limit normal requests appropriately.
		{0, 1, []int64{0, 5, 4, -1, 1}},
		{0, 1, []int64{0, 5, 3, -1, 2}},
		{0, 1, []int64{0, 5, 2, -1, 3}},
		{0, 1, []int64{0, 5, 1, -1, 4}},
		{0, 1, []int64{0, 5, 0, -1, 5}},
		{0, 1, []int64{1, 5, 0, 1, 5}},
		{3000 * time.Millisecond, 1, []int64{0, 5, 2, -1, 3}},
		{3100 * time.Millisecond, 1, []int64{0, 5, 1, -1, 4}}, // reset 3.9 s
		{4000 * time.Millisecond, 1, []int64{0, 5, 1, -1, 4}},
		{8000 * time.Millisecond, 1, []int64{0, 5, 4, -1, 1}},
		{9500 * time.Millisecond, 1, []int64{0, 5, 4, -1, 1}},
		// Zero-volume request just peeks at the state.
		{9500 * time.Millisecond, 0, []int64{0, 5, 4, -1, 1}},
		// High-volume request uses up more of the limit.
		{9500 * time.Millisecond, 2, []int64{0, 5, 2, -1, 3}},
		// Large requests cannot exceed limits.
		{9500 * time.Millisecond, 5, []int64{1, 5, 2, 3, 3}},
	}
	start := clock.Now()
	for i, s := range steps {
		clock.Advance(start.Add(s.at).Sub(clock.Now()))
		got := throttle(t, c, "foo", 4, 1, 1, s.quantity)
		if !slices.Equal(got, s.want) {
			t.Errorf("case %d (at %v, quantity %d): got %v, want %v", i, s.at, s.quantity, got, s.want)
		}
	}
}

// TestThrottleItWorks is redis-cell's end-to-end test it_works
// (tests/e2e.rs): max_burst 0, 1 per 2 s: allowed, then limited with a
// retry of 2 s, then allowed again once those 2 s have passed.
func TestThrottleItWorks(t *testing.T) {
	t.Parallel()
	sys, clock := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	cmd := []any{"user123", 0, 1, 2, 1}
	if got, want := throttle(t, c, cmd...), []int64{0, 1, 0, -1, 2}; !slices.Equal(got, want) {
		t.Fatalf("first: got %v, want %v", got, want)
	}
	got := throttle(t, c, cmd...)
	if want := []int64{1, 1, 0, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("second: got %v, want %v", got, want)
	}
	clock.Advance(time.Duration(got[3]) * time.Second)
	if got, want := throttle(t, c, cmd...), []int64{0, 1, 0, -1, 2}; !slices.Equal(got, want) {
		t.Fatalf("after the retry: got %v, want %v", got, want)
	}
}

// TestThrottleEdges checks the cases of PROTOCOLS.md §D.2 verified on the
// real module: a quantity of max_burst+1 on a fresh key is allowed and
// leaves nothing; one more is denied with retry -1 and consumes nothing;
// quantity 0 is a peek that is allowed and stores nothing, even on a full
// bucket.
func TestThrottleEdges(t *testing.T) {
	t.Parallel()
	sys, clock := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	steps := []struct {
		key  string
		args []any
		want []int64
	}{
		// 15 30 60: 1 token per 2 s, a bucket of 16.
		{"whole", []any{15, 30, 60, 16}, []int64{0, 16, 0, -1, 32}},
		{"whole", []any{15, 30, 60, 1}, []int64{1, 16, 0, 2, 32}},
		{"over", []any{15, 30, 60, 17}, []int64{1, 16, 16, -1, 0}},
		{"over", []any{15, 30, 60, 1}, []int64{0, 16, 15, -1, 2}}, // the 17 took nothing
		{"peek", []any{15, 30, 60, 0}, []int64{0, 16, 16, -1, 0}},
		{"peek", []any{15, 30, 60, 0}, []int64{0, 16, 16, -1, 0}}, // stored nothing
		{"peek", []any{15, 30, 60, 16}, []int64{0, 16, 0, -1, 32}},
		{"peek", []any{15, 30, 60, 0}, []int64{0, 16, 0, -1, 32}}, // full: still allowed
		{"default", []any{15, 30, 60}, []int64{0, 16, 15, -1, 2}}, // quantity 1
		// Sub-second parts: 1 per 3 s leaves 0.5 s after 2.5 s; 10 per
		// second has a 100 ms emission.
		{"third", []any{0, 1, 3}, []int64{0, 1, 0, -1, 3}},
		{"tenth", []any{0, 10, 1}, []int64{0, 1, 0, -1, 1}},
		{"tenth", []any{0, 10, 1}, []int64{1, 1, 0, 1, 1}},
	}
	for i, s := range steps {
		got := throttle(t, c, append([]any{s.key}, s.args...)...)
		if !slices.Equal(got, s.want) {
			t.Errorf("step %d: CL.THROTTLE %s %v: got %v, want %v", i, s.key, s.args, got, s.want)
		}
	}
	clock.Advance(2500 * time.Millisecond)
	if got, want := throttle(t, c, "third", 0, 1, 3, 0), []int64{0, 1, 0, -1, 1}; !slices.Equal(got, want) {
		t.Errorf("peek 0.5 s before refill: got %v, want %v", got, want)
	}
	clock.Advance(499*time.Millisecond + 500*time.Microsecond)
	if got, want := throttle(t, c, "third", 0, 1, 3, 0), []int64{0, 1, 0, -1, 0}; !slices.Equal(got, want) {
		t.Errorf("peek 0.5 ms before refill (under a millisecond rounds to 0): got %v, want %v", got, want)
	}
}

// TestThrottleErrors checks the error replies: redis-cell's own, byte for
// byte ("Cell error: Store error: ...", which Redis sends without "ERR"),
// and "ERR ARG: RULE" where redis-cell crashes, overflows or misbehaves.
func TestThrottleErrors(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	usage := "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"k", 1, 1}, usage},
		{[]any{"k", 1, 1, 1, 1, 1}, usage},
		{[]any{"k", "x", 1, 1}, "Cell error: Store error: Couldn't parse as integer: x"},
		{[]any{"k", 1, "1.5", 1}, "Cell error: Store error: Couldn't parse as integer: 1.5"},
		{[]any{"k", 1, 1, "9223372036854775808"}, "Cell error: Store error: Couldn't parse as integer: 9223372036854775808"},
		{[]any{"k", 1, 1, 1, ""}, "Cell error: Store error: Couldn't parse as integer: "},
		{[]any{"k", 1, 1, 1, "a\x00b"}, "Cell error: Store error: Couldn't parse as integer: a"},
		{[]any{"k", 1, 1, 1, "a\r\nb"}, "Cell error: Store error: Couldn't parse as integer: a  b"},
		{[]any{"k", 1, 0, 1}, "Cell error: Store error: Zero rates are not supported"},
		{[]any{"k", 1, 1, 0}, "Cell error: Store error: Zero rates are not supported"},
		{[]any{"k", -1, 1, 1}, "ERR max_burst: must be between 0 and 9223372036854775806"},
		{[]any{"k", "9223372036854775807", 1, 1}, "ERR max_burst: must be between 0 and 9223372036854775806"},
		{[]any{"k", 1, -1, 1}, "ERR count: must be at least 1"},
		{[]any{"k", 1, 1, -1}, "ERR period: must be between 1 and 31622400 seconds"},
		{[]any{"k", 1, 1, 31622401}, "ERR period: must be between 1 and 31622400 seconds"},
		{[]any{"k", 1, 1, 1, -1}, "ERR quantity: must not be negative"},
		{[]any{"k", 31622400, 1, 1}, "ERR max_burst: (max_burst+1) × period/count, the time the bucket takes to refill, must be at most 8784h0m0s"},
		{[]any{"", 1, 1, 1}, "ERR key: must not be empty"},
		{[]any{strings.Repeat("k", 1025), 1, 1, 1}, "ERR key: must be at most 1024 bytes"},
		{[]any{"\xff", 1, 1, 1}, "ERR key: must be valid UTF-8"},
	}
	for _, tc := range cases {
		if got := doErr(t, c, append([]any{"cl.throttle"}, tc.args...)...); got != tc.want {
			t.Errorf("CL.THROTTLE %q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	// The largest bucket that refills within the longest scale is fine.
	if got, want := throttle(t, c, "k", 31622399, 1, 1), []int64{0, 31622400, 31622399, -1, 1}; !slices.Equal(got, want) {
		t.Errorf("largest bucket: got %v, want %v", got, want)
	}
}

// TestThrottleApart checks that CL.THROTTLE keys count apart from RL.CHECK
// ids of the same policy and from rules.
func TestThrottleApart(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	ctx := context.Background()
	// CL.THROTTLE k 0 1 1 is token_bucket 1 per 1 s, bucket 1.
	if got, want := throttle(t, c, "k", 0, 1, 1), []int64{0, 1, 0, -1, 1}; !slices.Equal(got, want) {
		t.Fatalf("CL.THROTTLE: got %v, want %v", got, want)
	}
	got, err := c.Do(ctx, "RL.CHECK", "k", "1s", 1, "ALGORITHM", "token_bucket", "BURST", 1).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 1, 1, 0, 1000, 0}; !slices.Equal(got, want) {
		t.Errorf("RL.CHECK of the same id and policy: got %v, want %v (a bucket of its own)", got, want)
	}
}
