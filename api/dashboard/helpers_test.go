package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "s3cret-token-for-tests"

// t0 is the tests' start time.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// server starts the dashboard on 127.0.0.1:0 with opts (the token and the
// clock filled in when empty).
func server(t *testing.T, opts Options) (*httptest.Server, *clock) {
	t.Helper()
	c := newClock()
	if opts.Token == "" && opts.Tokens == nil {
		opts.Token = testToken
	}
	if opts.Now == nil {
		opts.Now = c.Now
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, c
}

// noRedirects is a client that returns redirects instead of following them.
func noRedirects() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request and returns the response with its body read.
func do(t *testing.T, c *http.Client, method, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = noRedirects()
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var bearer = map[string]string{"Authorization": "Bearer " + testToken}

// getJSON GETs url with the bearer token, wants status, and decodes the body into v.
func getJSON(t *testing.T, url string, status int, v any) string {
	t.Helper()
	resp, body := do(t, nil, http.MethodGet, url, "", bearer)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: status %d, want %d; body %s", url, resp.StatusCode, status, body)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, body)
		}
	}
	return body
}

// apiError is the body of an error answer.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field"`
}

// wantFieldError asserts a 400 naming field.
func wantFieldError(t *testing.T, what string, resp *http.Response, body, field string) {
	t.Helper()
	var e apiError
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%s: %v in %q", what, err, body)
	}
	if resp.StatusCode != http.StatusBadRequest || e.Field != field || !strings.HasPrefix(e.Error, field+": ") {
		t.Errorf("%s: got %d %+v, want 400 naming %q", what, resp.StatusCode, e, field)
	}
}
