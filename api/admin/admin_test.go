package admin_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/middleware"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

const adminToken = "s3cret-Token_0123456789"

// adminFixture is a clocked system with a rules store, served by a public
// handler and an admin handler on two listeners.
type adminFixture struct {
	sys     *actors.System
	store   *rules.Store
	public  string
	admin   string
	mu      sync.Mutex
	changes []uint64 // versions OnRulesChanged was called with
}

func newAdminFixture(t *testing.T, rs ...rules.Rule) *adminFixture {
	t.Helper()
	f := &adminFixture{}
	f.sys, _ = actorstest.StartClocked(t)
	f.store = apitest.NewStore(t, rs...)
	f.public = apitest.StartServer(t, f.sys, httpapi.Options{Rules: f.store}).URL
	h, err := admin.NewHandler(admin.Options{
		Backend: backend{f.sys},
		Rules:   f.store,
		Token:   adminToken,
		// TestAdminAuth sends many wrong tokens in parallel subtests; the
		// limit of failures has tests of its own (authlimit_test.go).
		AuthFailures: -1,
		OnRulesChanged: func(s *rules.Set) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.changes = append(f.changes, s.Version())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.admin = srv.URL
	return f
}

// call sends an authorized admin request.
func (f *adminFixture) call(t *testing.T, method, path, body string) apitest.Response {
	t.Helper()
	return apitest.DoHeader(t, method, f.admin+path, body, "Authorization", "Bearer "+adminToken)
}

// check sends GET /check_rate to the public listener.
func (f *adminFixture) check(t *testing.T, query string) apitest.Response {
	t.Helper()
	return apitest.Do(t, http.DefaultClient, "GET", f.public+"/check_rate?"+query, "")
}

func (f *adminFixture) versions() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.changes...)
}

// wantError checks that r is status with exactly the JSON error want.
func wantError(t *testing.T, r apitest.Response, status int, want apitest.ErrorBody) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("got status %d, want %d; body %s", r.Status, status, r.Body)
	}
	var got apitest.ErrorBody
	apitest.DecodeStrict(t, r.Body, &got)
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	apitest.WantHeaders(t, r, map[string]string{"Content-Type": "application/json"})
}

func TestNewAdminHandlerOptions(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	tests := []struct {
		name      string
		opts      admin.Options
		wantField string // "" for no error
	}{
		{"ok", admin.Options{Backend: backend{sys}, Token: "t"}, ""},
		{"with rules", admin.Options{Backend: backend{sys}, Token: "t", Rules: apitest.NewStore(t)}, ""},
		{"no backend", admin.Options{Token: "t"}, "Backend"},
		{"no token", admin.Options{Backend: backend{sys}}, "Token"},
		{"token with space", admin.Options{Backend: backend{sys}, Token: "a b"}, "Token"},
		{"token with newline", admin.Options{Backend: backend{sys}, Token: "ab\n"}, "Token"},
		{"token not ASCII", admin.Options{Backend: backend{sys}, Token: "clé"}, "Token"},
		{"token too long", admin.Options{Backend: backend{sys}, Token: strings.Repeat("x", 4097)}, "Token"},
		{"tokens", admin.Options{Backend: backend{sys}, Tokens: func() []string { return []string{"t"} }}, ""},
		{"token and tokens", admin.Options{Backend: backend{sys}, Token: "t", Tokens: func() []string { return []string{"t"} }}, "Tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := admin.NewHandler(tt.opts)
			if tt.wantField == "" {
				if err != nil || h == nil {
					t.Fatalf("got %v, want a handler", err)
				}
				return
			}
			if !errors.Is(err, api.ErrInvalidOption) || !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("got error %v, want one matching ErrInvalidOption naming %s", err, tt.wantField)
			}
		})
	}
}

