package httpapi_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// ruleStep is one request of a flow by rule.
type ruleStep struct {
	method     string
	query      string // GET query, or POST body
	wantStatus int
	want       apitest.RuleDecision
	wantRetry  string // Retry-After; "" for none
	wantPolicy string
}

func runRuleSteps(t *testing.T, srvURL string, steps []ruleStep) {
	t.Helper()
	for i, s := range steps {
		var r apitest.Response
		if s.method == http.MethodGet {
			r = apitest.Do(t, http.DefaultClient, s.method, srvURL+"/check_rate?"+s.query, "")
		} else {
			r = apitest.Do(t, http.DefaultClient, s.method, srvURL+"/check_rate", s.query)
		}
		if r.Status != s.wantStatus {
			t.Fatalf("step %d %s %s: got status %d, want %d; body %s", i, s.method, s.query, r.Status, s.wantStatus, r.Body)
		}
		var got apitest.RuleDecision
		apitest.DecodeStrict(t, r.Body, &got)
		if got != s.want {
			t.Errorf("step %d %s %s: got %+v, want %+v", i, s.method, s.query, got, s.want)
		}
		apitest.WantHeaders(t, r, map[string]string{"Retry-After": s.wantRetry, "RateLimit-Policy": s.wantPolicy})
	}
}

func TestCheckByRule(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	st := apitest.NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}},
		rules.Rule{Name: "tb", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Second, Limit: 10, Burst: 2}},
		rules.Rule{Name: "closed", Policy: table.Policy{Scale: time.Second, Limit: 0}},
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Shadow: true},
	)
	srv := apitest.StartServer(t, sys, httpapi.Options{Rules: st})
	ok := func(id, rule string, count, limit, resetMs int64) apitest.RuleDecision {
		return apitest.RuleDecision{Allowed: true, ID: id, Rule: rule, Count: count, Limit: limit, Remaining: limit - count, ResetMs: resetMs}
	}
	no := func(id, rule string, count, limit, resetMs, retryMs int64) apitest.RuleDecision {
		return apitest.RuleDecision{ID: id, Rule: rule, Count: count, Limit: limit, Remaining: limit - count, ResetMs: resetMs, RetryAfterMs: retryMs}
	}
	shadowNo := no("s", "watch", 1, 1, 60000, 60000)
	shadowNo.Allowed, shadowNo.ShadowDenied = true, true
	tests := []struct {
		name  string
		steps []ruleStep
	}{
		{"fixed window by GET and POST", []ruleStep{
			{"GET", "id=a&rule=login", 200, ok("a", "login", 1, 2, 60000), "", `"login";q=2;w=60`},
			{"POST", `{"id":"a","rule":"login"}`, 200, ok("a", "login", 2, 2, 60000), "", `"login";q=2;w=60`},
			{"GET", "id=a&rule=login", 413, no("a", "login", 2, 2, 60000, 60000), "60", `"login";q=2;w=60`},
			{"POST", `{"id":"a","rule":"login","hits":0}`, 413, no("a", "login", 2, 2, 60000, 60000), "60", `"login";q=2;w=60`},
		}},
		{"rule and ad hoc do not share counters", []ruleStep{
			{"GET", "id=b&rule=login&hits=2", 200, ok("b", "login", 2, 2, 60000), "", `"login";q=2;w=60`},
			{"GET", "id=b&scale=60000&limit=2", 200, ok("b", "", 1, 2, 60000), "", `"default";q=2;w=60`},
		}},
		{"token bucket rule with burst", []ruleStep{
			{"GET", "id=c&rule=tb&hits=2", 200, ok("c", "tb", 2, 2, 200), "", `"tb";q=2;w=1`},
			{"POST", `{"id":"c","rule":"tb"}`, 413, no("c", "tb", 2, 2, 200, 100), "1", `"tb";q=2;w=1`},
		}},
		{"limit 0 denies everything", []ruleStep{
			{"GET", "id=d&rule=closed", 413, no("d", "closed", 0, 0, 1000, 1000), "1", `"closed";q=0;w=1`},
		}},
		{"shadow rule never denies", []ruleStep{
			{"GET", "id=s&rule=watch", 200, ok("s", "watch", 1, 1, 60000), "", `"watch";q=1;w=60`},
			{"GET", "id=s&rule=watch", 200, shadowNo, "", `"watch";q=1;w=60`},
			{"POST", `{"id":"s","rule":"watch"}`, 200, shadowNo, "", `"watch";q=1;w=60`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runRuleSteps(t, srv.URL, tt.steps)
		})
	}
}

