package httpapi_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// ruleLog is Metrics that is also an api.RuleRecorder: it keeps what it
// is told.
type ruleLog struct {
	mu      sync.Mutex
	checked []api.Result
	byRule  []ruleResult
}

type ruleResult struct {
	rule string
	res  api.Result
}

func (l *ruleLog) Checked(res api.Result, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked = append(l.checked, res)
}

func (l *ruleLog) CheckedRule(rule string, res api.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byRule = append(l.byRule, ruleResult{rule, res})
}

func (l *ruleLog) Refunded()             {}
func (l *ruleLog) Handler() http.Handler { return http.NotFoundHandler() }

// TestRuleRecorder: Metrics that is an api.RuleRecorder hears of every
// check of a named rule, one by one and in batches (each element), with
// what that check came to: a shadow rule's would-be denial as such; an
// ad-hoc check is no rule's.
func TestRuleRecorder(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	st := apitest.NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}},
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Shadow: true},
	)
	log := &ruleLog{}
	srv := apitest.StartServer(t, sys, httpapi.Options{Rules: st, Metrics: log})
	for _, q := range []string{"id=a&rule=login", "id=a&rule=login", "id=a&rule=login", "id=s&rule=watch", "id=s&rule=watch", "id=x&scale=1s&limit=5"} {
		apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?"+q, "")
	}
	r := apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", `[{"id":"b","rule":"login"},{"id":"c","rule":"login","hits":3},{"id":"y","scale":1000,"limit":1}]`)
	if r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("batch: status %d, want 413; body %s", r.Status, r.Body)
	}
	want := []ruleResult{
		{"login", api.ResultAllowed}, {"login", api.ResultAllowed}, {"login", api.ResultDenied},
		{"watch", api.ResultAllowed}, {"watch", api.ResultShadowDenied},
		{"login", api.ResultAllowed}, {"login", api.ResultDenied},
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if !slices.Equal(log.byRule, want) {
		t.Errorf("by rule: got %+v, want %+v", log.byRule, want)
	}
	if len(log.checked) != 7 {
		t.Errorf("Checked: %d requests, want 7 (a batch is one)", len(log.checked))
	}
}