func TestAdminAuth(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	unauthorized := apitest.ErrorBody{Error: "this endpoint needs the admin token: send Authorization: Bearer TOKEN", Field: ""}
	tests := []struct {
		name   string
		method string
		path   string
		auth   []string // Authorization values
		want   int
	}{
		{"no token", "GET", "/rules", nil, 401},
		{"wrong token", "GET", "/rules", []string{"Bearer wrong"}, 401},
		{"token prefix", "GET", "/rules", []string{"Bearer " + adminToken[:5]}, 401},
		{"token and more", "GET", "/rules", []string{"Bearer " + adminToken + "x"}, 401},
		{"no scheme", "GET", "/rules", []string{adminToken}, 401},
		{"basic scheme", "GET", "/rules", []string{"Basic " + adminToken}, 401},
		{"empty bearer", "GET", "/rules", []string{"Bearer "}, 401},
		{"bearer alone", "GET", "/rules", []string{"Bearer"}, 401},
		{"two headers", "GET", "/rules", []string{"Bearer " + adminToken, "Bearer " + adminToken}, 401},
		{"no token, unknown path", "GET", "/nope", nil, 401},
		{"no token, reset", "POST", "/reset?id=a&scale=1s&limit=1", nil, 401},
		{"no token, buckets", "GET", "/buckets?id=a", nil, 401},
		{"no token, put", "PUT", "/rules/x", nil, 401},
		{"no token, delete", "DELETE", "/rules/x", nil, 401},
		{"no token, stats", "GET", "/stats", nil, 401},
		{"no token, wrong method", "PATCH", "/rules", nil, 401},
		{"token", "GET", "/rules", []string{"Bearer " + adminToken}, 200},
		{"scheme in any case", "GET", "/rules", []string{"bEARER " + adminToken}, 200},
		{"extra spaces", "GET", "/rules", []string{"Bearer   " + adminToken}, 200},
		{"healthz needs no token", "GET", "/healthz", nil, 200},
		{"healthz head", "HEAD", "/healthz", nil, 200},
		{"token, unknown path", "GET", "/nope", []string{"Bearer " + adminToken}, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var kv []string
			for _, a := range tt.auth {
				kv = append(kv, "Authorization", a)
			}
			r := apitest.DoHeader(t, tt.method, f.admin+tt.path, "", kv...)
			if r.Status != tt.want {
				t.Fatalf("got status %d, want %d; body %s", r.Status, tt.want, r.Body)
			}
			if tt.want == 401 {
				wantError(t, r, 401, unauthorized)
				apitest.WantHeaders(t, r, map[string]string{"WWW-Authenticate": "Bearer"})
			}
		})
	}
	if got := f.versions(); len(got) != 0 {
		t.Errorf("got rule changes %v from unauthorized requests, want none", got)
	}
}

