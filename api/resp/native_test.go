package resp_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/api/resp"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// step is one command and the reply it must get: integers, or an error.
type step struct {
	args []any
	want []int64
	err  string
}

// runSteps sends each step's command in turn and checks its reply.
func runSteps(t *testing.T, c *redis.Client, steps []step) {
	t.Helper()
	for i, s := range steps {
		got, err := c.Do(context.Background(), s.args...).Int64Slice()
		switch {
		case s.err != "":
			if err == nil || err.Error() != s.err {
				t.Errorf("step %d: %q: got %v, %v; want error %q", i, s.args, got, err, s.err)
			}
		case err != nil:
			t.Errorf("step %d: %q: %v", i, s.args, err)
		case !slices.Equal(got, s.want):
			t.Errorf("step %d: %q: got %v, want %v", i, s.args, got, s.want)
		}
	}
}

// testRules is a rules store with an enforced, a shadow and a token bucket
// rule.
func testRules(t testing.TB) *rules.Store {
	t.Helper()
	st, err := rules.NewStore([]rules.Rule{
		{Name: "api", Policy: table.Policy{Scale: time.Second, Limit: 2}},
		{Name: "shadow", Policy: table.Policy{Scale: time.Second, Limit: 1}, Shadow: true},
		{Name: "bucket", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Minute, Limit: 60, Burst: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNativeCheck checks RL.CHECK against check_rate's semantics and JSON
// numbers: [allowed, count, limit, remaining, reset_ms, retry_after_ms].
func TestNativeCheck(t *testing.T) {
	t.Parallel()
	sys, clock := manualSystem(t) // epoch is a whole second: a 1 s window has 1000 ms left
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	runSteps(t, c, []step{
		{args: []any{"RL.CHECK", "u", 1000, 2}, want: []int64{1, 1, 2, 1, 1000, 0}},
		{args: []any{"rl.check", "u", "1s", 2}, want: []int64{1, 2, 2, 0, 1000, 0}}, // the same bucket
		{args: []any{"RL.CHECK", "u", 1000, 2}, want: []int64{0, 2, 2, 0, 1000, 1000}},
		{args: []any{"RL.CHECK", "u", 1000, 2, "HITS", 0}, want: []int64{0, 2, 2, 0, 1000, 1000}}, // peek
		{args: []any{"RL.CHECK", "u", 1000, 3}, want: []int64{1, 1, 3, 2, 1000, 0}},               // another limit, another bucket
		{args: []any{"RL.CHECK", "v", "1m", 10, "hits", 4}, want: []int64{1, 4, 10, 6, 60000, 0}},
		{args: []any{"RL.CHECK", "v", "1m", 10, "HITS", 7}, want: []int64{0, 4, 10, 6, 60000, 60000}},
		{args: []any{"RL.CHECK", "w", "1m", 60, "ALGORITHM", "token_bucket", "BURST", 2}, want: []int64{1, 1, 2, 1, 1000, 0}},
		{args: []any{"RL.CHECK", "w", "1m", 60, "BURST", 2, "ALGORITHM", "token_bucket", "HITS", 2}, want: []int64{0, 1, 2, 1, 1000, 1000}},
		{args: []any{"RL.CHECK", "x", "1s", 1, "ALGORITHM", "sliding_window"}, want: []int64{1, 1, 1, 0, 2000, 0}},
	})
	clock.Advance(1500 * time.Millisecond)
	runSteps(t, c, []step{
		{args: []any{"RL.CHECK", "u", 1000, 2}, want: []int64{1, 1, 2, 1, 500, 0}},
		{args: []any{"RL.CHECK", "w", "1m", 60, "ALGORITHM", "token_bucket", "BURST", 2, "HITS", 2}, want: []int64{1, 2, 2, 0, 2000, 0}},
	})
}

// TestNativeErrors checks the error replies to bad RL.* arguments: "ERR
// FIELD: RULE", in check_rate's words.
func TestNativeErrors(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys, Rules: testRules(t)})
	c := newClient(t, addr, 1, "")
	runSteps(t, c, []step{
		{args: []any{"RL.CHECK", "u", 1000}, err: "ERR wrong number of arguments for 'rl.check' command"},
		{args: []any{"RL.RULE", "api"}, err: "ERR wrong number of arguments for 'rl.rule' command"},
		{args: []any{"RL.REFUND", "u", 1000, 2}, err: "ERR hits: is required"},
		{args: []any{"RL.CHECK", "u", "soon", 2}, err: "ERR scale: must be a whole number of milliseconds, or a duration such as 30s"},
		{args: []any{"RL.CHECK", "u", 0, 2}, err: "ERR scale: must be between 1ms and 8784h0m0s"},
		{args: []any{"RL.CHECK", "u", "99999999999999999999", 2}, err: "ERR scale: must be between 1ms and 8784h0m0s"},
		{args: []any{"RL.CHECK", "u", "1.5ms", 2}, err: "ERR scale: must be a whole number of milliseconds"},
		{args: []any{"RL.CHECK", "u", 1000, 0}, err: "ERR limit: must be an integer between 1 and 9223372036854775807"},
		{args: []any{"RL.CHECK", "u", 1000, -2}, err: "ERR limit: must be an integer between 1 and 9223372036854775807"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "HITS", -1}, err: "ERR hits: must be an integer between 0 and 9223372036854775807"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "HITS"}, err: "ERR hits: must be followed by its value"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "HITS", 1, "hits", 1}, err: "ERR hits: must not be repeated"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "COST", 1}, err: "ERR cost: is not a known parameter"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "WINDOW", 1}, err: "ERR window: is not a known parameter"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "ALGORITHM", "gcra"}, err: "ERR algorithm: must be one of: fixed_window, sliding_window, token_bucket, leaky_bucket"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "ALGORITHM", ""}, err: "ERR algorithm: must be one of: fixed_window, sliding_window, token_bucket, leaky_bucket"},
		{args: []any{"RL.CHECK", "u", 1000, 2, "BURST", "x"}, err: "ERR burst: must be an integer between 0 and 9223372036854775807"},
		{args: []any{"RL.CHECK", "u", "8784h", 1, "ALGORITHM", "token_bucket", "BURST", 2}, err: "ERR burst: burst × scale/limit (the time to refill) must be at most 8784h0m0s"},
		{args: []any{"RL.CHECK", "", 1000, 2}, err: "ERR id: is required"},
		{args: []any{"RL.CHECK", strings.Repeat("i", 1025), 1000, 2}, err: "ERR id: must be at most 1024 bytes"},
		{args: []any{"RL.CHECK", "\xfe", 1000, 2}, err: "ERR id: must be valid UTF-8"},
		{args: []any{"RL.RULE", "nope", "u"}, err: "ERR rule: is not a configured rule"},
		{args: []any{"RL.RULE", "api", "u", "ALGORITHM", "token_bucket"}, err: "ERR algorithm: is not a known parameter"},
		{args: []any{"RL.RULE", "api", "", "HITS", 1}, err: "ERR id: is required"},
		{args: []any{"RL.REFUND", "u", 1000, 2, "HITS", 0}, err: "ERR hits: must be an integer between 1 and 9223372036854775807: the hits to give back"},
		{args: []any{"RL.REFUND", "u", 1000, 2, "HITS", -3}, err: "ERR hits: must be an integer between 1 and 9223372036854775807: the hits to give back"},
		{args: []any{"RL.REFUND", "u", 1000, 2, "HITS", 1, "WINDOW", 0}, err: "ERR window: must be the Ratelimit-Window of the check whose hits are given back: an integer between 1 and 9223372036854775807"},
		{args: []any{"RL.REFUNDRULE", "api", "u"}, err: "ERR hits: is required"},
	})
	// Without a rules store.
	_, addr2 := startServer(t, resp.Options{Checker: sys})
	runSteps(t, newClient(t, addr2, 1, ""), []step{
		{args: []any{"RL.RULE", "api", "u"}, err: "ERR rule: no rules are configured"},
		{args: []any{"RL.REFUNDRULE", "api", "u", "HITS", 1}, err: "ERR rule: no rules are configured"},
	})
}

