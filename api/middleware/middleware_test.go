package middleware_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/middleware"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestMiddlewareOptions(t *testing.T) {
	t.Parallel()
	ok := middleware.Options{Policy: table.Policy{Scale: time.Second, Limit: 1}}
	st := apitest.NewStore(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 1}})
	with := func(f func(*middleware.Options)) middleware.Options {
		o := ok
		f(&o)
		return o
	}
	tests := []struct {
		name      string
		c         api.Checker
		opts      middleware.Options
		wantField string // "" for no error
	}{
		{"ok", &apitest.FakeChecker{}, ok, ""},
		{"429", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.DenyStatus = 429 }), ""},
		{"max scale", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Scale = table.MaxScale }), ""},
		{"nil checker", nil, ok, "Checker"},
		{"zero scale", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Scale = 0 }), "Scale"},
		{"sub-ms scale", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Scale = 1500 * time.Microsecond }), "Scale"},
		{"huge scale", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Scale = table.MaxScale + time.Millisecond }), "Scale"},
		{"zero limit", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Limit = 0 }), "Limit"},
		{"negative limit", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Limit = -1 }), "Limit"},
		{"deny 500", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.DenyStatus = 500 }), "DenyStatus"},
		{"rule", &apitest.FakeChecker{}, middleware.Options{Rules: st, Rule: "login"}, ""},
		{"rules by match", &apitest.FakeChecker{}, middleware.Options{Rules: st}, ""},
		{"rules and a fallback", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Rules = st }), ""},
		{"rule without rules", &apitest.FakeChecker{}, middleware.Options{Rule: "login"}, "Rules"},
		{"unknown rule", &apitest.FakeChecker{}, middleware.Options{Rules: st, Rule: "nope"}, "Rule"},
		{"rule and scale", &apitest.FakeChecker{}, with(func(o *middleware.Options) { o.Rules, o.Rule = st, "login" }), "Scale"},
		{"rules and scale only", &apitest.FakeChecker{}, middleware.Options{Rules: st, Policy: table.Policy{Scale: time.Second}}, "Limit"},
		{"rules and limit only", &apitest.FakeChecker{}, middleware.Options{Rules: st, Policy: table.Policy{Limit: 1}}, "Scale"},
		{"no limit at all", &apitest.FakeChecker{}, middleware.Options{}, "Limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mw, err := middleware.New(tt.c, tt.opts)
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
		opts       middleware.Options
		wantStatus []int
		wantKey    string
	}{
		{"default key", middleware.Options{Policy: table.Policy{Scale: table.MaxScale, Limit: 2}}, []int{200, 200, 413, 413}, "127.0.0.1"},
		{"429", middleware.Options{Policy: table.Policy{Scale: table.MaxScale, Limit: 1}, DenyStatus: 429}, []int{200, 429}, "127.0.0.1"},
		{"key func", middleware.Options{
			Policy: table.Policy{Scale: table.MaxScale, Limit: 2},
			KeyFunc: func(r *http.Request) string {
				return r.Header.Get("X-Api-Key")
			},
		}, []int{200, 200, 413}, "key \"1\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mw, err := middleware.New(actorstest.StartSystem(t), tt.opts)
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
				r := apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
				if r.Status != want {
					t.Fatalf("request %d: got status %d, want %d; body %s", i, r.Status, want, r.Body)
				}
				wantPolicy := `"default";q=` + strconv.FormatInt(tt.opts.Limit, 10) + `;w=31622400`
				if got := r.Header.Get("RateLimit-Policy"); got != wantPolicy {
					t.Errorf("request %d: got RateLimit-Policy %q, want %q", i, got, wantPolicy)
				}
				if want == 200 {
					allowed++
					if string(body) != "hello" {
						t.Errorf("request %d: got body %q, want the next handler's", i, body)
					}
					rem := tt.opts.Limit - allowed
					if got := r.Header.Get("RateLimit"); !hasPrefix(got, `"default";r=`+strconv.FormatInt(rem, 10)+";t=") {
						t.Errorf("request %d: got RateLimit %q, want r=%d", i, got, rem)
					}
					if got := r.Header.Get("Retry-After"); got != "" {
						t.Errorf("request %d: got Retry-After %q, want none", i, got)
					}
					continue
				}
				d := apitest.Decision(t, r)
				apitest.CheckDecision(t, r, d, tt.wantKey)
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
		{"unavailable", &apitest.FakeChecker{Err: actors.ErrUnavailable}, nil, 503},
		{"other", &apitest.FakeChecker{Err: errors.New("boom")}, nil, 503},
		{"empty key", nil, func(*http.Request) string { return "" }, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.c
			if c == nil {
				c = actorstest.StartSystem(t)
			}
			mw, err := middleware.New(c, middleware.Options{Policy: table.Policy{Scale: time.Second, Limit: 5}, KeyFunc: tt.key})
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
			var e apitest.ErrorBody
			apitest.DecodeStrict(t, rec.Body.Bytes(), &e)
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
			f := &apitest.FakeChecker{D: table.Decision{Allowed: true, Limit: 1}}
			mw, err := middleware.New(f, middleware.Options{Policy: table.Policy{Scale: time.Second, Limit: 1}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tt.remote
			mw(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), req)
			if calls := f.Requests(); len(calls) != 1 || calls[0].ID != tt.wantKey || calls[0].Hits != 1 {
				t.Errorf("got calls %+v, want one with id %q and 1 hit", calls, tt.wantKey)
			}
		})
	}
}

