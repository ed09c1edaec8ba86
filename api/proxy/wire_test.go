package proxy_test

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/proxy"
	"github.com/ratelimitd/ratelimitd/table"
)

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWireProxy(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	up, _ := url.Parse("http://upstream.test")
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/down" {
			return nil, errors.New("upstream down")
		}
		body := r.Method + " " + r.URL.String() + " xff=" + r.Header.Get("X-Forwarded-For") + " host=" + r.Header.Get("X-Forwarded-Host")
		return &http.Response{StatusCode: 200, Header: http.Header{"X-Up": {"1"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})
	key := func(r *http.Request) string { return r.Header.Get("X-Client") }
	build := func(c api.Checker, opts proxy.Options) http.Handler {
		opts.Upstream, opts.Transport, opts.ClientKey = up, transport, key
		p, err := proxy.New(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	handlers := map[string]http.Handler{
		"layers": build(sys, proxy.Options{
			PerClient: &table.Policy{Scale: time.Minute, Limit: 2},
			PerHost:   &table.Policy{Scale: time.Minute, Limit: 3},
			Global:    &table.Policy{Scale: time.Hour, Limit: 100, Algorithm: table.TokenBucket, Burst: 4},
			Rules:     apitest.WireRules(t),
		}),
	}
	for _, e := range apitest.ErrorCases() {
		handlers[e.Name] = build(&apitest.FakeChecker{Err: e.Err}, proxy.Options{PerClient: &table.Policy{Scale: time.Minute, Limit: 2}})
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
	for _, e := range apitest.ErrorCases() {
		c(e.Name, "a", "one.test", "/x")
	}
	apitest.Wire(t, "proxy", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[r.Header.Get("X-P")].ServeHTTP(w, r)
	}), cases)
}
