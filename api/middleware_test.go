package api_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestMiddlewareOptions(t *testing.T) {
	t.Parallel()
	ok := api.MiddlewareOptions{Scale: time.Second, Limit: 1}
	with := func(f func(*api.MiddlewareOptions)) api.MiddlewareOptions {
		o := ok
		f(&o)
		return o
	}
	tests := []struct {
		name      string
		c         api.Checker
		opts      api.MiddlewareOptions
		wantField string // "" for no error
	}{
		{"ok", &fakeChecker{}, ok, ""},
		{"429", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.DenyStatus = 429 }), ""},
		{"max scale", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.Scale = table.MaxScale }), ""},
		{"nil checker", nil, ok, "Checker"},
		{"zero scale", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.Scale = 0 }), "Scale"},
		{"sub-ms scale", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.Scale = 1500 * time.Microsecond }), "Scale"},
		{"huge scale", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.Scale = table.MaxScale + time.Millisecond }), "Scale"},
		{"zero limit", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.Limit = 0 }), "Limit"},
		{"negative limit", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.Limit = -1 }), "Limit"},
		{"deny 500", &fakeChecker{}, with(func(o *api.MiddlewareOptions) { o.DenyStatus = 500 }), "DenyStatus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mw, err := api.Middleware(tt.c, tt.opts)
			if tt.wantField == "" {
				if err != nil || mw == nil {
					t.Fatalf("got %v, want a middleware", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want one naming %s", tt.wantField)
			}
			if !errors.Is(err, api.ErrInvalidOption) || !containsWord(err.Error(), tt.wantField) {
				t.Errorf("got error %q, want one matching ErrInvalidOption naming %s", err, tt.wantField)
			}
		})
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w {
			return true
		}
	}
	return false
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       api.MiddlewareOptions
		wantStatus []int
		wantKey    string
	}{
		{"default key", api.MiddlewareOptions{Scale: table.MaxScale, Limit: 2}, []int{200, 200, 413, 413}, "127.0.0.1"},
		{"429", api.MiddlewareOptions{Scale: table.MaxScale, Limit: 1, DenyStatus: 429}, []int{200, 429}, "127.0.0.1"},
		{"key func", api.MiddlewareOptions{Scale: table.MaxScale, Limit: 2, KeyFunc: func(r *http.Request) string {
			return r.Header.Get("X-Api-Key")
		}}, []int{200, 200, 413}, "key \"1\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mw, err := api.Middleware(startSystem(t), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				_, _ = io.WriteString(w, "hello")
			})
			srv := httptest.NewServer(mw(next))
			t.Cleanup(srv.Close)
			var allowed int64
			for i, want := range tt.wantStatus {
				req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
				req.Header.Set("X-Api-Key", `key "1"`)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r := response{status: resp.StatusCode, header: resp.Header, body: body}
				if r.status != want {
					t.Fatalf("request %d: got status %d, want %d; body %s", i, r.status, want, r.body)
				}
				wantPolicy := `"default";q=` + strconv.FormatInt(tt.opts.Limit, 10) + `;w=31622400`
				if got := r.header.Get("RateLimit-Policy"); got != wantPolicy {
					t.Errorf("request %d: got RateLimit-Policy %q, want %q", i, got, wantPolicy)
				}
				if want == 200 {
					allowed++
					if string(body) != "hello" {
						t.Errorf("request %d: got body %q, want the next handler's", i, body)
					}
					rem := tt.opts.Limit - allowed
					if got := r.header.Get("RateLimit"); !hasPrefix(got, `"default";r=`+strconv.FormatInt(rem, 10)+";t=") {
						t.Errorf("request %d: got RateLimit %q, want r=%d", i, got, rem)
					}
					if got := r.header.Get("Retry-After"); got != "" {
						t.Errorf("request %d: got Retry-After %q, want none", i, got)
					}
					continue
				}
				d := decision(t, r)
				checkDecision(t, r, d, tt.wantKey)
				if d.Allowed || d.Count != tt.opts.Limit || d.Limit != tt.opts.Limit || d.Remaining != 0 {
					t.Errorf("request %d: got %+v, want a denial at count %d", i, d, tt.opts.Limit)
				}
			}
			if got := calls.Load(); got != allowed {
				t.Errorf("got %d calls of the next handler, want %d", got, allowed)
			}
		})
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func TestMiddlewareErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    api.Checker
		key  func(*http.Request) string
		want int
	}{
		{"unavailable", &fakeChecker{err: actors.ErrUnavailable}, nil, 503},
		{"other", &fakeChecker{err: errors.New("boom")}, nil, 503},
		{"empty key", nil, func(*http.Request) string { return "" }, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.c
			if c == nil {
				c = startSystem(t)
			}
			mw, err := api.Middleware(c, api.MiddlewareOptions{Scale: time.Second, Limit: 5, KeyFunc: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != tt.want {
				t.Errorf("got status %d, want %d; body %s", rec.Code, tt.want, rec.Body)
			}
			var e errorBody
			decodeStrict(t, rec.Body.Bytes(), &e)
			if e.Error == "" {
				t.Errorf("got no error message")
			}
			if got := calls.Load(); got != 0 {
				t.Errorf("got %d calls of the next handler, want 0", got)
			}
		})
	}
}

// TestMiddlewareRemoteAddr checks the default key on addresses without a port.
func TestMiddlewareRemoteAddr(t *testing.T) {
	t.Parallel()
	tests := []struct{ remote, wantKey string }{
		{"192.0.2.1:1234", "192.0.2.1"},
		{"[2001:db8::1]:80", "2001:db8::1"},
		{"unix-socket", "unix-socket"},
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			t.Parallel()
			f := &fakeChecker{d: table.Decision{Allowed: true, Limit: 1}}
			mw, err := api.Middleware(f, api.MiddlewareOptions{Scale: time.Second, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tt.remote
			mw(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), req)
			if len(f.calls) != 1 || f.calls[0].ID != tt.wantKey || f.calls[0].Hits != 1 {
				t.Errorf("got calls %+v, want one with id %q and 1 hit", f.calls, tt.wantKey)
			}
		})
	}
}
