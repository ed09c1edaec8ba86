package middleware_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/middleware"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestWireMiddleware(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	store := apitest.WireRules(t)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "next") })
	key := func(r *http.Request) string { return r.Header.Get("X-Client") }
	build := func(opts middleware.Options) http.Handler {
		opts.KeyFunc = key
		mw, err := middleware.New(sys, opts)
		if err != nil {
			t.Fatal(err)
		}
		return mw(next)
	}
	fixed := table.Policy{Scale: time.Minute, Limit: 1}
	handlers := map[string]http.Handler{
		"fixed":  build(middleware.Options{Policy: fixed}),
		"429":    build(middleware.Options{Policy: fixed, DenyStatus: 429}),
		"rules":  build(middleware.Options{Policy: fixed, Rules: store}),
		"rule":   build(middleware.Options{Rules: store, Rule: "slow"}),
		"shadow": build(middleware.Options{Rules: store, Rule: "watch"}),
		"quiet":  build(middleware.Options{Policy: fixed, NoRateLimitHeaders: true}),
		"ondeny": build(middleware.Options{Policy: fixed, OnDeny: func(w http.ResponseWriter, r *http.Request, d table.Decision) {
			w.WriteHeader(418)
			fmt.Fprintf(w, "denied %d", d.Count)
		}}),
	}
	for _, e := range apitest.ErrorCases() {
		mw, err := middleware.New(&apitest.FakeChecker{Err: e.Err}, middleware.Options{Policy: fixed, KeyFunc: key})
		if err != nil {
			t.Fatal(err)
		}
		handlers[e.Name] = mw(next)
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
	for _, e := range apitest.ErrorCases() {
		c(e.Name, "a", "/x")
	}
	apitest.Wire(t, "middleware", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[r.Header.Get("X-Mw")].ServeHTTP(w, r)
	}), cases)
}
