package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// wireRules are the rules of the wire tests: slow and slowwatch ask the
// table for a refill time over table.MaxScale.
func wireRules(t *testing.T) *rules.Store {
	t.Helper()
	return apitest.NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Hour, Limit: 2}},
		rules.Rule{Name: "slow", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}},
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Shadow: true},
		rules.Rule{Name: "slowwatch", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}, Shadow: true},
		rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Key: "header:X-Key", Match: rules.Match{Prefix: "/api"}},
	)
}

// refill is the policy members of an ad-hoc check whose refill time is
// over table.MaxScale: valid member by member, refused by the table.
const refill = `"scale":"8784h","limit":1,"algorithm":"token_bucket","burst":2`

// errorCheckers are Checkers failing with each kind of error.
func errorCheckers() []struct {
	name string
	err  error
} {
	return []struct {
		name string
		err  error
	}{
		{"stopped", actors.ErrStopped},
		{"unavailable", actors.ErrUnavailable},
		{"journal", fmt.Errorf("%w: %w: disk full", actors.ErrUnavailable, actors.ErrJournal)},
		{"canceled", context.Canceled},
		{"deadline", fmt.Errorf("wrapped: %w", context.DeadlineExceeded)},
		{"other", errors.New("boom")},
		{"field", &table.FieldError{Field: "limit", Message: "must be small"}},
	}
}

