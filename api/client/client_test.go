package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    client.Options
		wantErr bool
	}{
		{"http", client.Options{BaseURL: "http://127.0.0.1:8080"}, false},
		{"https with prefix and slash", client.Options{BaseURL: "https://limits.example/rl/"}, false},
		{"every option", client.Options{BaseURL: "http://h", Timeout: time.Second, MaxIdleConnsPerHost: 8, Failure: client.FailOpen}, false},
		{"own http client", client.Options{BaseURL: "http://h", HTTPClient: &http.Client{}}, false},
		{"no base URL", client.Options{}, true},
		{"no scheme", client.Options{BaseURL: "127.0.0.1:8080"}, true},
		{"ftp", client.Options{BaseURL: "ftp://h"}, true},
		{"no host", client.Options{BaseURL: "http:///x"}, true},
		{"query", client.Options{BaseURL: "http://h/?a=1"}, true},
		{"fragment", client.Options{BaseURL: "http://h/#f"}, true},
		{"malformed", client.Options{BaseURL: "http://[::1"}, true},
		{"negative timeout", client.Options{BaseURL: "http://h", Timeout: -1}, true},
		{"negative pool", client.Options{BaseURL: "http://h", MaxIdleConnsPerHost: -1}, true},
		{"unknown policy", client.Options{BaseURL: "http://h", Failure: 7}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := client.New(tt.opts)
			if tt.wantErr {
				if !errors.Is(err, client.ErrInvalidOption) {
					t.Errorf("got %v, want an error matching ErrInvalidOption", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: got %v, want nil", err)
			}
		})
	}
}

// checkStep is one check of a flow: the server's clock is advanced by
// advance, then hits are spent; the decision must be exactly want.
type checkStep struct {
	advance time.Duration
	hits    int64
	want    client.Decision
}

func TestCheck(t *testing.T) {
	t.Parallel()
	ok := func(count, limit int64, reset time.Duration) client.Decision {
		return client.Decision{Allowed: true, Count: count, Limit: limit, Remaining: limit - count, Reset: reset}
	}
	no := func(count, limit int64, reset, retry time.Duration) client.Decision {
		return client.Decision{Count: count, Limit: limit, Remaining: limit - count, Reset: reset, RetryAfter: retry}
	}
	ms := time.Millisecond
	tests := []struct {
		name  string
		limit client.Limit
		steps []checkStep
	}{
		{"fixed window", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 3}}, []checkStep{
			{0, 1, ok(1, 3, 1000*ms)},
			{0, 2, ok(3, 3, 1000*ms)},
			{0, 1, no(3, 3, 1000*ms, 1000*ms)},
			{400 * ms, 1, no(3, 3, 600*ms, 600*ms)},
			{0, 0, no(3, 3, 600*ms, 600*ms)}, // a peek
			{600 * ms, 1, ok(1, 3, 1000*ms)}, // a new window
		}},
		{"sliding window", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 3, Algorithm: "sliding_window"}}, []checkStep{
			{0, 3, ok(3, 3, 2000*ms)},
			{0, 1, no(3, 3, 2000*ms, 1334*ms)},
		}},
		{"token bucket with burst", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 3, Algorithm: "token_bucket", Burst: 5}}, []checkStep{
			{0, 5, ok(5, 5, 1667*ms)},
			{0, 1, no(5, 5, 1667*ms, 334*ms)},
		}},
		{"leaky bucket", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 500, Algorithm: "leaky_bucket"}}, []checkStep{
			{0, 1, ok(1, 1, 2*ms)},
			{0, 1, no(1, 1, 2*ms, 2*ms)},
			{ms, 1, no(1, 1, ms, ms)},
			{ms, 1, ok(1, 1, 2*ms)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sys, clk := actorstest.StartClocked(t)
			c := newClient(t, client.Options{BaseURL: apitest.StartServer(t, sys, httpapi.Options{}).URL})
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				got, err := c.Check(context.Background(), "alice", tt.limit, s.hits)
				if err != nil {
					t.Fatalf("step %d: Check: %v", i, err)
				}
				if got != s.want {
					t.Fatalf("step %d: got %+v, want %+v", i, got, s.want)
				}
			}
		})
	}
}

// TestCheckDenyStatus429 reads a denial from a service that answers 429.
func TestCheckDenyStatus429(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{DenyStatus: http.StatusTooManyRequests})
	c := newClient(t, client.Options{BaseURL: srv.URL})
	l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 1}}
	for i, want := range []bool{true, false} {
		d, err := c.Check(context.Background(), "bob", l, 1)
		if err != nil || d.Allowed != want || d.Degraded {
			t.Fatalf("check %d: got %+v, %v; want allowed %v", i, d, err, want)
		}
	}
}