// TestCheckByRuleErrors checks the 400s of checks by rule, word for word.
func TestCheckByRuleErrors(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	withRules := apitest.StartServer(t, sys, httpapi.Options{Rules: apitest.NewStore(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}})})
	emptyRules := apitest.StartServer(t, sys, httpapi.Options{Rules: apitest.NewStore(t)})
	noRules := apitest.StartServer(t, sys, httpapi.Options{})
	tests := []struct {
		name   string
		srv    string
		method string
		query  string // or body
		want   apitest.ErrorBody
	}{
		{"rule and scale", withRules.URL, "GET", "id=a&rule=login&scale=1s", apitest.ErrorBody{Error: "scale: must not be given with rule: it comes from the rule", Field: "scale"}},
		{"rule and limit", withRules.URL, "POST", `{"id":"a","rule":"login","limit":3}`, apitest.ErrorBody{Error: "limit: must not be given with rule: it comes from the rule", Field: "limit"}},
		{"rule and algorithm", withRules.URL, "GET", "id=a&algorithm=token_bucket&rule=login", apitest.ErrorBody{Error: "algorithm: must not be given with rule: it comes from the rule", Field: "algorithm"}},
		{"rule and burst", withRules.URL, "GET", "id=a&rule=login&burst=3", apitest.ErrorBody{Error: "burst: must not be given with rule: it comes from the rule", Field: "burst"}},
		{"unknown rule", withRules.URL, "GET", "id=a&rule=logout", apitest.ErrorBody{Error: "rule: is not a configured rule", Field: "rule"}},
		{"unknown rule post", withRules.URL, "POST", `{"id":"a","rule":"logout"}`, apitest.ErrorBody{Error: "rule: is not a configured rule", Field: "rule"}},
		{"empty store", emptyRules.URL, "GET", "id=a&rule=login", apitest.ErrorBody{Error: "rule: is not a configured rule", Field: "rule"}},
		{"no store", noRules.URL, "GET", "id=a&rule=login", apitest.ErrorBody{Error: "rule: no rules are configured", Field: "rule"}},
		{"no store batch", noRules.URL, "POST", `[{"id":"a","scale":1000,"limit":1},{"id":"a","rule":"login"}]`, apitest.ErrorBody{Error: "checks[1].rule: no rules are configured", Field: "checks[1].rule"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r apitest.Response
			if tt.method == "GET" {
				r = apitest.Do(t, http.DefaultClient, "GET", tt.srv+"/check_rate?"+tt.query, "")
			} else {
				r = apitest.Do(t, http.DefaultClient, "POST", tt.srv+"/check_rate", tt.query)
			}
			if r.Status != http.StatusBadRequest {
				t.Fatalf("got status %d, want 400; body %s", r.Status, r.Body)
			}
			var got apitest.ErrorBody
			apitest.DecodeStrict(t, r.Body, &got)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRuleChangeSeenAtOnce changes a rule in the Store between two checks:
// the second check sees the change, and the counts carry over.
func TestRuleChangeSeenAtOnce(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	st := apitest.NewStore(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Minute, Limit: 1}})
	srv := apitest.StartServer(t, sys, httpapi.Options{Rules: st})
	get := func() apitest.Response {
		return apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&rule=api", "")
	}
	if r := get(); r.Status != 200 {
		t.Fatalf("first check: got status %d, want 200", r.Status)
	}
	if r := get(); r.Status != 413 {
		t.Fatalf("second check: got status %d, want 413", r.Status)
	}
	if _, err := st.Put(rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Minute, Limit: 3}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{200, 200, 413} {
		r := get()
		if d := apitest.RuleDecisionOf(t, r); r.Status != want || d.Limit != 3 || d.Count != min(int64(i)+2, 3) {
			t.Errorf("after Put, check %d: got status %d %+v, want %d at limit 3 with count %d", i, r.Status, d, want, min(i+2, 3))
		}
	}
	if _, err := st.Delete("api"); err != nil {
		t.Fatal(err)
	}
	r := get()
	var e apitest.ErrorBody
	apitest.DecodeStrict(t, r.Body, &e)
	if r.Status != 400 || e != (apitest.ErrorBody{Error: "rule: is not a configured rule", Field: "rule"}) {
		t.Errorf("after Delete: got status %d %+v, want 400 unknown rule", r.Status, e)
	}
}

// TestFull fills a table of two buckets: a check that needs a third is
// answered 503 with Retry-After, counted as "full", and consumes nothing.
func TestFull(t *testing.T) {
	t.Parallel()
	sys, clk := actorstest.StartClockedWith(t, actors.Config{MaxBuckets: 2})
	m := metrics.New()
	srv := apitest.StartServer(t, sys, httpapi.Options{Metrics: m, Rules: apitest.NewStore(t,
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: 10 * time.Second, Limit: 5}, Shadow: true})})
	get := func(id string) apitest.Response {
		return apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?scale=10s&limit=5&id="+id, "")
	}
	for _, id := range []string{"a", "b"} {
		if r := get(id); r.Status != 200 {
			t.Fatalf("id %s: got status %d, want 200; body %s", id, r.Status, r.Body)
		}
	}
	steps := []struct {
		name string
		r    func() apitest.Response
	}{
		{"GET", func() apitest.Response { return get("c") }},
		{"POST", func() apitest.Response {
			return apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", `{"id":"c","scale":"10s","limit":5}`)
		}},
		{"batch", func() apitest.Response {
			return apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", `[{"id":"a","scale":"10s","limit":5},{"id":"c","scale":"10s","limit":5}]`)
		}},
	}
	for _, s := range steps {
		r := s.r()
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%s: got status %d, want 503; body %s", s.name, r.Status, r.Body)
		}
		var e apitest.ErrorBody
		apitest.DecodeStrict(t, r.Body, &e)
		if e != (apitest.ErrorBody{Error: "the rate limiter is full (max buckets); retry", Field: ""}) {
			t.Errorf("%s: got %+v, want the full error", s.name, e)
		}
		// Room comes back as buckets expire: the table asks for a retry in 1s.
		apitest.WantHeaders(t, r, map[string]string{"Retry-After": "1", "Content-Type": "application/json"})
	}
	// A shadow rule never denies, not even when the table is full.
	r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=c&rule=watch", "")
	if d := apitest.RuleDecisionOf(t, r); r.Status != 200 || !d.Allowed || !d.ShadowDenied {
		t.Errorf("shadow rule on a full table: got %d %+v, want 200 allowed, shadow_denied", r.Status, d)
	}
	// Nothing was consumed: a spends its second hit, not its third.
	if d := apitest.Decision(t, get("a")); d.Count != 2 {
		t.Errorf("after the full batch: got count %d for a, want 2", d.Count)
	}
	// Once the window ends, the buckets expire and make room.
	clk.Advance(10 * time.Second)
	if r := get("c"); r.Status != 200 {
		t.Errorf("next window: got status %d, want 200; body %s", r.Status, r.Body)
	}
	got := apitest.Scrape(t, srv.URL)
	for k, v := range map[string]string{
		`ratelimitd_checks_total{result="full"}`:    "4",
		`ratelimitd_checks_total{result="allowed"}`: "4",
	} {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
	if st := sys.Stats(); st.Rejections != 4 {
		t.Errorf("got %d rejections, want 4", st.Rejections)
	}
}