func TestWireCheck(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t, actors.Config{})
	h, err := api.NewHandler(sys, api.Options{Rules: wireRules(t), Metrics: api.NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	var cases []apitest.Case
	for _, b := range badInputs() {
		target := "/check_rate"
		if b.path != "" {
			target = b.path
		}
		if b.query != "" {
			target += "?" + b.query
		}
		cases = append(cases, apitest.Case{Name: b.name, Method: b.method, Target: target, Body: b.body})
	}
	get := func(name, q string) apitest.Case {
		return apitest.Case{Name: name, Method: "GET", Target: "/check_rate?" + q}
	}
	post := func(name, body string) apitest.Case {
		return apitest.Case{Name: name, Method: "POST", Target: "/check_rate", Body: body}
	}
	refund := func(name, q string) apitest.Case {
		return apitest.Case{Name: name, Method: "GET", Target: "/refund?" + q}
	}
	ok := `{"id":"ok","scale":1000,"limit":3}`
	bad := `{"id":"r",` + refill + `}`
	many := func(first string, n int, last string) string {
		return "[" + first + strings.Repeat(","+ok, n) + "," + last + "]"
	}
	cases = append(cases,
		get("refill", "id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2"),
		get("refill then unknown", "id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2&x=1"),
		post("refill", bad),
		post("refill then garbage", bad+" x"),
		post("refill then object", bad+"{}"),
		post("refill cut", `{"id":"r",`+refill),
		post("batch refill", "["+bad+"]"),
		post("batch refill then missing limit", "["+bad+`,{"id":"b","scale":1000}]`),
		post("batch refill then malformed", "["+bad+`,{"id":"b",]`),
		post("batch refill then cut", "["+bad+`,{"id":"b"`),
		post("batch refill then garbage", "["+bad+"] x"),
		post("batch ok then refill", "["+ok+","+bad+"]"),
		post("batch refill then unknown rule", "["+bad+`,{"id":"b","rule":"nope"}]`),
		post("batch unknown rule then refill", `[{"id":"b","rule":"nope"},`+bad+"]"),
		post("batch slow then unknown rule", `[{"id":"b","rule":"slow"},{"id":"b","rule":"nope"}]`),
		post("batch unknown rule then slow", `[{"id":"b","rule":"nope"},{"id":"b","rule":"slow"}]`),
		post("batch slow then refill", `[{"id":"b","rule":"slow"},`+bad+"]"),
		post("batch refill then slow", "["+bad+`,{"id":"b","rule":"slow"}]`),
		post("batch slow shadow", `[{"id":"b","rule":"slowwatch"},`+ok+"]"),
		post("batch shadow then refill", `[{"id":"b","rule":"watch"},`+bad+"]"),
		post("batch refill then too many", many(bad, 1000, ok)),
		post("batch too many then refill", many(ok, 1000, bad)),
		post("batch most then refill", many(ok, 998, bad)),
		get("slow", "id=a&rule=slow"),
		get("slow shadow", "id=a&rule=slowwatch"),
		refund("refill", "id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2&hits=-1"),
		refund("slow", "id=a&rule=slow&hits=-1"),
		apitest.Case{Name: "refund post refill", Method: "POST", Target: "/refund", Body: `{"id":"r",` + refill + `,"hits":-1}`},
		apitest.Case{Name: "refund post refill then garbage", Method: "POST", Target: "/refund", Body: `{"id":"r",` + refill + `,"hits":-1} x`},

		get("allowed", "id=g&scale=30s&limit=2"),
		get("allowed again", "id=g&scale=30s&limit=2"),
		get("denied", "id=g&scale=30s&limit=2"),
		get("peek", "id=g&scale=30s&limit=2&hits=0"),
		get("token bucket", "id=g&scale=1s&limit=5&algorithm=token_bucket&burst=3&hits=2"),
		get("leaky bucket", "id=g&scale=1s&limit=5&algorithm=leaky_bucket"),
		get("leaky bucket denied", "id=g&scale=1s&limit=5&algorithm=leaky_bucket"),
		get("sliding window", "id=g&scale=1m&limit=5&algorithm=sliding_window&hits=5"),
		get("sliding window denied", "id=g&scale=1m&limit=5&algorithm=sliding_window"),
		get("rule", "id=g&rule=login"),
		get("rule again", "id=g&rule=login"),
		get("rule denied", "id=g&rule=login"),
		get("shadow", "id=g&rule=watch"),
		get("shadow denied", "id=g&rule=watch"),
		get("escaped id", "id=%22q%22%5C%0A%e2%82%ac&scale=1s&limit=1"),
		post("post", `{"id":"p","scale":"30s","limit":2,"hits":2}`),
		post("post denied", `{"id":"p","scale":"30s","limit":2}`),
		post("batch allowed", `[{"id":"b1","scale":"1m","limit":5,"hits":2},{"id":"b1","rule":"login"},{"id":"b1","rule":"watch"}]`),
		post("batch denied", `[{"id":"b1","scale":"1m","limit":5,"hits":4},{"id":"b1","rule":"login"},{"id":"b1","rule":"watch"}]`),
		post("batch denied twice", `[{"id":"b2","scale":"1m","limit":1,"hits":2},{"id":"b2","scale":"1h","limit":1,"hits":3}]`),
		post("batch of shadows", `[{"id":"b3","rule":"watch"},{"id":"b3","rule":"watch"}]`),
		refund("refund", "id=g&scale=30s&limit=2&hits=-1"),
		refund("refund rule", "id=g&rule=login&hits=-5"),
		refund("refund window", "id=g&scale=30s&limit=2&hits=-1&window=1893456000000"),
		refund("refund old window", "id=g&scale=30s&limit=2&hits=-1&window=1893455970000"),

		apitest.Case{Name: "healthz", Method: "GET", Target: "/healthz"},
		apitest.Case{Name: "healthz head", Method: "HEAD", Target: "/healthz"},
		apitest.Case{Name: "healthz post", Method: "POST", Target: "/healthz"},
		apitest.Case{Name: "check_rate put", Method: "PUT", Target: "/check_rate"},
		apitest.Case{Name: "refund delete", Method: "DELETE", Target: "/refund"},
		apitest.Case{Name: "metrics post", Method: "POST", Target: "/metrics"},
		apitest.Case{Name: "unknown", Method: "GET", Target: "/nope"},
		apitest.Case{Name: "unclean", Method: "GET", Target: "//check_rate?id=a&scale=1s&limit=1"},
		apitest.Case{Name: "admin path", Method: "GET", Target: "/rules"},
	)
	apitest.Wire(t, "check", h, cases)
}

func TestWireCheckFull(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t, actors.Config{MaxBuckets: 1})
	h, err := api.NewHandler(sys, api.Options{Rules: wireRules(t)})
	if err != nil {
		t.Fatal(err)
	}
	apitest.Wire(t, "check-full", h, []apitest.Case{
		{Name: "first", Method: "GET", Target: "/check_rate?id=a&scale=10s&limit=5"},
		{Name: "full", Method: "GET", Target: "/check_rate?id=b&scale=10s&limit=5"},
		{Name: "full by rule", Method: "GET", Target: "/check_rate?id=b&rule=login"},
		{Name: "full shadow", Method: "GET", Target: "/check_rate?id=b&rule=watch"},
		{Name: "full batch", Method: "POST", Target: "/check_rate", Body: `[{"id":"a","scale":"10s","limit":5},{"id":"c","scale":"1m","limit":5}]`},
		{Name: "full and denied batch", Method: "POST", Target: "/check_rate", Body: `[{"id":"a","scale":"10s","limit":5,"hits":9},{"id":"c","scale":"1m","limit":5}]`},
		{Name: "peek", Method: "GET", Target: "/check_rate?id=b&scale=10s&limit=5&hits=0"},
	})
}

