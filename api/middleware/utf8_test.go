package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/middleware"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestMiddlewareKeyMustBeUTF8: a KeyFunc key that is not valid UTF-8 is
// answered 400 naming id, and the request goes no further; a rule's header
// key that is not valid UTF-8 is unusable, as an empty one is: the request
// spends its client's budget.
func TestMiddlewareKeyMustBeUTF8(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t, actors.Config{}) // on a whole hour: t=3600
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