// TestAdminTokenRotation: with Options.Tokens, a request may carry any of
// the tokens the function returns at that request: the old one, then the
// old and the new one, then the new one alone.
func TestAdminTokenRotation(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	var current atomic.Pointer[[]string]
	set := func(toks ...string) { current.Store(&toks) }
	set("old-token-0123456789")
	h, err := admin.NewHandler(admin.Options{Backend: backend{sys}, Tokens: func() []string { return *current.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	status := func(tok string) int {
		t.Helper()
		return apitest.DoHeader(t, "GET", srv.URL+"/stats", "", "Authorization", "Bearer "+tok).Status
	}
	steps := []struct {
		tokens   []string
		old, new int
	}{
		{[]string{"old-token-0123456789"}, 200, 401},
		{[]string{"old-token-0123456789", "new-token-0123456789"}, 200, 200},
		{[]string{"new-token-0123456789"}, 401, 200},
	}
	for i, st := range steps {
		set(st.tokens...)
		if got := status("old-token-0123456789"); got != st.old {
			t.Errorf("step %d, the old token: got %d, want %d", i, got, st.old)
		}
		if got := status("new-token-0123456789"); got != st.new {
			t.Errorf("step %d, the new token: got %d, want %d", i, got, st.new)
		}
	}
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	tests := []struct {
		method, path string
		want         int
		wantAllow    string
	}{
		{"POST", "/rules", 405, "GET"},
		{"DELETE", "/rules", 405, "GET"},
		{"PATCH", "/rules/x", 405, "GET, PUT, DELETE"},
		{"POST", "/rules/x", 405, "GET, PUT, DELETE"},
		{"GET", "/reset", 405, "POST"},
		{"POST", "/buckets?id=a", 405, "GET"},
		{"POST", "/stats", 405, "GET"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"GET", "/rules/", 404, ""},
		{"GET", "/", 404, ""},
		{"GET", "/check_rate?id=a&scale=1s&limit=1", 404, ""},
		{"GET", "/metrics", 404, ""},
		{"GET", "/rulesx", 404, ""},
	}
	for _, tt := range tests {
		r := f.call(t, tt.method, tt.path, "")
		if r.Status != tt.want {
			t.Errorf("%s %s: got status %d, want %d; body %s", tt.method, tt.path, r.Status, tt.want, r.Body)
			continue
		}
		apitest.WantHeaders(t, r, map[string]string{"Allow": tt.wantAllow, "Content-Type": "application/json"})
		var e apitest.ErrorBody
		apitest.DecodeStrict(t, r.Body, &e)
		if e.Error == "" {
			t.Errorf("%s %s: got no error message", tt.method, tt.path)
		}
	}
}

func TestAdminRules(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: 30 * time.Second, Limit: 2}, Match: rules.Match{Prefix: "/login", Method: "post"}},
		rules.Rule{Name: "api", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Second, Limit: 10, Burst: 20}},
	)
	// GET /rules: sorted by name, in canonical form.
	r := f.call(t, "GET", "/rules", "")
	const list1 = `{"version":1,"rules":[` +
		`{"name":"api","algorithm":"token_bucket","scale":"1s","limit":10,"burst":20,"shadow":false},` +
		`{"name":"login","algorithm":"fixed_window","scale":"30s","limit":2,"burst":0,"shadow":false,"match":{"prefix":"/login","method":"POST"}}]}`
	if r.Status != 200 || string(r.Body) != list1 {
		t.Errorf("GET /rules: got %d %s, want 200 %s", r.Status, r.Body, list1)
	}
	apitest.WantHeaders(t, r, map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"})

	// Spend login's budget, then raise its limit: the next check sees it.
	for i, want := range []int{200, 200, 413} {
		if r := f.check(t, "id=u&rule=login"); r.Status != want {
			t.Fatalf("check %d: got status %d, want %d", i, r.Status, want)
		}
	}
	r = f.call(t, "PUT", "/rules/login", `{"scale":"30s","limit":3,"match":{"prefix":"/login","method":"POST"}}`)
	const put2 = `{"version":2,"rule":{"name":"login","algorithm":"fixed_window","scale":"30s","limit":3,"burst":0,"shadow":false,"match":{"prefix":"/login","method":"POST"}}}`
	if r.Status != 200 || string(r.Body) != put2 {
		t.Fatalf("PUT /rules/login: got %d %s, want 200 %s", r.Status, r.Body, put2)
	}
	r = f.check(t, "id=u&rule=login")
	if d := apitest.RuleDecisionOf(t, r); r.Status != 200 || d.Count != 3 || d.Limit != 3 {
		t.Errorf("check after PUT: got %d %+v, want 200 count 3 of 3", r.Status, d)
	}

	// A new rule, named in the body too.
	r = f.call(t, "PUT", "/rules/new", `{"name":"new","scale":1000,"limit":1,"shadow":true}`)
	if r.Status != 200 || !strings.HasPrefix(string(r.Body), `{"version":3,"rule":{"name":"new",`) {
		t.Errorf("PUT /rules/new: got %d %s, want 200 version 3", r.Status, r.Body)
	}
	r = f.call(t, "GET", "/rules/new", "")
	const get3 = `{"version":3,"rule":{"name":"new","algorithm":"fixed_window","scale":"1s","limit":1,"burst":0,"shadow":true}}`
	if r.Status != 200 || string(r.Body) != get3 {
		t.Errorf("GET /rules/new: got %d %s, want 200 %s", r.Status, r.Body, get3)
	}

	// DELETE, then the next check by that rule is a 400.
	r = f.call(t, "DELETE", "/rules/login", "")
	if r.Status != 200 || string(r.Body) != `{"version":4}` {
		t.Errorf("DELETE /rules/login: got %d %s, want 200 {\"version\":4}", r.Status, r.Body)
	}
	wantError(t, f.check(t, "id=u&rule=login"), 400, apitest.ErrorBody{Error: "rule: is not a configured rule", Field: "rule"})
	wantError(t, f.call(t, "DELETE", "/rules/login", ""), 404, apitest.ErrorBody{Error: `name: no rule is named "login"`, Field: "name"})
	wantError(t, f.call(t, "GET", "/rules/login", ""), 404, apitest.ErrorBody{Error: `name: no rule is named "login"`, Field: "name"})

	// OnRulesChanged heard of each change, in order.
	if got := f.versions(); len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 4 {
		t.Errorf("got OnRulesChanged versions %v, want [2 3 4]", got)
	}
}

