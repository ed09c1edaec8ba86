package admin_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

func TestWireAdmin(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	store := apitest.WireRules(t)
	public, err := httpapi.NewHandler(sys, httpapi.Options{Rules: store})
	if err != nil {
		t.Fatal(err)
	}
	adminH, err := admin.NewHandler(admin.Options{Backend: backend{sys}, Rules: store, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := admin.NewHandler(admin.Options{Backend: backend{sys}, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	failing, err := admin.NewHandler(admin.Options{Backend: failingBackend{errors.New("boom")}, Rules: store, Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]http.Handler{"public": public, "admin": adminH, "bare": bare, "failing": failing}
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
	a("GET", "/rules/.", "")
	a("GET", "/rules/..", "")
	a("GET", "/rules/%2E", "")
	a("PUT", "/rules/%2e%2e", `{"scale":"1s","limit":1}`)
	a("GET", "/rules/a/./b", "")
	a("GET", "/rules/a%20b", "")
	a("DELETE", "/rules/a/b", "")
	a("GET", "/st%61ts", "")
	a("GET", "/rules%2Flogin", "")
	a("HEAD", "/stats", "")
	a("HEAD", "/buckets?id=u", "")
	a("HEAD", "/reset?id=u&rule=login", "")
	a("OPTIONS", "/rules", "")
	a("CONNECT", "/stats", "")
	a("HEAD", "/", "")
	a("GET", "/healthz/", "")
	c("admin", "GET", "/nope/../healthz", "")
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