func TestWireCheckErrors(t *testing.T) {
	t.Parallel()
	var cases []apitest.Case
	handlers := map[string]http.Handler{}
	for _, e := range errorCheckers() {
		h, err := api.NewHandler(&apitest.FakeChecker{Err: e.err}, api.Options{Rules: wireRules(t)})
		if err != nil {
			t.Fatal(err)
		}
		handlers[e.name] = h
		cases = append(cases,
			apitest.Case{Name: e.name + " check", Method: "GET", Target: "/check_rate?id=a&scale=1s&limit=1", Header: []string{"X-Checker", e.name}},
			apitest.Case{Name: e.name + " batch", Method: "POST", Target: "/check_rate", Body: `[{"id":"a","scale":1000,"limit":1},{"id":"a","rule":"watch"}]`, Header: []string{"X-Checker", e.name}},
			apitest.Case{Name: e.name + " refund", Method: "GET", Target: "/refund?id=a&scale=1s&limit=1&hits=-1", Header: []string{"X-Checker", e.name}},
		)
	}
	apitest.Wire(t, "check-errors", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[r.Header.Get("X-Checker")].ServeHTTP(w, r)
	}), cases)
}

func TestWireMiddleware(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t, actors.Config{})
	store := wireRules(t)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "next") })
	key := func(r *http.Request) string { return r.Header.Get("X-Client") }
	build := func(opts api.MiddlewareOptions) http.Handler {
		opts.KeyFunc = key
		mw, err := api.Middleware(sys, opts)
		if err != nil {
			t.Fatal(err)
		}
		return mw(next)
	}
	fixed := table.Policy{Scale: time.Minute, Limit: 1}
	handlers := map[string]http.Handler{
		"fixed":  build(api.MiddlewareOptions{Policy: fixed}),
		"429":    build(api.MiddlewareOptions{Policy: fixed, DenyStatus: 429}),
		"rules":  build(api.MiddlewareOptions{Policy: fixed, Rules: store}),
		"rule":   build(api.MiddlewareOptions{Rules: store, Rule: "slow"}),
		"shadow": build(api.MiddlewareOptions{Rules: store, Rule: "watch"}),
		"quiet":  build(api.MiddlewareOptions{Policy: fixed, NoRateLimitHeaders: true}),
		"ondeny": build(api.MiddlewareOptions{Policy: fixed, OnDeny: func(w http.ResponseWriter, r *http.Request, d table.Decision) {
			w.WriteHeader(418)
			fmt.Fprintf(w, "denied %d", d.Count)
		}}),
	}
	for _, e := range errorCheckers() {
		mw, err := api.Middleware(&apitest.FakeChecker{Err: e.err}, api.MiddlewareOptions{Policy: fixed, KeyFunc: key})
		if err != nil {
			t.Fatal(err)
		}
		handlers[e.name] = mw(next)
	}
	var cases []apitest.Case
	c := func(mw, client, target string) {
		cases = append(cases, apitest.Case{Name: mw + " " + client + " " + target, Method: "GET", Target: target, Header: []string{"X-Mw", mw, "X-Client", client, "X-Key", "k"}})
	}
	for _, mw := range []string{"fixed", "429", "quiet", "ondeny"} {
		c(mw, "a", "/x")
		c(mw, "a", "/x")
		c(mw, "", "/x")
		c(mw, strings.Repeat("x", table.MaxIDLen+1), "/x")
		c(mw, "\xff", "/x")
	}
	c("rules", "b", "/api/v1")
	c("rules", "b", "/api/v1")
	c("rules", "b", "//api/../api/v2")
	c("rules", "b", "/other")
	c("rule", "b", "/x")
	c("shadow", "b", "/x")
	c("shadow", "b", "/x")
	for _, e := range errorCheckers() {
		c(e.name, "a", "/x")
	}
	apitest.Wire(t, "middleware", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[r.Header.Get("X-Mw")].ServeHTTP(w, r)
	}), cases)
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWireProxy(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t, actors.Config{})
	up, _ := url.Parse("http://upstream.test")
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/down" {
			return nil, errors.New("upstream down")
		}
		body := r.Method + " " + r.URL.String() + " xff=" + r.Header.Get("X-Forwarded-For") + " host=" + r.Header.Get("X-Forwarded-Host")
		return &http.Response{StatusCode: 200, Header: http.Header{"X-Up": {"1"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})
	key := func(r *http.Request) string { return r.Header.Get("X-Client") }
	build := func(c api.Checker, opts api.ProxyOptions) http.Handler {
		opts.Upstream, opts.Transport, opts.ClientKey = up, transport, key
		p, err := api.NewProxy(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	handlers := map[string]http.Handler{
		"layers": build(sys, api.ProxyOptions{
			PerClient: &table.Policy{Scale: time.Minute, Limit: 2},
			PerHost:   &table.Policy{Scale: time.Minute, Limit: 3},
			Global:    &table.Policy{Scale: time.Hour, Limit: 100, Algorithm: table.TokenBucket, Burst: 4},
			Rules:     wireRules(t),
		}),
	}
	for _, e := range errorCheckers() {
		handlers[e.name] = build(&apitest.FakeChecker{Err: e.err}, api.ProxyOptions{PerClient: &table.Policy{Scale: time.Minute, Limit: 2}})
	}
	var cases []apitest.Case
	c := func(p, client, host, target string) {
		cases = append(cases, apitest.Case{Name: p + " " + client + " " + host + " " + target, Method: "GET", Target: "http://" + host + target, Header: []string{"X-P", p, "X-Client", client, "X-Key", "k"}})
	}
	c("layers", "a", "one.test", "/x")
	c("layers", "a", "one.test", "/x")
	c("layers", "a", "one.test", "/x")
	c("layers", "b", "one.test", "/x")
	c("layers", "c", "one.test", "/x")
	c("layers", "d", "two.test:8080", "/api/v1")
	c("layers", "d", "two.test", "/api/v1")
	c("layers", "e", "three.test", "/down")
	c("layers", "", "three.test", "/x")
	c("layers", "\xff", "three.test", "/x")
	for _, e := range errorCheckers() {
		c(e.name, "a", "one.test", "/x")
	}
	apitest.Wire(t, "proxy", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[r.Header.Get("X-P")].ServeHTTP(w, r)
	}), cases)
}