// TestAdminPutRuleErrors: a bad rule is a 400 naming the field, and
// changes nothing.
func TestAdminPutRuleErrors(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}, Match: rules.Match{Prefix: "/login"}})
	tests := []struct {
		name, path, body string
		want             apitest.ErrorBody
	}{
		{"scale range", "/rules/x", `{"scale":"0s","limit":1}`, apitest.ErrorBody{Error: "scale: must be between 1ms and 8784h0m0s", Field: "scale"}},
		{"scale form", "/rules/x", `{"scale":"soon","limit":1}`, apitest.ErrorBody{Error: `scale: must be a duration such as "30s" or an integer number of milliseconds`, Field: "scale"}},
		{"scale missing", "/rules/x", `{"limit":1}`, apitest.ErrorBody{Error: "scale: is required", Field: "scale"}},
		{"limit negative", "/rules/x", `{"scale":"1s","limit":-1}`, apitest.ErrorBody{Error: "limit: must not be negative", Field: "limit"}},
		{"limit string", "/rules/x", `{"scale":"1s","limit":"1"}`, apitest.ErrorBody{Error: "limit: must be an integer between 0 and 9223372036854775807", Field: "limit"}},
		{"algorithm", "/rules/x", `{"scale":"1s","limit":1,"algorithm":"fast"}`, apitest.ErrorBody{Error: "", Field: "algorithm"}},
		{"unknown key", "/rules/x", `{"scale":"1s","limit":1,"extra":1}`, apitest.ErrorBody{Error: "extra: is not a known field", Field: "extra"}},
		{"empty key", "/rules/x", `{"scale":"1s","limit":1,"":1}`, apitest.ErrorBody{Error: "body: has a member with an empty name", Field: "body"}},
		{"repeated key", "/rules/x", `{"scale":"1s","limit":1,"limit":2}`, apitest.ErrorBody{Error: "limit: must not be repeated", Field: "limit"}},
		{"name mismatch", "/rules/x", `{"name":"y","scale":"1s","limit":1}`, apitest.ErrorBody{Error: `name: must be the name in the path, "x", or be left out`, Field: "name"}},
		{"name not a string", "/rules/x", `{"name":1,"scale":"1s","limit":1}`, apitest.ErrorBody{Error: "name: must be a JSON string", Field: "name"}},
		{"bad name in path", "/rules/Bad%20Name", `{"scale":"1s","limit":1}`, apitest.ErrorBody{Error: "name: must be 1 to 64 characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit", Field: "name"}},
		{"name with slash", "/rules/a/b", `{"scale":"1s","limit":1}`, apitest.ErrorBody{Error: "", Field: "name"}},
		{"match prefix", "/rules/x", `{"scale":"1s","limit":1,"match":{"prefix":"api"}}`, apitest.ErrorBody{Error: `match.prefix: must start with "/"`, Field: "match.prefix"}},
		{"match taken", "/rules/x", `{"scale":"1s","limit":1,"match":{"prefix":"/LOGIN"}}`, apitest.ErrorBody{Error: "", Field: "match"}},
		{"refill too long", "/rules/x", `{"scale":"8784h","limit":1,"algorithm":"token_bucket","burst":2}`, apitest.ErrorBody{Error: "", Field: "burst"}},
		{"not an object", "/rules/x", `[]`, apitest.ErrorBody{Error: "body: must be a JSON object", Field: "body"}},
		{"null", "/rules/x", `null`, apitest.ErrorBody{Error: "body: must be a JSON object", Field: "body"}},
		{"empty", "/rules/x", ``, apitest.ErrorBody{Error: "body: must be a JSON object", Field: "body"}},
		{"malformed", "/rules/x", `{"scale":`, apitest.ErrorBody{Error: "body: is malformed JSON: unexpected end of input", Field: "body"}},
		{"trailing", "/rules/x", `{"scale":"1s","limit":1} {}`, apitest.ErrorBody{Error: "body: must hold one JSON value and nothing after it", Field: "body"}},
		{"too large", "/rules/x", `{"scale":"1s","limit":1}` + strings.Repeat(" ", 64<<10), apitest.ErrorBody{Error: "body: must be at most 65536 bytes", Field: "body"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := f.call(t, "PUT", tt.path, tt.body)
			if r.Status != 400 {
				t.Fatalf("got status %d, want 400; body %s", r.Status, r.Body)
			}
			var got apitest.ErrorBody
			apitest.DecodeStrict(t, r.Body, &got)
			if got.Field != tt.want.Field || tt.want.Error != "" && got.Error != tt.want.Error || !strings.HasPrefix(got.Error, got.Field+": ") {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Cleanup(func() {
		if v := f.store.Current().Version(); v != 1 {
			t.Errorf("after bad PUTs: got rules version %d, want 1", v)
		}
		if got := f.versions(); len(got) != 0 {
			t.Errorf("got OnRulesChanged versions %v, want none", got)
		}
	})
}

func TestAdminWithoutRules(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	h, err := admin.NewHandler(admin.Options{Backend: backend{sys}, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	noRules := apitest.ErrorBody{Error: "rules are not enabled on this server: it was started without a rules store", Field: ""}
	for _, c := range []struct{ method, path string }{{"GET", "/rules"}, {"GET", "/rules/x"}, {"PUT", "/rules/x"}, {"DELETE", "/rules/x"}} {
		r := apitest.DoHeader(t, c.method, srv.URL+c.path, `{"scale":"1s","limit":1}`, "Authorization", "Bearer "+adminToken)
		wantError(t, r, 404, noRules)
	}
	// Reset by rule: there are none.
	r := apitest.DoHeader(t, "POST", srv.URL+"/reset?id=a&rule=x", "", "Authorization", "Bearer "+adminToken)
	wantError(t, r, 400, apitest.ErrorBody{Error: "rule: no rules are configured", Field: "rule"})
}

func TestAdminReset(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 1}})
	for _, q := range []string{"id=r&scale=1m&limit=1", "id=r&rule=login", "id=r&scale=1m&limit=1&algorithm=token_bucket&burst=1"} {
		if r := f.check(t, q); r.Status != 200 {
			t.Fatalf("%s: got status %d, want 200", q, r.Status)
		}
		if r := f.check(t, q); r.Status != 413 {
			t.Fatalf("%s: got status %d, want 413", q, r.Status)
		}
		r := f.call(t, "POST", "/reset?"+q, "")
		if r.Status != 200 || string(r.Body) != `{"deleted":1}` {
			t.Errorf("reset %s: got %d %s, want 200 {\"deleted\":1}", q, r.Status, r.Body)
		}
		if r := f.check(t, q); r.Status != 200 {
			t.Errorf("%s after reset: got status %d, want 200", q, r.Status)
		}
		r = f.call(t, "POST", "/reset?id=nobody&"+strings.TrimPrefix(q, "id=r&"), "")
		if r.Status != 200 || string(r.Body) != `{"deleted":0}` {
			t.Errorf("reset of nobody: got %d %s, want 200 {\"deleted\":0}", r.Status, r.Body)
		}
	}
	tests := []struct {
		query, body string
		want        apitest.ErrorBody
	}{
		{"", "", apitest.ErrorBody{Error: "id: is required", Field: "id"}},
		{"id=r", "", apitest.ErrorBody{Error: "scale: is required", Field: "scale"}},
		{"id=r&scale=1m&limit=1&hits=1", "", apitest.ErrorBody{Error: "hits: is not a known parameter", Field: "hits"}},
		{"id=r&rule=nope", "", apitest.ErrorBody{Error: "rule: is not a configured rule", Field: "rule"}},
		{"id=r&rule=login&limit=1", "", apitest.ErrorBody{Error: "limit: must not be given with rule: it comes from the rule", Field: "limit"}},
		{"id=r&scale=1m&limit=1", `{"id":"r"}`, apitest.ErrorBody{Error: "body: must be empty: send the parameters in the query", Field: "body"}},
	}
	for _, tt := range tests {
		wantError(t, f.call(t, "POST", "/reset?"+tt.query, tt.body), 400, tt.want)
	}
}

func TestAdminBuckets(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, rules.Rule{Name: "tb", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Second, Limit: 10, Burst: 2}})
	for _, q := range []string{"id=b&scale=1s&limit=3", "id=b&rule=tb", "id=b&scale=1s&limit=3&algorithm=sliding_window&hits=2"} {
		if r := f.check(t, q); r.Status != 200 {
			t.Fatalf("%s: got status %d, want 200", q, r.Status)
		}
	}
	r := f.call(t, "GET", "/buckets?id=b", "")
	const want = `{"id":"b","buckets":[` +
		`{"rule":"","algorithm":"fixed_window","scale_ms":1000,"limit":3,"burst":0,"window":1893456000,"count":1,"previous":0,"created_at":"2030-01-01T00:00:00Z","modified_at":"2030-01-01T00:00:00Z","expired":false},` +
		`{"rule":"","algorithm":"sliding_window","scale_ms":1000,"limit":3,"burst":0,"window":1893456000,"count":2,"previous":0,"created_at":"2030-01-01T00:00:00Z","modified_at":"2030-01-01T00:00:00Z","expired":false},` +
		`{"rule":"tb","algorithm":"token_bucket","scale_ms":1000,"limit":0,"burst":0,"window":1893456000,"count":1,"previous":0,"full_at":"2030-01-01T00:00:00.1Z","created_at":"2030-01-01T00:00:00Z","modified_at":"2030-01-01T00:00:00Z","expired":false}]}`
	if r.Status != 200 || string(r.Body) != want {
		t.Errorf("GET /buckets: got %d\n%s\nwant\n%s", r.Status, r.Body, want)
	}
	r = f.call(t, "GET", "/buckets?id=nobody", "")
	if r.Status != 200 || string(r.Body) != `{"id":"nobody","buckets":[]}` {
		t.Errorf("GET /buckets of nobody: got %d %s", r.Status, r.Body)
	}
	for _, tt := range []struct {
		query string
		want  apitest.ErrorBody
	}{
		{"", apitest.ErrorBody{Error: "id: is required", Field: "id"}},
		{"id=", apitest.ErrorBody{Error: "id: is required", Field: "id"}},
		{"id=b&scale=1s", apitest.ErrorBody{Error: "scale: is not a known parameter", Field: "scale"}},
		{"id=b&id=c", apitest.ErrorBody{Error: "id: must not be repeated", Field: "id"}},
		{"id=" + strings.Repeat("x", 1025), apitest.ErrorBody{Error: "id: must be at most 1024 bytes", Field: "id"}},
	} {
		wantError(t, f.call(t, "GET", "/buckets?"+tt.query, ""), 400, tt.want)
	}
}