// TestReloadsUnderLoadGiveNoDoubleBudget: while 8 clients hit one id by
// rule over HTTP, the rule set is replaced again and again (new versions,
// the same limit, then a raised one): no request errors, and the id is
// admitted exactly the rule's limit in its window — a reload never hands
// out a fresh budget.
func TestReloadsUnderLoadGiveNoDoubleBudget(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	login := rules.Rule{Name: "login", Policy: table.Policy{Algorithm: table.FixedWindow, Scale: time.Duration(apitest.LongScaleSeconds) * time.Second, Limit: 50}}
	st, err := rules.NewStore([]rules.Rule{login})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.StartServer(t, sys, httpapi.Options{Rules: st})
	const clients, each = 8, 40 // 320 tries for a limit of 50
	var admitted, denied atomic.Int64
	stop := make(chan struct{})
	reloads := make(chan int, 1)
	go func() {
		n := 0
		defer func() { reloads <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := st.Replace([]rules.Rule{login, {Name: "other", Policy: table.Policy{Scale: time.Second, Limit: 1}}}); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range each {
				r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?rule=login&id=victim", "")
				switch r.Status {
				case http.StatusOK:
					admitted.Add(1)
				case http.StatusRequestEntityTooLarge:
					denied.Add(1)
				default:
					t.Errorf("during reloads: got %d %s", r.Status, r.Body)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	n := <-reloads
	if admitted.Load() != 50 || denied.Load() != clients*each-50 {
		t.Fatalf("admitted %d, denied %d across %d reloads; want exactly 50 admitted", admitted.Load(), denied.Load(), n)
	}
	if n == 0 {
		t.Fatal("no reload happened during the load")
	}
	// Raising the limit keeps the count: 10 more, not a fresh 60.
	login.Limit = 60
	if _, err := st.Replace([]rules.Rule{login}); err != nil {
		t.Fatal(err)
	}
	more := 0
	for range 20 {
		if apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?rule=login&id=victim", "").Status == http.StatusOK {
			more++
		}
	}
	if more != 10 {
		t.Fatalf("after raising the limit to 60: %d more admitted, want 10", more)
	}
}
