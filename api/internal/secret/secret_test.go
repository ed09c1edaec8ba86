package secret

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestIn: a given secret matches when it equals any of the secrets, byte
// for byte; a prefix, an extension, another case or an empty secret does
// not.
func TestIn(t *testing.T) {
	t.Parallel()
	secrets := []string{"old-secret", "", "new secret"}
	for _, tt := range []struct {
		given string
		want  bool
	}{
		{"old-secret", true},
		{"new secret", true},
		{"", false},
		{"old-secre", false},
		{"old-secret ", false},
		{"OLD-SECRET", false},
		{"other", false},
	} {
		if got := In([]byte(tt.given), secrets); got != tt.want {
			t.Errorf("In(%q): got %v, want %v", tt.given, got, tt.want)
		}
	}
	if In([]byte("x"), nil) || In(nil, nil) || In(nil, []string{""}) {
		t.Error("In with no secret (or only an empty one): got true")
	}
}

// TestFixed: a fixed source returns its one secret, every time.
func TestFixed(t *testing.T) {
	t.Parallel()
	f := Fixed("s3cret")
	for range 2 {
		if got := f(); len(got) != 1 || got[0] != "s3cret" {
			t.Fatalf("Fixed: got %q, want [s3cret]", got)
		}
	}
	if !In([]byte("s3cret"), f()) || In([]byte("other"), f()) {
		t.Error("In with a fixed source: wrong answer")
	}
}

// TestLimiter: Spend counts attempts, burst at once and then burst a
// minute, per client; Allowed counts nothing.
func TestLimiter(t *testing.T) {
	t.Parallel()
	l := NewLimiter(3, 16)
	now := time.Unix(1_000_000, 0)
	for i := range 3 {
		if ok, _ := l.Allowed("a", now); !ok {
			t.Fatalf("attempt %d: not allowed", i+1)
		}
		if ok, _ := l.Spend("a", now); !ok {
			t.Fatalf("attempt %d: refused", i+1)
		}
	}
	if ok, retry := l.Allowed("a", now); ok || retry != 20*time.Second {
		t.Errorf("after 3: got %v, %v; want refused for 20s", ok, retry)
	}
	if ok, retry := l.Spend("a", now); ok || RetrySeconds(retry) != 20 {
		t.Errorf("a 4th attempt: got %v, %v; want refused for 20s", ok, retry)
	}
	if ok, _ := l.Spend("b", now); !ok {
		t.Error("another client: refused")
	}
	if ok, _ := l.Allowed("a", now.Add(20*time.Second)); !ok {
		t.Error("20s on: still refused")
	}
	if RetrySeconds(0) != 1 || RetrySeconds(1500*time.Millisecond) != 2 {
		t.Errorf("RetrySeconds: got %d and %d, want 1 and 2", RetrySeconds(0), RetrySeconds(1500*time.Millisecond))
	}
}

// TestAttempt: a client's failures are counted until its attempts are
// used up (the last one LockedOut), then its attempts are Limited without
// the secret being compared, the right one included, until the bucket
// refills; successes count nothing, and a nil Limiter only compares.
func TestAttempt(t *testing.T) {
	t.Parallel()
	l := NewLimiter(3, 16)
	now := time.Unix(1_000_000, 0)
	compared := 0
	right := func() bool { compared++; return true }
	wrong := func() bool { compared++; return false }
	for i := range 50 {
		if v, retry := l.Attempt("a", now, right); v != Accepted || retry != 0 {
			t.Fatalf("right secret %d: got %v, %v; want Accepted, 0", i+1, v, retry)
		}
	}
	want := []Verdict{Refused, Refused, LockedOut, Limited, Limited}
	for i, w := range want {
		v, retry := l.Attempt("a", now, wrong)
		wantRetry := time.Duration(0)
		if w == LockedOut || w == Limited {
			wantRetry = 20 * time.Second
		}
		if v != w || retry != wantRetry {
			t.Fatalf("wrong secret %d: got %v, %v; want %v, %v", i+1, v, retry, w, wantRetry)
		}
	}
	if compared != 53 {
		t.Errorf("the secret was compared %d times, want 53 (50 right, 3 wrong, none while limited)", compared)
	}
	if v, retry := l.Attempt("a", now.Add(5*time.Second), right); v != Limited || retry != 15*time.Second {
		t.Errorf("the right secret while limited: got %v, %v; want Limited, 15s", v, retry)
	}
	if v, _ := l.Attempt("b", now, right); v != Accepted {
		t.Errorf("another client: got %v, want Accepted", v)
	}
	if v, _ := l.Attempt("a", now.Add(20*time.Second), right); v != Accepted {
		t.Errorf("20s on, the right secret: got %v, want Accepted", v)
	}
	if v, retry := l.Attempt("a", now.Add(20*time.Second), wrong); v != LockedOut || retry != 20*time.Second {
		t.Errorf("20s on, a wrong secret: got %v, %v; want LockedOut, 20s (one attempt refilled)", v, retry)
	}
	var none *Limiter
	for i := range 100 {
		if v, retry := none.Attempt("a", now, wrong); v != Refused || retry != 0 {
			t.Fatalf("nil Limiter, wrong secret %d: got %v, %v; want Refused, 0", i+1, v, retry)
		}
	}
	if v, _ := none.Attempt("a", now, right); v != Accepted {
		t.Errorf("nil Limiter, right secret: got %v, want Accepted", v)
	}
}