func TestCheckRule(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	store := apitest.NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}},
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Shadow: true},
	)
	c := newClient(t, client.Options{BaseURL: apitest.StartServer(t, sys, httpapi.Options{Rules: store}).URL})
	ctx := context.Background()
	login, watch := client.Limit{Rule: "login"}, client.Limit{Rule: "watch"}
	minute := time.Minute
	tests := []struct {
		l    client.Limit
		hits int64
		want client.Decision
	}{
		{login, 2, client.Decision{Allowed: true, Count: 2, Limit: 2, Remaining: 0, Reset: minute, Rule: "login"}},
		{login, 1, client.Decision{Count: 2, Limit: 2, Remaining: 0, Reset: minute, RetryAfter: minute, Rule: "login"}},
		{watch, 1, client.Decision{Allowed: true, Count: 1, Limit: 1, Remaining: 0, Reset: minute, Rule: "watch"}},
		// A shadow rule reports its denial and lets the check through.
		{watch, 1, client.Decision{Allowed: true, Count: 1, Limit: 1, Remaining: 0, Reset: minute, RetryAfter: minute, Rule: "watch", ShadowDenied: true}},
	}
	for i, tt := range tests {
		got, err := c.Check(ctx, "alice", tt.l, tt.hits)
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if got != tt.want {
			t.Errorf("check %d: got %+v, want %+v", i, got, tt.want)
		}
	}
	// An ad-hoc check of the same id counts apart from the rule.
	got, err := c.Check(ctx, "alice", client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 2}}, 1)
	if err != nil || !got.Allowed || got.Count != 1 || got.Rule != "" {
		t.Errorf("ad hoc: got %+v, %v; want allowed, count 1, no rule", got, err)
	}
}

func TestCheckAll(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	store := apitest.NewStore(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 5}})
	c := newClient(t, client.Options{BaseURL: apitest.StartServer(t, sys, httpapi.Options{Rules: store}).URL})
	ctx := context.Background()
	perMinute := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 1}}
	perDay := client.Limit{Policy: client.Policy{Scale: 24 * time.Hour, Limit: 10}}
	batch := []client.Check{
		{ID: "u", Limit: perMinute, Hits: 1},
		{ID: "u", Limit: perDay, Hits: 1},
		{ID: "u", Limit: client.Limit{Rule: "login"}, Hits: 2},
	}

	ds, allowed, err := c.CheckAll(ctx, batch)
	if err != nil {
		t.Fatalf("first batch: %v", err)
	}
	want := []client.Decision{
		{Allowed: true, Count: 1, Limit: 1, Remaining: 0, Reset: time.Minute},
		{Allowed: true, Count: 1, Limit: 10, Remaining: 9, Reset: 24 * time.Hour},
		{Allowed: true, Count: 2, Limit: 5, Remaining: 3, Reset: time.Minute, Rule: "login"},
	}
	if !allowed || !slices.Equal(ds, want) {
		t.Fatalf("first batch: got %v %+v, want true %+v", allowed, ds, want)
	}

	// The per-minute limit denies the second batch: nothing is consumed.
	ds, allowed, err = c.CheckAll(ctx, batch)
	if err != nil {
		t.Fatalf("second batch: %v", err)
	}
	if allowed || len(ds) != 3 || ds[0].Allowed || ds[0].RetryAfter != time.Minute || !ds[1].Allowed {
		t.Fatalf("second batch: got %v %+v, want denied by check 0 after 1m", allowed, ds)
	}
	for i, ch := range batch[1:] {
		d, err := c.Check(ctx, ch.ID, ch.Limit, 0)
		if wantCount := want[i+1].Count; err != nil || d.Count != wantCount {
			t.Errorf("peek %d after the denied batch: got %+v, %v; want count %d", i+1, d, err, wantCount)
		}
	}
}

func TestRefund(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	c := newClient(t, client.Options{BaseURL: apitest.StartServer(t, sys, httpapi.Options{}).URL})
	ctx := context.Background()
	l := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 5}}
	if _, err := c.Check(ctx, "carol", l, 4); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		hits int64
		want client.Decision
	}{
		{3, client.Decision{Allowed: true, Count: 1, Limit: 5, Remaining: 4, Reset: time.Minute}},
		{9, client.Decision{Allowed: true, Count: 0, Limit: 5, Remaining: 5, Reset: time.Minute}}, // never below empty
	}
	for i, tt := range tests {
		got, err := c.Refund(ctx, "carol", l, tt.hits)
		if err != nil {
			t.Fatalf("refund %d: %v", i, err)
		}
		if got != tt.want {
			t.Errorf("refund %d: got %+v, want %+v", i, got, tt.want)
		}
	}
}

