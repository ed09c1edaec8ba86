package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
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

// fakeChecker answers every check with d and err, counting calls.
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