func TestAdminStats(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	f.check(t, "id=s&scale=1s&limit=3")
	r := f.call(t, "GET", "/stats", "")
	const want = `{"shards":1,"buckets":1,"restarts":0,"torn_tails":0,"journal_errors":0,"failed_closed":0,"failed_open":0,"snapshots":0,"snapshot_errors":0,"evictions":0,"rejections":0}`
	if r.Status != 200 || string(r.Body) != want {
		t.Errorf("GET /stats: got %d %s, want 200 %s", r.Status, r.Body, want)
	}
}

// failingBackend fails every call with err.
type failingBackend struct{ err error }

func (b failingBackend) Reset(context.Context, table.Request) (int, error)       { return 0, b.err }
func (b failingBackend) Buckets(context.Context, string) ([]table.Bucket, error) { return nil, b.err }
func (b failingBackend) Stats() admin.Stats                                      { return admin.Stats{} }

func TestAdminBackendErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want int
	}{
		{actors.ErrStopped, 503},
		{errors.New("boom"), 503},
		{&table.FieldError{Field: "id", Message: "is required"}, 400},
	} {
		h, err := admin.NewHandler(admin.Options{Backend: failingBackend{tt.err}, Token: adminToken})
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range []*http.Request{
			httptest.NewRequest("POST", "/reset?id=a&scale=1s&limit=1", nil),
			httptest.NewRequest("GET", "/buckets?id=a", nil),
		} {
			req.Header.Set("Authorization", "Bearer "+adminToken)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("%v: %s %s: got status %d, want %d; body %s", tt.err, req.Method, req.URL, rec.Code, tt.want, rec.Body)
			}
			b, _ := io.ReadAll(rec.Body)
			var e apitest.ErrorBody
			apitest.DecodeStrict(t, b, &e)
		}
	}
}