// TestInvalid sends bad input: the service's 400 comes back as ErrInvalid
// wrapping a FieldError that names the field, under either policy.
func TestInvalid(t *testing.T) {
	t.Parallel()
	store := apitest.NewStore(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}})
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{Rules: store})
	ok := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 10}}
	type call func(ctx context.Context, c *client.Client) error
	check := func(id string, l client.Limit, hits int64) call {
		return func(ctx context.Context, c *client.Client) error {
			_, err := c.Check(ctx, id, l, hits)
			return err
		}
	}
	tests := []struct {
		name      string
		call      call
		wantField string
	}{
		{"empty id", check("", ok, 1), "id"},
		{"long id", check(strings.Repeat("x", 1025), ok, 1), "id"},
		{"no limit", check("a", client.Limit{Policy: client.Policy{Scale: time.Minute}}, 1), "limit"},
		{"no scale", check("a", client.Limit{Policy: client.Policy{Limit: 1}}, 1), "scale"},
		{"negative scale", check("a", client.Limit{Policy: client.Policy{Scale: -time.Second, Limit: 1}}, 1), "scale"},
		{"fractional scale", check("a", client.Limit{Policy: client.Policy{Scale: 1500 * time.Microsecond, Limit: 1}}, 1), "scale"},
		{"negative hits", check("a", ok, -1), "hits"},
		{"unknown algorithm", check("a", client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 1, Algorithm: "bogus"}}, 1), "algorithm"},
		{"negative burst", check("a", client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 1, Burst: -1}}, 1), "burst"},
		{"unknown rule", check("a", client.Limit{Rule: "nope"}, 1), "rule"},
		{"rule and scale", check("a", client.Limit{Rule: "login", Policy: client.Policy{Scale: time.Minute}}, 1), "scale"},
		{"wait on unknown rule", func(ctx context.Context, c *client.Client) error {
			return c.Wait(ctx, "a", client.Limit{Rule: "nope"})
		}, "rule"},
		{"refund of nothing", func(ctx context.Context, c *client.Client) error {
			_, err := c.Refund(ctx, "a", ok, 0)
			return err
		}, "hits"},
		{"refund without limit", func(ctx context.Context, c *client.Client) error {
			_, err := c.Refund(ctx, "a", client.Limit{Policy: client.Policy{Scale: time.Minute}}, 1)
			return err
		}, "limit"},
		{"empty batch", func(ctx context.Context, c *client.Client) error {
			_, _, err := c.CheckAll(ctx, nil)
			return err
		}, "checks"},
		{"bad check in batch", func(ctx context.Context, c *client.Client) error {
			_, _, err := c.CheckAll(ctx, []client.Check{{ID: "a", Limit: ok, Hits: 1}, {ID: "a", Limit: client.Limit{Policy: client.Policy{Scale: time.Minute}}, Hits: 1}})
			return err
		}, "checks[1].limit"},
	}
	for _, tt := range tests {
		for _, policy := range []client.FailurePolicy{client.FailClosed, client.FailOpen} {
			t.Run(tt.name+" "+policy.String(), func(t *testing.T) {
				t.Parallel()
				c := newClient(t, client.Options{BaseURL: srv.URL, Failure: policy})
				err := tt.call(context.Background(), c)
				var fe *client.FieldError
				if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &fe) {
					t.Fatalf("got %v, want an error matching ErrInvalid with a FieldError", err)
				}
				if fe.Field != tt.wantField || fe.Message == "" || strings.HasPrefix(fe.Message, fe.Field+":") {
					t.Errorf("got field %q message %q, want field %q and a message without it", fe.Field, fe.Message, tt.wantField)
				}
				if errors.Is(err, client.ErrUnavailable) {
					t.Errorf("got %v, which matches ErrUnavailable too", err)
				}
			})
		}
	}
}