// TestNativeRule checks RL.RULE and RL.REFUNDRULE: the rule's limit, in
// its namespace (apart from RL.CHECK of the same policy), a shadow rule's
// denial answered as allowed with the real numbers.
func TestNativeRule(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys, Rules: testRules(t)})
	c := newClient(t, addr, 1, "")
	runSteps(t, c, []step{
		{args: []any{"RL.RULE", "api", "u"}, want: []int64{1, 1, 2, 1, 1000, 0}},
		{args: []any{"RL.RULE", "api", "u", "HITS", 1}, want: []int64{1, 2, 2, 0, 1000, 0}},
		{args: []any{"RL.RULE", "api", "u"}, want: []int64{0, 2, 2, 0, 1000, 1000}},
		{args: []any{"RL.CHECK", "u", 1000, 2}, want: []int64{1, 1, 2, 1, 1000, 0}}, // apart
		{args: []any{"RL.REFUNDRULE", "api", "u", "HITS", 1}, want: []int64{1, 1, 2, 1, 1000, 0}},
		{args: []any{"RL.RULE", "api", "u"}, want: []int64{1, 2, 2, 0, 1000, 0}},
		{args: []any{"RL.RULE", "shadow", "u"}, want: []int64{1, 1, 1, 0, 1000, 0}},
		{args: []any{"RL.RULE", "shadow", "u"}, want: []int64{1, 1, 1, 0, 1000, 1000}}, // denied, let through
		{args: []any{"RL.RULE", "bucket", "u", "HITS", 3}, want: []int64{1, 3, 3, 0, 3000, 0}},
		{args: []any{"RL.RULE", "bucket", "u", "HITS", 0}, want: []int64{0, 3, 3, 0, 3000, 1000}},
	})
}

