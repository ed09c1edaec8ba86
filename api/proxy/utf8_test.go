package proxy_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/proxy"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestProxyKeyMustBeUTF8: a ClientKey that is not valid UTF-8 is an unusable
// client address (400, upstream untouched); a rule's header key that is not
// valid UTF-8 falls back to the client's key.
func TestProxyKeyMustBeUTF8(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	st := apitest.NewStore(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Key: "header:X-API-Key", Match: rules.Match{Prefix: "/api"}})
	srv := startProxy(t, up.URL, proxy.Options{Rules: st})
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