// mwStep is one request through a middleware: what must come back, and
// whether the next handler must see it.
type mwStep struct {
	method, path string
	key          string // X-Key, the middleware's key
	wantStatus   int
	wantPolicy   string // "" for no RateLimit headers
	wantNext     bool
}

// runMiddleware serves mw around a handler that answers "next", and runs
// steps against it over a real listener.
func runMiddleware(t *testing.T, mw func(http.Handler) http.Handler, steps []mwStep) {
	t.Helper()
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "next")
	})))
	t.Cleanup(srv.Close)
	for i, s := range steps {
		key := s.key
		if key == "" {
			key = "k"
		}
		// The client sends the path as is: "/.//api" and "/a/../b" are not
		// cleaned.
		req, err := http.NewRequest(s.method, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = s.path
		req.Header.Set("X-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.wantStatus {
			t.Fatalf("step %d %s %s: got status %d, want %d; body %s", i, s.method, s.path, resp.StatusCode, s.wantStatus, body)
		}
		if got := string(body) == "next"; got != s.wantNext {
			t.Errorf("step %d %s %s: got body %q, want the next handler's: %v", i, s.method, s.path, body, s.wantNext)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != s.wantPolicy {
			t.Errorf("step %d %s %s: got RateLimit-Policy %q, want %q", i, s.method, s.path, got, s.wantPolicy)
		}
		if s.wantPolicy == "" && resp.Header.Get("RateLimit") != "" {
			t.Errorf("step %d %s %s: got RateLimit %q, want none", i, s.method, s.path, resp.Header.Get("RateLimit"))
		}
	}
}

func keyHeader(r *http.Request) string { return r.Header.Get("X-Key") }

// TestMiddlewareRules matches requests to rules by method, host and path.
func TestMiddlewareRules(t *testing.T) {
	t.Parallel()
	st := apitest.NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Match: rules.Match{Prefix: "/login", Method: "POST"}},
		rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 2}, Match: rules.Match{Prefix: "/api/"}},
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Shadow: true, Match: rules.Match{Prefix: "/watch"}},
	)
	const login, apiP, watch = `"login";q=1;w=3600`, `"api";q=2;w=3600`, `"watch";q=1;w=3600`
	tests := []struct {
		name  string
		opts  middleware.Options
		steps []mwStep
	}{
		{"by match", middleware.Options{Rules: st, KeyFunc: keyHeader}, []mwStep{
			{"GET", "/login", "", 200, "", true}, // login limits POST only
			{"POST", "/login", "", 200, login, true},
			{"POST", "/LOGIN", "", 413, login, false},
			{"POST", "/login", "other", 200, login, true}, // keys apart
			{"GET", "/api/x", "", 200, apiP, true},
			{"GET", "/.//api/y", "", 200, apiP, true}, // cleaned: /api/y
			{"GET", "/x/../api/z", "", 413, apiP, false},
			{"GET", "/api", "", 200, "", true}, // "/api/" does not match "/api"
			{"GET", "/elsewhere", "", 200, "", true},
			{"GET", "/watch", "", 200, watch, true},
			{"GET", "/watch/x", "", 200, watch, true}, // denied by a shadow rule: let through
		}},
		{"by name", middleware.Options{Rules: st, Rule: "login", KeyFunc: keyHeader}, []mwStep{
			{"GET", "/anything", "", 200, login, true},
			{"GET", "/api/x", "", 413, login, false},
		}},
		{"with a fallback", middleware.Options{Rules: st, Policy: table.Policy{Scale: time.Hour, Limit: 1}, KeyFunc: keyHeader}, []mwStep{
			{"GET", "/api/x", "", 200, apiP, true},
			{"GET", "/elsewhere", "", 200, `"default";q=1;w=3600`, true},
			{"GET", "/elsewhere/too", "", 413, `"default";q=1;w=3600`, false},
			{"GET", "/api/y", "", 200, apiP, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mw, err := middleware.New(actorstest.StartSystem(t), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			runMiddleware(t, mw, tt.steps)
		})
	}
}

// TestMiddlewareRuleDeleted: a named rule deleted from the Store stops
// limiting on the very next request, and a URL rule likewise.
func TestMiddlewareRuleDeleted(t *testing.T) {
	t.Parallel()
	for _, byName := range []bool{false, true} {
		st := apitest.NewStore(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Match: rules.Match{Prefix: "/api"}})
		opts := middleware.Options{Rules: st}
		if byName {
			opts.Rule = "api"
		}
		mw, err := middleware.New(actorstest.StartSystem(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		runMiddleware(t, mw, []mwStep{
			{"GET", "/api", "", 200, `"api";q=1;w=3600`, true},
			{"GET", "/api", "", 413, `"api";q=1;w=3600`, false},
		})
		if _, err := st.Delete("api"); err != nil {
			t.Fatal(err)
		}
		runMiddleware(t, mw, []mwStep{
			{"GET", "/api", "", 200, "", true},
			{"GET", "/api", "", 200, "", true},
		})
	}
}

// TestMiddlewareFull: a request refused because the table is full is a 503
// that never reaches the next handler.
func TestMiddlewareFull(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClockedWith(t, actors.Config{MaxBuckets: 1})
	mw, err := middleware.New(sys, middleware.Options{Policy: table.Policy{Scale: 30 * time.Second, Limit: 5}, KeyFunc: keyHeader})
	if err != nil {
		t.Fatal(err)
	}
	runMiddleware(t, mw, []mwStep{
		{"GET", "/", "a", 200, `"default";q=5;w=30`, true},
		{"GET", "/", "b", 503, "", false},
		{"GET", "/", "a", 200, `"default";q=5;w=30`, true},
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Key", "c")
	mw(http.NotFoundHandler()).ServeHTTP(rec, req)
	var e apitest.ErrorBody
	apitest.DecodeStrict(t, rec.Body.Bytes(), &e)
	if rec.Code != 503 || e != (apitest.ErrorBody{Error: "the rate limiter is full (max buckets); retry", Field: ""}) || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("got %d %+v Retry-After %q, want 503, the full error and Retry-After 1", rec.Code, e, rec.Header().Get("Retry-After"))
	}
}

// TestMiddlewareKeySources: a rule keyed by a header, a query parameter or
// the user counts each under its own budget, and a request lacking the key
// under its client's.
func TestMiddlewareKeySources(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	st := apitest.NewStore(t,
		rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Key: "header:X-API-Key", Match: rules.Match{Prefix: "/api"}},
		rules.Rule{Name: "q", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Key: "query:token", Match: rules.Match{Prefix: "/q"}},
		rules.Rule{Name: "me", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Key: "user", Match: rules.Match{Prefix: "/me"}},
	)
	mw, err := middleware.New(sys, middleware.Options{Rules: st, KeyFunc: keyHeader})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	get := func(path string, hdr map[string]string, user string) int {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if user != "" {
			req.SetBasicAuth(user, "pw")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		path string
		hdr  map[string]string
		user string
		want int
	}{
		{"/api", map[string]string{"X-API-Key": "k1", "X-Key": "c"}, "", 200},
		{"/api", map[string]string{"X-API-Key": "k1", "X-Key": "d"}, "", 413}, // same key, another client
		{"/api", map[string]string{"X-API-Key": "k2", "X-Key": "c"}, "", 200},
		{"/api", map[string]string{"X-Key": "c"}, "", 200}, // no key: the client's own budget
		{"/api", map[string]string{"X-Key": "c"}, "", 413},
		{"/q?token=t1", nil, "", 200},
		{"/q?token=t1", nil, "", 413},
		{"/q?token=t2", nil, "", 200},
		{"/me", nil, "alice", 200},
		{"/me", nil, "alice", 413},
		{"/me", nil, "bob", 200},
	}
	for i, s := range steps {
		if got := get(s.path, s.hdr, s.user); got != s.want {
			t.Fatalf("step %d %s: got %d, want %d", i, s.path, got, s.want)
		}
	}
}

// TestMiddlewareOnDenyAndNoHeaders: a custom deny handler answers denials,
// with Retry-After set; NoRateLimitHeaders leaves the RateLimit fields off.
func TestMiddlewareOnDenyAndNoHeaders(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	var got table.Decision
	mw, err := middleware.New(sys, middleware.Options{
		Policy:             table.Policy{Scale: time.Hour, Limit: 1},
		KeyFunc:            keyHeader,
		NoRateLimitHeaders: true,
		OnDeny: func(w http.ResponseWriter, r *http.Request, d table.Decision) {
			got = d
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, "slow down")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Serve(t, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	for i, want := range []int{200, http.StatusTeapot} {
		r := apitest.DoHeader(t, "GET", srv.URL, "", "X-Key", "z")
		if r.Status != want || r.Header.Get("RateLimit") != "" || r.Header.Get("RateLimit-Policy") != "" {
			t.Fatalf("request %d: got %d %v, want %d without RateLimit fields", i, r.Status, r.Header, want)
		}
		if want == http.StatusTeapot && (string(r.Body) != "slow down" || r.Header.Get("Retry-After") == "" || got.Allowed || got.Count != 1) {
			t.Fatalf("denial: body %q, Retry-After %q, decision %+v", r.Body, r.Header.Get("Retry-After"), got)
		}
	}
}

// BenchmarkMiddlewareOverhead compares a bare handler with the same handler
// behind the middleware (a real System, 1k keys), served in process, in one
// run: the difference is the middleware's cost per request.
func BenchmarkMiddlewareOverhead(b *testing.B) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	sys := actorstest.StartSystem(b)
	mw, err := middleware.New(sys, middleware.Options{Policy: table.Policy{Scale: time.Hour, Limit: 1 << 40}, KeyFunc: keyHeader})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*http.Request, 1000)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/", nil)
		reqs[i].Header.Set("X-Key", fmt.Sprint("client-", i))
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", next}, {"middleware", mw(next)}} {
		b.Run(c.name, func(b *testing.B) {
			w := &apitest.DiscardWriter{H: make(http.Header)}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				clear(w.H)
				c.h.ServeHTTP(w, reqs[i%len(reqs)])
			}
		})
		// As a loaded server runs it: 64 requests in flight per proc.
		b.Run(c.name+"/parallel", func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(64)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &apitest.DiscardWriter{H: make(http.Header)}
				i := int(next.Add(1)) * 7
				for pb.Next() {
					i++
					clear(w.H)
					c.h.ServeHTTP(w, reqs[i%len(reqs)])
				}
			})
		})
	}
}