// TestNativeRefund checks RL.REFUND: the hits given back to the bucket of
// the same policy, answered with the peek after it.
func TestNativeRefund(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	runSteps(t, c, []step{
		{args: []any{"RL.CHECK", "u", "1m", 3, "HITS", 3}, want: []int64{1, 3, 3, 0, 60000, 0}},
		{args: []any{"RL.REFUND", "u", "1m", 3, "HITS", 2}, want: []int64{1, 1, 3, 2, 60000, 0}},
		{args: []any{"RL.REFUND", "u", "1m", 3, "HITS", 5}, want: []int64{1, 0, 3, 3, 60000, 0}}, // never below empty
		{args: []any{"RL.CHECK", "t", "1m", 60, "ALGORITHM", "token_bucket", "HITS", 60}, want: []int64{1, 60, 60, 0, 60000, 0}},
		{args: []any{"RL.REFUND", "t", "1m", 60, "ALGORITHM", "token_bucket", "HITS", 10}, want: []int64{1, 50, 60, 10, 50000, 0}},
		{args: []any{"RL.REFUND", "u", "1m", 3, "HITS", 1, "WINDOW", 1}, want: []int64{1, 0, 3, 3, 60000, 0}}, // a window long over: nothing
	})
}

// TestNativeFull checks the reply to a check refused because the rate
// limiter is full: check_rate's 503 message.
func TestNativeFull(t *testing.T) {
	t.Parallel()
	sys, err := actors.Start(context.Background(), actors.Config{Shards: 1, MaxBuckets: 1, SweepInterval: -1, Clock: clocktest.New(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	obs := newCounter()
	_, addr := startServer(t, resp.Options{Checker: sys, Observer: obs})
	c := newClient(t, addr, 1, "")
	runSteps(t, c, []step{
		{args: []any{"RL.CHECK", "a", "1m", 5}, want: []int64{1, 1, 5, 4, 60000, 0}},
		{args: []any{"RL.CHECK", "b", "1m", 5}, err: "ERR the rate limiter is full (max buckets); retry"},
		{args: []any{"CL.THROTTLE", "b", 1, 1, 60}, err: "ERR the rate limiter is full (max buckets); retry"},
	})
	if got := obs.command("rl.check full"); got != 1 {
		t.Errorf("rl.check full: got %d, want 1", got)
	}
	if got := obs.command("cl.throttle full"); got != 1 {
		t.Errorf("cl.throttle full: got %d, want 1", got)
	}
}

// TestNativeStopped checks the reply when the rate limiter has stopped,
// and that a Checker error is matched against Options.Stopped.
func TestNativeStopped(t *testing.T) {
	t.Parallel()
	sys, err := actors.Start(context.Background(), actors.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startServer(t, resp.Options{Checker: sys})
	c := newClient(t, addr, 1, "")
	if err := sys.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	runSteps(t, c, []step{
		{args: []any{"RL.CHECK", "a", "1m", 5}, err: "ERR the rate limiter is shutting down; retry"},
		{args: []any{"CL.THROTTLE", "a", 1, 1, 60}, err: "ERR the rate limiter is shutting down; retry"},
		{args: []any{"RL.REFUND", "a", "1m", 5, "HITS", 1}, err: "ERR the rate limiter is shutting down; retry"},
	})
	// Matched against another error, it is only a failure.
	_, addr2 := startServer(t, resp.Options{Checker: sys, Stopped: errors.New("other")})
	runSteps(t, newClient(t, addr2, 1, ""), []step{
		{args: []any{"RL.CHECK", "a", "1m", 5}, err: "ERR the rate limiter failed; retry"},
	})
}
