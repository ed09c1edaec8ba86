package proxy_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/proxy"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// ruleLog is a Recorder that is also an api.RuleRecorder.
type ruleLog struct {
	mu     sync.Mutex
	byRule []ruleResult
}

type ruleResult struct {
	rule string
	res  api.Result
}

func (l *ruleLog) Checked(api.Result, time.Time) {}
func (l *ruleLog) Refunded()                     {}
func (l *ruleLog) CheckedRule(rule string, res api.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byRule = append(l.byRule, ruleResult{rule, res})
}

// TestProxyRuleRecorder: Metrics that is an api.RuleRecorder hears of every
// check of the rule a request matched, enforced or shadow, with what it
// came to; a request no rule matches is no rule's.
func TestProxyRuleRecorder(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	st, err := rules.NewStore([]rules.Rule{
		{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Match: rules.Match{Prefix: "/api"}},
		{Name: "watch", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Shadow: true, Match: rules.Match{Prefix: "/watch"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	log := &ruleLog{}
	srv := startProxy(t, up.URL, proxy.Options{Rules: st, Metrics: log, PerClient: &table.Policy{Scale: time.Hour, Limit: 100}})
	for _, c := range []struct {
		path   string
		status int
	}{{"/api", 200}, {"/api", 413}, {"/watch", 200}, {"/watch", 200}, {"/elsewhere", 200}} {
		if r := proxyGet(t, srv, c.path, map[string]string{"X-Test-Client": "c"}); r.Status != c.status {
			t.Fatalf("GET %s: got %d, want %d", c.path, r.Status, c.status)
		}
	}
	want := []ruleResult{{"api", api.ResultAllowed}, {"api", api.ResultDenied}, {"watch", api.ResultAllowed}, {"watch", api.ResultShadowDenied}}
	log.mu.Lock()
	defer log.mu.Unlock()
	if !slices.Equal(log.byRule, want) {
		t.Errorf("by rule: got %+v, want %+v", log.byRule, want)
	}
}