func TestWireAdmin(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t, actors.Config{})
	store := wireRules(t)
	public, err := api.NewHandler(sys, api.Options{Rules: store})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := api.NewAdminHandler(api.AdminOptions{Backend: sys, Rules: store, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := api.NewAdminHandler(api.AdminOptions{Backend: sys, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	failing, err := api.NewAdminHandler(api.AdminOptions{Backend: failingBackend{errors.New("boom")}, Rules: store, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]http.Handler{"public": public, "admin": admin, "bare": bare, "failing": failing}
	auth := "Bearer " + adminToken
	var cases []apitest.Case
	c := func(h, method, target, body string, header ...string) {
		cases = append(cases, apitest.Case{Name: h + " " + method + " " + target, Method: method, Target: target, Body: body, Header: append([]string{"X-H", h}, header...)})
	}
	a := func(method, target, body string) { c("admin", method, target, body, "Authorization", auth) }
	c("public", "GET", "/check_rate?id=u&rule=login", "")
	c("public", "GET", "/check_rate?id=u&scale=1m&limit=5&hits=2", "")
	c("admin", "GET", "/rules", "")
	c("admin", "GET", "/nope", "")
	c("admin", "GET", "/rules", "", "Authorization", "Bearer wrong")
	c("admin", "GET", "/healthz", "")
	c("admin", "HEAD", "/healthz", "")
	c("admin", "POST", "/healthz", "")
	c("admin", "GET", "//healthz", "")
	a("GET", "/rules", "")
	a("HEAD", "/rules", "")
	a("POST", "/rules", "")
	a("GET", "/rules/login", "")
	a("HEAD", "/rules/login", "")
	a("GET", "/rules/nope", "")
	a("GET", "/rules/a/b", "")
	a("GET", "/rules/a%2Fb", "")
	a("GET", "/rules/a/../login", "")
	a("GET", "/rules//login", "")
	a("GET", "/rules/", "")
	a("GET", "/rules/login/", "")
	a("PATCH", "/rules/login", "")
	a("PUT", "/rules/a/b", `{"scale":"1s","limit":1}`)
	a("PUT", "/rules/new", `{"scale":"1s","limit":1}`)
	a("PUT", "/rules/new", `{"name":"other","scale":"1s","limit":1}`)
	a("PUT", "/rules/new", `{"scale":"1s","limit":1,"limit":2}`)
	a("PUT", "/rules/new", `{"scale":"1s","limit":-1}`)
	a("PUT", "/rules/new", `{"scale":"8784h","limit":1,"algorithm":"token_bucket","burst":2}`)
	a("PUT", "/rules/new", `{"scale":"1s","limit":1,"match":{"prefix":"/api"}}`)
	a("PUT", "/rules/new", `{"scale":"1s","limit":1,"bogus":1}`)
	a("PUT", "/rules/new", `{"scale":"1s"`)
	a("PUT", "/rules/new", `[1]`)
	a("PUT", "/rules/new", `{"scale":"1s","limit":1} x`)
	a("PUT", "/rules/new", strings.Repeat(" ", 64<<10+1))
	a("GET", "/rules/new", "")
	a("DELETE", "/rules/new", "")
	a("DELETE", "/rules/new", "")
	a("GET", "/rules", "")
	a("POST", "/reset?id=u&rule=login", "")
	a("POST", "/reset?id=u&scale=1m&limit=5", "")
	a("POST", "/reset?id=u&rule=slow", "")
	a("POST", "/reset?id=u&rule=nope", "")
	a("POST", "/reset?id=u&scale=1m&limit=5&hits=1", "")
	a("POST", "/reset?id=u&scale=1m&limit=5", "x")
	a("GET", "/reset?id=u&rule=login", "")
	c("public", "GET", "/check_rate?id=u&rule=login", "")
	a("GET", "/buckets?id=u", "")
	a("GET", "/buckets", "")
	a("GET", "/buckets?id=u&scale=1s", "")
	a("POST", "/buckets?id=u", "")
	a("GET", "/stats", "")
	a("POST", "/stats", "")
	a("GET", "/metrics", "")
	a("GET", "/", "")
	a("GET", "/rulesx", "")
	a("GET", "//rules", "")
	a("GET", "/stats/", "")
	a("GET", "/x/../stats", "")
	a("GET", "/check_rate?id=a&scale=1s&limit=1", "")
	c("bare", "GET", "/rules", "", "Authorization", auth)
	c("bare", "GET", "/rules/x", "", "Authorization", auth)
	c("bare", "PUT", "/rules/x", `{"scale":"1s","limit":1}`, "Authorization", auth)
	c("bare", "POST", "/reset?id=u&rule=login", "", "Authorization", auth)
	c("bare", "POST", "/reset?id=u&scale=1m&limit=5", "", "Authorization", auth)
	c("failing", "POST", "/reset?id=u&scale=1m&limit=5", "", "Authorization", auth)
	c("failing", "GET", "/buckets?id=u", "", "Authorization", auth)
	apitest.Wire(t, "admin", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[r.Header.Get("X-H")].ServeHTTP(w, r)
	}), cases)
}
