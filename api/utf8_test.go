package api_test

import (
	"context"
	"errors"
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
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// The 400 bodies of an id that is not valid UTF-8: raw bytes (any
// transport), and a JSON escape of an unpaired surrogate.
const (
	badUTF8Body      = `{"error":"id: must be valid UTF-8","field":"id"}`
	badSurrogateBody = `{"error":"id: must be valid UTF-8: a surrogate escape (\\uD800 to \\uDFFF) must be half of a pair","field":"id"}`
)

// TestIDMustBeUTF8: every endpoint that takes an id answers 400 naming it,
// with the exact body, when the id is not valid UTF-8 (percent-encoded
// bytes in a query, raw bytes or an unpaired surrogate escape in JSON), and
// counts nothing; ids that are valid, U+FFFD itself included, pass.
func TestIDMustBeUTF8(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}})
	surrogateRule := `must be valid UTF-8: a surrogate escape (\\uD800 to \\uDFFF) must be half of a pair`
	batchBody := func(i int, rule string) string {
		f := "checks[" + strconv.Itoa(i) + "].id"
		return `{"error":"` + f + `: ` + rule + `","field":"` + f + `"}`
	}
	tests := []struct {
		name, method, path, body string
		admin                    bool
		want                     string
	}{
		{"GET check_rate", "GET", "/check_rate?id=%ff&scale=1000&limit=5", "", false, badUTF8Body},
		{"GET check_rate, a cut sequence", "GET", "/check_rate?id=a%e2%82&scale=1000&limit=5", "", false, badUTF8Body},
		{"GET check_rate, an encoded surrogate", "GET", "/check_rate?id=%ed%a0%80&scale=1000&limit=5", "", false, badUTF8Body},
		{"GET check_rate by rule", "GET", "/check_rate?id=a%c0%afb&rule=login", "", false, badUTF8Body},
		{"POST check_rate, raw byte", "POST", "/check_rate", "{\"id\":\"\xff\",\"scale\":1000,\"limit\":5}", false, badUTF8Body},
		{"POST check_rate, raw byte after an escape", "POST", "/check_rate", "{\"id\":\"\\n\xfe\",\"scale\":1000,\"limit\":5}", false, badUTF8Body},
		{"POST check_rate, low surrogate", "POST", "/check_rate", `{"id":"\udc00","scale":1000,"limit":5}`, false, badSurrogateBody},
		{"POST check_rate, high surrogate at the end", "POST", "/check_rate", `{"id":"a\uD800","scale":1000,"limit":5}`, false, badSurrogateBody},
		{"POST check_rate, high surrogate then a letter", "POST", "/check_rate", `{"id":"\ud800\u0041","scale":1000,"limit":5}`, false, badSurrogateBody},
		{"POST check_rate, two high surrogates", "POST", "/check_rate", `{"id":"\ud800\ud800\udc00","scale":1000,"limit":5}`, false, badSurrogateBody},
		{"POST check_rate by rule", "POST", "/check_rate", `{"id":"\udfff","rule":"login"}`, false, badSurrogateBody},
		{"POST batch, raw byte", "POST", "/check_rate", "[{\"id\":\"a\",\"scale\":1000,\"limit\":5},{\"id\":\"b\x80\",\"scale\":1000,\"limit\":5}]", false,
			batchBody(1, "must be valid UTF-8")},
		{"POST batch, surrogate", "POST", "/check_rate", `[{"id":"\udc00x","rule":"login"},{"id":"a","scale":1000,"limit":5}]`, false,
			batchBody(0, surrogateRule)},
		{"GET refund", "GET", "/refund?id=%ff&scale=1000&limit=5&hits=-1", "", false, badUTF8Body},
		{"POST refund", "POST", "/refund", "{\"id\":\"\xff\",\"scale\":1000,\"limit\":5,\"hits\":-1}", false, badUTF8Body},
		{"POST refund, surrogate", "POST", "/refund", `{"id":"\udc00","rule":"login","hits":-1}`, false, badSurrogateBody},
		{"admin reset", "POST", "/reset?id=%ff&scale=1000&limit=5", "", true, badUTF8Body},
		{"admin reset by rule", "POST", "/reset?id=%ff&rule=login", "", true, badUTF8Body},
		{"admin buckets", "GET", "/buckets?id=%fe%ff", "", true, badUTF8Body},
	}
	for _, tt := range tests {
		var r apitest.Response
		if tt.admin {
			r = f.call(t, tt.method, tt.path, tt.body)
		} else {
			r = apitest.Do(t, http.DefaultClient, tt.method, f.public+tt.path, tt.body)
		}
		if r.Status != http.StatusBadRequest || string(r.Body) != tt.want {
			t.Errorf("%s: got %d %s, want 400 %s", tt.name, r.Status, r.Body, tt.want)
		}
	}
	// Nothing was counted: U+FFFD, which the bytes above used to become, has
	// a bucket of its own, untouched, and distinct from a surrogate pair's.
	valid := []struct{ method, path, body, id string }{
		{"POST", "/check_rate", `{"id":"\ufffd","scale":1000,"limit":5}`, "\ufffd"},
		{"GET", "/check_rate?id=%ef%bf%bd&scale=1000&limit=5", "", "\ufffd"},
		{"POST", "/check_rate", `{"id":"\ud83d\ude00","scale":1000,"limit":5}`, "😀"},
		{"GET", "/check_rate?id=%f0%9f%98%80&scale=1000&limit=5", "", "😀"},
	}
	for i, v := range valid {
		r := apitest.Do(t, http.DefaultClient, v.method, f.public+v.path, v.body)
		if r.Status != http.StatusOK {
			t.Fatalf("%s %s: got %d %s, want 200", v.method, v.path, r.Status, r.Body)
		}
		d := apitest.Decision(t, r)
		if want := int64(i%2 + 1); d.ID != v.id || d.Count != want {
			t.Errorf("%s %s: got id %q count %d, want %q count %d", v.method, v.path, d.ID, d.Count, v.id, want)
		}
	}
}