// TestAttemptConcurrent: 200 concurrent wrong attempts of one client with
// 3 attempts make exactly 3 comparisons, 2 Refused, 1 LockedOut and 197
// Limited, however long a comparison takes; 200 concurrent right attempts
// of another client are all Accepted.
func TestAttemptConcurrent(t *testing.T) {
	t.Parallel()
	l := NewLimiter(3, 16)
	now := time.Unix(1_000_000, 0)
	var compared atomic.Int64
	var mu sync.Mutex
	got := map[Verdict]int{}
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			client, right := "wrong", false
			if i%2 == 1 {
				client, right = "right", true
			}
			v, _ := l.Attempt(client, now, func() bool {
				compared.Add(1)
				if !right {
					time.Sleep(2 * time.Millisecond) // what a slow comparison would leave open
				}
				return right
			})
			mu.Lock()
			got[v]++
			mu.Unlock()
		})
	}
	wg.Wait()
	want := map[Verdict]int{Accepted: 200, Refused: 2, LockedOut: 1, Limited: 197}
	if !maps.Equal(got, want) {
		t.Errorf("verdicts %v, want %v", got, want)
	}
	if n := compared.Load(); n != 203 {
		t.Errorf("%d comparisons, want 203 (200 right, 3 wrong)", n)
	}
}

// TestClientKey: an IPv4 address stands for itself (mapped into IPv6
// too), an IPv6 address for its /64; a port and a zone are dropped.
func TestClientKey(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"192.0.2.7:5000":             "192.0.2.7",
		"[::ffff:192.0.2.7]:5000":    "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":          "fe80::/64",
		"192.0.2.7":                  "192.0.2.7",
		"not an address":             "?not an address",
	} {
		if got := ClientKey(addr); got != want {
			t.Errorf("ClientKey(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestTokenSource: a fixed token becomes a source of it alone once valid,
// a function is taken as it is, and both, none or a bad fixed token are
// errors wrapping the transport's own, naming the option.
func TestTokenSource(t *testing.T) {
	t.Parallel()
	invalid := errors.New("x: invalid option")
	if src, err := TokenSource("a-token", nil, invalid); err != nil || !slices.Equal(src(), []string{"a-token"}) {
		t.Errorf("a fixed token: %v", err)
	}
	if src, err := TokenSource("", func() []string { return []string{"b"} }, invalid); err != nil || !slices.Equal(src(), []string{"b"}) {
		t.Errorf("a source: %v", err)
	}
	for _, c := range []struct {
		token string
		fn    func() []string
		says  string
	}{
		{"a", func() []string { return nil }, "both Token and Tokens are set"},
		{"", nil, "Token is required"},
		{strings.Repeat("x", MaxTokenLen+1), nil, "at most 4096 bytes"},
		{"has space", nil, "visible ASCII"},
		{"clé", nil, "visible ASCII"},
	} {
		if _, err := TokenSource(c.token, c.fn, invalid); !errors.Is(err, invalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("TokenSource(%.12q): got %v, want %q wrapping the invalid option", c.token, err, c.says)
		}
	}
}