// TestAdminDeleteStopsMiddleware deletes a URL rule through the admin API:
// the middleware, sharing the Store, stops limiting on the very next request.
func TestAdminDeleteStopsMiddleware(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Match: rules.Match{Prefix: "/api"}})
	mw, err := middleware.New(f.sys, middleware.Options{Rules: f.store})
	if err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "app")
	})))
	t.Cleanup(app.Close)
	steps := []struct {
		name       string
		before     func()
		wantStatus int
		wantPolicy string
	}{
		{"first", nil, 200, `"api";q=1;w=3600`},
		{"limited", nil, 413, `"api";q=1;w=3600`},
		{"rule deleted", func() {
			if r := f.call(t, "DELETE", "/rules/api", ""); r.Status != 200 {
				t.Fatalf("DELETE: got status %d", r.Status)
			}
		}, 200, ""},
		{"still unlimited", nil, 200, ""},
		{"rule back", func() {
			if r := f.call(t, "PUT", "/rules/api", `{"scale":"1h","limit":1,"match":{"prefix":"/api"}}`); r.Status != 200 {
				t.Fatalf("PUT: got status %d", r.Status)
			}
		}, 413, `"api";q=1;w=3600`}, // the counts are kept under the rule's name
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		r := apitest.Do(t, http.DefaultClient, "GET", app.URL+"/api/x", "")
		if r.Status != s.wantStatus {
			t.Fatalf("%s: got status %d, want %d; body %s", s.name, r.Status, s.wantStatus, r.Body)
		}
		apitest.WantHeaders(t, r, map[string]string{"RateLimit-Policy": s.wantPolicy})
	}
}

// TestAdminMetrics: with Metrics set, GET /metrics is served, behind the token.
func TestAdminMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	h, err := admin.NewHandler(admin.Options{Backend: backend{actorstest.StartSystem(t)}, Token: "tok", Metrics: m.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Serve(t, h)
	if r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/metrics", ""); r.Status != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without the token: got %d, want 401", r.Status)
	}
	r := apitest.DoHeader(t, "GET", srv.URL+"/metrics", "", "Authorization", "Bearer tok")
	if r.Status != 200 || !strings.Contains(string(r.Body), "ratelimitd_checks_total") {
		t.Fatalf("GET /metrics with the token: got %d %.200s", r.Status, r.Body)
	}
}

// backend is an actor system as the admin API sees it, as the daemon
// adapts it.
type backend struct{ *actors.System }

func (b backend) Stats() admin.Stats { return admin.Stats(b.System.Stats()) }
