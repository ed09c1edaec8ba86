// Package apitest holds what the tests of the transports and of the Go
// client share: a check_rate server on a loopback listener, requests and
// what a test looks at in their answers, strict JSON decoding, a Checker
// that answers as told, and golden files of whole answers. It is for
// tests only.
package apitest

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

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// LongScale is the window used where a test must not see a window end: the
// longest there is, so a window boundary falls inside a test run about
// once a year.
const LongScale = "8784h"

// LongScaleSeconds is LongScale in seconds, the w= of RateLimit-Policy.
const LongScaleSeconds = 8784 * 3600

// StartServer serves httpapi.NewHandler(c, opts) on a loopback listener, closed
// when the test ends.
func StartServer(t testing.TB, c api.Checker, opts httpapi.Options) *httptest.Server {
	t.Helper()
	h, err := httpapi.NewHandler(c, opts)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	return Serve(t, h)
}

// Serve serves h on a loopback listener, closed when the test ends.
func Serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// NewStore returns a rules store holding rs.
func NewStore(t testing.TB, rs ...rules.Rule) *rules.Store {
	t.Helper()
	st, err := rules.NewStore(rs)
	if err != nil {
		t.Fatalf("rules.NewStore: %v", err)
	}
	return st
}

// Response is what a test looks at in an answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request with c and reads its answer whole; a body is sent as
// JSON.
func Do(t testing.TB, c *http.Client, method, url, body string) Response {
	t.Helper()
	if body == "" {
		return send(t, c, method, url, body)
	}
	return send(t, c, method, url, body, "Content-Type", "application/json")
}

// DoHeader is Do with http.DefaultClient and request headers, given as
// name, value pairs.
func DoHeader(t testing.TB, method, url, body string, kv ...string) Response {
	t.Helper()
	return send(t, http.DefaultClient, method, url, body, kv...)
}

func send(t testing.TB, c *http.Client, method, url, body string, kv ...string) Response {
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
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// DecisionBody is the check_rate body.
type DecisionBody struct {
	Allowed      bool   `json:"allowed"`
	ID           string `json:"id"`
	Count        int64  `json:"count"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetMs      int64  `json:"reset_ms"`
	RetryAfterMs int64  `json:"retry_after_ms"`
}

// RuleDecision is the check_rate body of a check by rule; also the
// element of a batch body.
type RuleDecision struct {
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

// BatchBody is the body of a batch check.
type BatchBody struct {
	Allowed bool           `json:"allowed"`
	Checks  []RuleDecision `json:"checks"`
}

// ErrorBody is the body of a 4xx or 5xx.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field"`
}

// DecodeStrict decodes exactly one JSON object with exactly the members of
// v, every one present.
func DecodeStrict(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("body %q: trailing data", b)
	}
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

// Decision decodes the check_rate body of r strictly.
func Decision(t testing.TB, r Response) DecisionBody {
	t.Helper()
	var d DecisionBody
	DecodeStrict(t, r.Body, &d)
	return d
}

// WantHeaders checks the headers of r: each name must have exactly the
// value given, "" meaning absent.
func WantHeaders(t testing.TB, r Response, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := r.Header.Values(k); v == "" && len(got) != 0 || v != "" && (len(got) != 1 || got[0] != v) {
			t.Errorf("got %s %q, want %q", k, got, v)
		}
	}
}

// FakeChecker answers every check and refund with D and Err, and every
// batch with D for each check (allowed if D is), recording the requests.
type FakeChecker struct {
	D   table.Decision
	Err error

	mu    sync.Mutex
	calls []table.Request
}

var _ api.Checker = (*FakeChecker)(nil)

// Check implements api.Checker.
func (f *FakeChecker) Check(ctx context.Context, req table.Request) (table.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	return f.D, f.Err
}

// CheckAll implements api.Checker.
func (f *FakeChecker) CheckAll(ctx context.Context, reqs []table.Request) ([]table.Decision, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, reqs...)
	if f.Err != nil {
		return nil, false, f.Err
	}
	ds := make([]table.Decision, len(reqs))
	for i := range ds {
		ds[i] = f.D
	}
	return ds, f.D.Allowed, nil
}

// Refund implements api.Checker.
func (f *FakeChecker) Refund(ctx context.Context, req table.Request) (table.Decision, error) {
	return f.Check(ctx, req)
}

// Requests returns the requests f has seen.
func (f *FakeChecker) Requests() []table.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// RuleDecisionOf decodes the body of a check by rule strictly.
func RuleDecisionOf(t testing.TB, r Response) RuleDecision {
	t.Helper()
	var d RuleDecision
	DecodeStrict(t, r.Body, &d)
	return d
}