// TestEncoding sends ids and rule names that need escaping and checks the
// service reads them back unchanged, in a query and in a JSON body.
func TestEncoding(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gotID, gotRule, gotBody string
	srv := apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		q := r.URL.Query()
		gotID, gotRule, gotBody = q.Get("id"), q.Get("rule"), string(b)
		mu.Unlock()
		if r.Method == http.MethodPost {
			writeJSON(w, 200, `{"allowed":true,"checks":[`+decisionJSON+`]}`)
			return
		}
		writeJSON(w, 200, decisionJSON)
	}))
	c := newClient(t, client.Options{BaseURL: srv.URL})
	tests := []struct {
		id, rule string
		wantJSON string // the POST body
	}{
		{"plain", "", `[{"id":"plain","hits":1,"scale":60000,"limit":10}]`},
		{"a b&c=d+e%f/g?h#i", "r&s", `[{"id":"a b&c=d+e%f/g?h#i","hits":1,"rule":"r&s"}]`},
		{"é€😀", "", `[{"id":"é€😀","hits":1,"scale":60000,"limit":10}]`},
		{"q\"uo\\te\n\x00", "", `[{"id":"q\"uo\\te\u000a\u0000","hits":1,"scale":60000,"limit":10}]`},
	}
	for _, tt := range tests {
		l := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 10}}
		if tt.rule != "" {
			l = client.Limit{Rule: tt.rule}
		}
		if _, err := c.Check(context.Background(), tt.id, l, 1); err != nil {
			t.Fatalf("Check(%q): %v", tt.id, err)
		}
		mu.Lock()
		if gotID != tt.id || gotRule != tt.rule {
			t.Errorf("query: got id %q rule %q, want %q %q", gotID, gotRule, tt.id, tt.rule)
		}
		mu.Unlock()
		if _, _, err := c.CheckAll(context.Background(), []client.Check{{ID: tt.id, Limit: l, Hits: 1}}); err != nil {
			t.Fatalf("CheckAll(%q): %v", tt.id, err)
		}
		mu.Lock()
		if gotBody != tt.wantJSON {
			t.Errorf("body: got %s, want %s", gotBody, tt.wantJSON)
		}
		mu.Unlock()
	}
}

// TestBaseURL reaches the service behind a path prefix, and over TLS with
// an HTTPClient of the caller's.
func TestBaseURL(t *testing.T) {
	t.Parallel()
	h, err := httpapi.NewHandler(actorstest.StartSystem(t), httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		start func(t *testing.T) client.Options
	}{
		{"path prefix", func(t *testing.T) client.Options {
			srv := apitest.Serve(t, http.StripPrefix("/rl", h))
			return client.Options{BaseURL: srv.URL + "/rl/"}
		}},
		{"tls", func(t *testing.T) client.Options {
			srv := httptest.NewTLSServer(h)
			t.Cleanup(srv.Close)
			return client.Options{BaseURL: srv.URL, HTTPClient: srv.Client()}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, tt.start(t))
			l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 1}}
			for i, want := range []bool{true, false} {
				d, err := c.Check(context.Background(), "base-"+tt.name, l, 1)
				if err != nil || d.Allowed != want {
					t.Fatalf("check %d: got %+v, %v; want allowed %v", i, d, err, want)
				}
			}
		})
	}
}

// TestReserveCancel: Cancel gives the hits back in the window they were
// counted in, and nothing once that window is over.
func TestReserveCancel(t *testing.T) {
	t.Parallel()
	sys, clk := actorstest.StartClocked(t)
	c := newClient(t, client.Options{BaseURL: apitest.StartServer(t, sys, httpapi.Options{}).URL})
	ctx := context.Background()
	l := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 5}}

	r, err := c.Reserve(ctx, "dave", l, 4)
	if err != nil || !r.Allowed || r.Count != 4 {
		t.Fatalf("reserve 4: got %+v, %v", r, err)
	}
	if want := actorstest.ClockStart().UnixMilli(); r.Window != want {
		t.Fatalf("reserve: got window %d, want the window's start %d", r.Window, want)
	}
	d, err := r.Cancel(ctx)
	if err != nil || d.Count != 0 || d.Remaining != 5 {
		t.Fatalf("cancel in the same window: got %+v, %v, want count 0", d, err)
	}

	r, err = c.Reserve(ctx, "dave", l, 5)
	if err != nil || !r.Allowed {
		t.Fatalf("reserve 5: got %+v, %v", r, err)
	}
	clk.Advance(time.Minute) // the window is over
	if _, err := c.Check(ctx, "dave", l, 5); err != nil {
		t.Fatal(err)
	}
	if d, err := r.Cancel(ctx); err != nil || d.Count != 5 || d.Allowed {
		t.Fatalf("cancel after the window ended: got %+v, %v, want the new window untouched (count 5, full)", d, err)
	}

	// A denial reserves nothing: Cancel sends nothing.
	r, err = c.Reserve(ctx, "dave", l, 1)
	if err != nil || r.Allowed || r.Window != 0 {
		t.Fatalf("reserve in a full window: got %+v, %v, want denied with no window", r, err)
	}
	if d, err := r.Cancel(ctx); err != nil || d != (client.Decision{}) {
		t.Fatalf("cancel of a denial: got %+v, %v, want nothing", d, err)
	}
	if _, err := c.RefundWindow(ctx, "dave", l, 1, -1); err == nil {
		t.Fatalf("RefundWindow with a negative window: got no error")
	}
}