// TestMiddlewareKeyMustBeUTF8: a KeyFunc key that is not valid UTF-8 is
// answered 400 naming id, and the request goes no further; a rule's header
// key that is not valid UTF-8 is unusable, as an empty one is: the request
// spends its client's budget.
func TestMiddlewareKeyMustBeUTF8(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t, actors.Config{}) // on a whole hour: t=3600
	st := apitest.NewStore(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 2}, Key: "header:X-API-Key", Match: rules.Match{Prefix: "/api"}})
	mw, err := api.Middleware(sys, api.MiddlewareOptions{Rules: st, Policy: table.Policy{Scale: time.Hour, Limit: 5}, KeyFunc: keyHeader})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) })))
	t.Cleanup(srv.Close)

	r := apitest.DoHeader(t, "GET", srv.URL+"/page", "", "X-Key", "c\xff")
	if r.Status != http.StatusBadRequest || string(r.Body) != badUTF8Body {
		t.Errorf("KeyFunc key not UTF-8: got %d %s, want 400 %s", r.Status, r.Body, badUTF8Body)
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

// TestProxyKeyMustBeUTF8: a ClientKey that is not valid UTF-8 is an unusable
// client address (400, upstream untouched); a rule's header key that is not
// valid UTF-8 falls back to the client's key.
func TestProxyKeyMustBeUTF8(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	st := apitest.NewStore(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Key: "header:X-API-Key", Match: rules.Match{Prefix: "/api"}})
	srv := startProxy(t, up.URL, api.ProxyOptions{Rules: st})
	r := proxyGet(t, srv, "/api/x", map[string]string{"X-Test-Client": "203.0.113.7\xff"})
	if want := `{"error":"the client address is unusable","field":""}`; r.Status != http.StatusBadRequest || string(r.Body) != want {
		t.Errorf("client key not UTF-8: got %d %s, want 400 %s", r.Status, r.Body, want)
	}
	steps := []struct {
		client, key string
		status      int
		id          string // the id of the denial's body
	}{
		{"203.0.113.7", "k\xff", 200, ""},
		{"203.0.113.7", "k\xfe", 413, "203.0.113.7"}, // the same client's budget, spent
		{"198.51.100.1", "k\xff", 200, ""},
	}
	for i, s := range steps {
		r := proxyGet(t, srv, "/api/x", map[string]string{"X-Test-Client": s.client, "X-API-Key": s.key})
		if r.Status != s.status {
			t.Fatalf("step %d: got %d %s, want %d", i, r.Status, r.Body, s.status)
		}
		if s.id != "" {
			var d apitest.RuleDecision
			apitest.DecodeStrict(t, r.Body, &d)
			if d.ID != s.id || d.Rule != "api" || d.Count != 1 || d.Limit != 1 {
				t.Errorf("step %d: got %+v, want count 1 of 1 for %q under api", i, d, s.id)
			}
		}
	}
	if got := up.hits.Load(); got != 2 {
		t.Errorf("the upstream saw %d requests, want 2", got)
	}
}

// TestSystemRefusesIDsNotUTF8: the embedded path, which the handlers rely
// on for keys they do not parse, refuses an id that is not valid UTF-8 with
// a *table.FieldError on id (on checks[I].id in a batch).
func TestSystemRefusesIDsNotUTF8(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t, actors.Config{})
	ctx := context.Background()
	ok := table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1}
	bad := ok
	bad.ID = "a\xffb"
	want := func(name string, err error, field string) {
		t.Helper()
		var fe *table.FieldError
		if !errors.As(err, &fe) || *fe != (table.FieldError{Field: field, Message: "must be valid UTF-8"}) || !errors.Is(err, table.ErrInvalid) {
			t.Errorf("%s: got %v, want the FieldError %s: must be valid UTF-8", name, err, field)
		}
	}
	_, err := sys.Check(ctx, bad)
	want("Check", err, "id")
	_, _, err = sys.CheckAll(ctx, []table.Request{ok, bad})
	want("CheckAll", err, "id")
	if ie := (*table.IndexError)(nil); !errors.As(err, &ie) || ie.Index != 1 {
		t.Errorf("CheckAll: got %v, want the error of check 1", err)
	}
	_, err = sys.Refund(ctx, bad)
	want("Refund", err, "id")
	_, err = sys.Reset(ctx, bad)
	want("Reset", err, "id")
	if d, err := sys.Check(ctx, ok); err != nil || d.Count != 1 {
		t.Errorf("the valid request after them: got %+v, %v, want count 1: the batch counted nothing", d, err)
	}
}
