package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

var (
	_ api.Checker     = (*actors.System)(nil)
	_ api.StatsSource = (*actors.System)(nil)
)

// longScale is the window used where a test must not see a window end: the
// longest there is, so a window boundary falls inside a test run about once
// a year.
const longScale = "8784h"

// longScaleSeconds is longScale in seconds, the w= of RateLimit-Policy.
const longScaleSeconds = 8784 * 3600

// startSystem starts a real actor system, stopped when the test ends.
func startSystem(t testing.TB) *actors.System {
	t.Helper()
	sys, err := actors.Start(context.Background(), actors.Config{})
	if err != nil {
		t.Fatalf("actors.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return sys
}

// startServer serves NewHandler(c, opts) on a loopback listener.
func startServer(t testing.TB, c api.Checker, opts api.Options) *httptest.Server {
	t.Helper()
	h, err := api.NewHandler(c, opts)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// response is what a test looks at in an answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t testing.TB, c *http.Client, method, url, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("NewRequest %s %s: %v", method, url, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// decisionBody is the check_rate body.
type decisionBody struct {
	Allowed      bool   `json:"allowed"`
	ID           string `json:"id"`
	Count        int64  `json:"count"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetMs      int64  `json:"reset_ms"`
	RetryAfterMs int64  `json:"retry_after_ms"`
}

// errorBody is the body of a 4xx or 5xx.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field"`
}

// decodeStrict decodes exactly one JSON object with exactly the members of v.
func decodeStrict(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("body %q: trailing data", b)
	}
	// Every member must be present, too.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	want, _ := json.Marshal(v)
	var wm map[string]json.RawMessage
	_ = json.Unmarshal(want, &wm)
	if len(m) != len(wm) {
		t.Fatalf("body %q: got %d members, want %d", b, len(m), len(wm))
	}
}

func decision(t testing.TB, r response) decisionBody {
	t.Helper()
	var d decisionBody
	decodeStrict(t, r.body, &d)
	return d
}

// fakeChecker answers every check and refund with d and err, and every
// batch with d for each check (allowed if d is), recording the requests.
type fakeChecker struct {
	mu    sync.Mutex
	d     table.Decision
	err   error
	calls []table.Request
}

func (f *fakeChecker) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	return f.d, f.err
}

func (f *fakeChecker) CheckAll(ctx context.Context, reqs []table.Request) ([]table.Decision, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, reqs...)
	if f.err != nil {
		return nil, false, f.err
	}
	ds := make([]table.Decision, len(reqs))
	for i := range ds {
		ds[i] = f.d
	}
	return ds, f.d.Allowed, nil
}

func (f *fakeChecker) Refund(ctx context.Context, req table.Request) (table.Decision, error) {
	return f.Check(ctx, req)
}

// requests returns the requests f has seen.
func (f *fakeChecker) requests() []table.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// clockStart is where the manual clocks of the tests start: a time on a
// whole hour, so that every window of a whole number of seconds up to an
// hour starts there and reset times are exact.
func clockStart() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }

// startClocked starts a real actor system of one shard on a manual clock
// reading clockStart, without sweeps, with cfg's other fields; stopped when
// the test ends.
func startClocked(t testing.TB, cfg actors.Config) (*actors.System, *clocktest.Manual) {
	t.Helper()
	clk := clocktest.New(clockStart())
	cfg.Clock, cfg.Shards, cfg.SweepInterval = clk, 1, -1
	sys, err := actors.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("actors.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return sys, clk
}

// newStore returns a rules store holding rs.
func newStore(t testing.TB, rs ...rules.Rule) *rules.Store {
	t.Helper()
	st, err := rules.NewStore(rs)
	if err != nil {
		t.Fatalf("rules.NewStore: %v", err)
	}
	return st
}

// doHeader is do with request headers, given as name, value pairs.
func doHeader(t testing.TB, method, url, body string, kv ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("NewRequest %s %s: %v", method, url, err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// ruleDecision is the check_rate body of a check by rule; also the element
// of a batch body.
type ruleDecision struct {
	Allowed      bool   `json:"allowed"`
	ID           string `json:"id"`
	Rule         string `json:"rule,omitempty"`
	Count        int64  `json:"count"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetMs      int64  `json:"reset_ms"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ShadowDenied bool   `json:"shadow_denied,omitempty"`
}

// batchBody is the body of a batch check.
type batchBody struct {
	Allowed bool           `json:"allowed"`
	Checks  []ruleDecision `json:"checks"`
}

// wantHeaders checks the headers of r: each name must have exactly the
// value given, "" meaning absent.
func wantHeaders(t testing.TB, r response, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := r.header.Values(k); v == "" && len(got) != 0 || v != "" && (len(got) != 1 || got[0] != v) {
			t.Errorf("got %s %q, want %q", k, got, v)
		}
	}
}