// TestMiddlewareKeyMustBeUTF8: a KeyFunc key that is not valid UTF-8 is
// answered 400 naming id, and the request goes no further; a rule's header
// key that is not valid UTF-8 is unusable, as an empty one is: the request
// spends its client's budget.
func TestMiddlewareKeyMustBeUTF8(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t) // on a whole hour: t=3600
	st := apitest.NewStore(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 2}, Key: "header:X-API-Key", Match: rules.Match{Prefix: "/api"}})
	mw, err := middleware.New(sys, middleware.Options{Rules: st, Policy: table.Policy{Scale: time.Hour, Limit: 5}, KeyFunc: keyHeader})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) })))
	t.Cleanup(srv.Close)

	r := apitest.DoHeader(t, "GET", srv.URL+"/page", "", "X-Key", "c\xff")
	if r.Status != http.StatusBadRequest || string(r.Body) != apitest.BadUTF8Body {
		t.Errorf("KeyFunc key not UTF-8: got %d %s, want 400 %s", r.Status, r.Body, apitest.BadUTF8Body)
	}
	if got := calls.Load(); got != 0 {
		t.Errorf("the next handler was called %d times, want 0", got)
	}
	steps := []struct {
		hdr    []string
		status int
		policy string // the RateLimit-Policy: which limit was spent
		rl     string
	}{
		{[]string{"X-Key", "c", "X-API-Key", "k\xff"}, 200, `"api";q=2;w=3600`, `"api";r=1;t=3600`}, // c's budget under the rule
		{[]string{"X-Key", "c", "X-API-Key", "\xed\xa0\x80"}, 200, `"api";q=2;w=3600`, `"api";r=0;t=3600`},
		{[]string{"X-Key", "c", "X-API-Key", "k\xfe"}, 413, `"api";q=2;w=3600`, `"api";r=0;t=3600`},
		{[]string{"X-Key", "d", "X-API-Key", "k\xff"}, 200, `"api";q=2;w=3600`, `"api";r=1;t=3600`}, // another client, its own
	}
	for i, s := range steps {
		r := apitest.DoHeader(t, "GET", srv.URL+"/api/x", "", s.hdr...)
		if r.Status != s.status {
			t.Fatalf("step %d: got %d %s, want %d", i, r.Status, r.Body, s.status)
		}
		apitest.WantHeaders(t, r, map[string]string{"RateLimit-Policy": s.policy, "RateLimit": s.rl})
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("the next handler was called %d times, want 3", got)
	}
}
