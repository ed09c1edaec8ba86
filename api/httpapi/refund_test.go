package httpapi_test

import (
	"net/http"
	"strconv"
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

func TestRefund(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	m := metrics.New()
	srv := apitest.StartServer(t, sys, httpapi.Options{Metrics: m, Rules: apitest.NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 3}},
		rules.Rule{Name: "tb", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Second, Limit: 10, Burst: 5}},
	)})
	type step struct {
		method     string
		path       string
		query      string // GET query or POST body
		wantStatus int
		want       apitest.RuleDecision
		wantRetry  string
	}
	d := func(allowed bool, id, rule string, count, limit, resetMs, retryMs int64) apitest.RuleDecision {
		return apitest.RuleDecision{Allowed: allowed, ID: id, Rule: rule, Count: count, Limit: limit, Remaining: limit - count, ResetMs: resetMs, RetryAfterMs: retryMs}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"ad hoc", []step{
			{"GET", "/check_rate", "id=a&scale=1m&limit=3&hits=3", 200, d(true, "a", "", 3, 3, 60000, 0), ""},
			{"GET", "/check_rate", "id=a&scale=1m&limit=3", 413, d(false, "a", "", 3, 3, 60000, 60000), "60"},
			// -2 gives 2 back; the answer is a peek after the refund.
			{"GET", "/refund", "id=a&scale=1m&limit=3&hits=-2", 200, d(true, "a", "", 1, 3, 60000, 0), ""},
			// A refund never takes the bucket below empty...
			{"POST", "/refund", `{"id":"a","scale":"1m","limit":3,"hits":-3}`, 200, d(true, "a", "", 0, 3, 60000, 0), ""},
			// ...so the limit still holds: 3 more, not 5.
			{"GET", "/check_rate", "id=a&scale=1m&limit=3&hits=3", 200, d(true, "a", "", 3, 3, 60000, 0), ""},
			{"GET", "/check_rate", "id=a&scale=1m&limit=3", 413, d(false, "a", "", 3, 3, 60000, 60000), "60"},
		}},
		{"by rule", []step{
			{"POST", "/check_rate", `{"id":"b","rule":"login","hits":3}`, 200, d(true, "b", "login", 3, 3, 60000, 0), ""},
			{"GET", "/refund", "id=b&rule=login&hits=-1", 200, d(true, "b", "login", 2, 3, 60000, 0), ""},
			{"POST", "/refund", `{"id":"b","rule":"login","hits":-1}`, 200, d(true, "b", "login", 1, 3, 60000, 0), ""},
			{"GET", "/check_rate", "id=b&rule=login&hits=2", 200, d(true, "b", "login", 3, 3, 60000, 0), ""},
		}},
		{"token bucket", []step{
			{"GET", "/check_rate", "id=c&rule=tb&hits=5", 200, d(true, "c", "tb", 5, 5, 500, 0), ""},
			{"GET", "/refund", "id=c&rule=tb&hits=-3", 200, d(true, "c", "tb", 2, 5, 200, 0), ""},
			{"GET", "/refund", "id=c&rule=tb&hits=-9", 200, d(true, "c", "tb", 0, 5, 0, 0), ""},
		}},
		{"nothing to refund", []step{
			{"GET", "/refund", "id=nobody&scale=1m&limit=3&hits=-1", 200, d(true, "nobody", "", 0, 3, 60000, 0), ""},
		}},
		{"refund of a denied bucket answers 200", []step{
			{"GET", "/check_rate", "id=e&scale=1m&limit=2&hits=2", 200, d(true, "e", "", 2, 2, 60000, 0), ""},
			{"GET", "/refund", "id=e&scale=1m&limit=2&hits=-1", 200, d(true, "e", "", 1, 2, 60000, 0), ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, s := range tt.steps {
				var r apitest.Response
				if s.method == "GET" {
					r = apitest.Do(t, http.DefaultClient, "GET", srv.URL+s.path+"?"+s.query, "")
				} else {
					r = apitest.Do(t, http.DefaultClient, "POST", srv.URL+s.path, s.query)
				}
				if r.Status != s.wantStatus {
					t.Fatalf("step %d %s %s: got status %d, want %d; body %s", i, s.path, s.query, r.Status, s.wantStatus, r.Body)
				}
				if got := apitest.RuleDecisionOf(t, r); got != s.want {
					t.Errorf("step %d %s %s: got %+v, want %+v", i, s.path, s.query, got, s.want)
				}
				apitest.WantHeaders(t, r, map[string]string{"Retry-After": s.wantRetry})
			}
		})
	}
	t.Cleanup(func() {
		got := apitest.Scrape(t, srv.URL)
		if got["ratelimitd_refunds_total"] != "8" {
			t.Errorf("got ratelimitd_refunds_total %q, want 8", got["ratelimitd_refunds_total"])
		}
	})
}

// TestRefundErrors checks the 400s of /refund word for word.
func TestRefundErrors(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	const hitsRule = "hits: must be negative on a refund: the hits to give back, e.g. -3"
	tests := []struct {
		method, query string
		want          apitest.ErrorBody
	}{
		{"GET", "id=a&scale=1m&limit=3&hits=3", apitest.ErrorBody{Error: hitsRule, Field: "hits"}},
		{"GET", "id=a&scale=1m&limit=3", apitest.ErrorBody{Error: hitsRule, Field: "hits"}},
		{"GET", "id=a&scale=1m&limit=3&hits=0", apitest.ErrorBody{Error: hitsRule, Field: "hits"}},
		{"POST", `{"id":"a","scale":"1m","limit":3,"hits":3}`, apitest.ErrorBody{Error: hitsRule, Field: "hits"}},
		{"POST", `{"id":"a","scale":"1m","limit":3}`, apitest.ErrorBody{Error: hitsRule, Field: "hits"}},
		{"POST", `[{"id":"a","scale":"1m","limit":3,"hits":-1}]`, apitest.ErrorBody{Error: "body: must be a JSON object", Field: "body"}},
		{"GET", "id=a&rule=x&hits=-1", apitest.ErrorBody{Error: "rule: no rules are configured", Field: "rule"}},
	}
	for _, tt := range tests {
		var r apitest.Response
		if tt.method == "GET" {
			r = apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/refund?"+tt.query, "")
		} else {
			r = apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/refund", tt.query)
		}
		var got apitest.ErrorBody
		if r.Status != 400 {
			t.Errorf("%s %s: got status %d, want 400; body %s", tt.method, tt.query, r.Status, r.Body)
			continue
		}
		apitest.DecodeStrict(t, r.Body, &got)
		if got != tt.want {
			t.Errorf("%s %s: got %+v, want %+v", tt.method, tt.query, got, tt.want)
		}
	}
}

// TestRefundCheckerErrors: a failing refund is a 503, and a refund sends the
// absolute value of hits.
func TestRefundCheckerErrors(t *testing.T) {
	t.Parallel()
	f := &apitest.FakeChecker{Err: actors.ErrStopped}
	srv := apitest.StartServer(t, f, httpapi.Options{})
	r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/refund?id=a&scale=1s&limit=3&hits=-2", "")
	if r.Status != 503 {
		t.Errorf("got status %d, want 503; body %s", r.Status, r.Body)
	}
	apitest.WantHeaders(t, r, map[string]string{"Retry-After": "1"})
	want := table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3}, Hits: 2}
	if got := f.Requests(); len(got) != 1 || got[0] != want {
		t.Errorf("got requests %+v, want [%+v]", got, want)
	}
}

// TestRefundWithWindow: a check's answer says in Ratelimit-Window where its
// hits were counted; a /refund that names that window credits it while it
// lasts and gives nothing once it is over.
func TestRefundWithWindow(t *testing.T) {
	t.Parallel()
	sys, clk := actorstest.StartClocked(t)
	srv := apitest.StartServer(t, sys, httpapi.Options{Rules: apitest.NewStore(t,
		rules.Rule{Name: "tb", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Second, Limit: 10, Burst: 10}},
	)})
	get := func(path, query string) apitest.Response {
		t.Helper()
		return apitest.Do(t, http.DefaultClient, "GET", srv.URL+path+"?"+query, "")
	}
	windowOf := func(r apitest.Response) string {
		t.Helper()
		w := r.Header.Values("Ratelimit-Window")
		if len(w) != 1 {
			t.Fatalf("check answer: got Ratelimit-Window %q, want one value; body %s", w, r.Body)
		}
		return w[0]
	}
	for _, alg := range []string{"fixed_window", "sliding_window"} {
		q := "id=w-" + alg + "&scale=1m&limit=3&algorithm=" + alg
		r := get("/check_rate", q+"&hits=3")
		win := windowOf(r)
		start := clk.Now().UnixMilli() - clk.Now().UnixMilli()%60_000
		if win != strconv.FormatInt(start, 10) {
			t.Fatalf("%s: got Ratelimit-Window %s, want the window's start %d", alg, win, start)
		}
		// In its window, the refund credits.
		if d := apitest.Decision(t, get("/refund", q+"&hits=-1&window="+win)); d.Count != 2 {
			t.Fatalf("%s refund in its window: got %+v, want count 2", alg, d)
		}
		get("/check_rate", q) // back to 3
		// Once the window is over (the next window's hits in), nothing is given back.
		clk.Advance(time.Minute)
		get("/check_rate", q+"&hits=3")
		r = get("/refund", q+"&hits=-3&window="+win)
		if r.Status != 200 {
			t.Fatalf("%s late refund: got status %d, want 200; body %s", alg, r.Status, r.Body)
		}
		if r := get("/check_rate", q); r.Status != 413 {
			t.Fatalf("%s: after a late refund for the window before, a 4th hit got %d, want 413 (nothing credited)", alg, r.Status)
		}
	}
	// Token bucket: the answer names when the hits have drained; a refund
	// gives back what of them has not drained yet.
	r := get("/check_rate", "id=w-tb&rule=tb&hits=4")
	win := windowOf(r)
	if want := strconv.FormatInt(clk.Now().Add(400*time.Millisecond).UnixMilli(), 10); win != want {
		t.Fatalf("token bucket: got Ratelimit-Window %s, want %s (full again in 400 ms)", win, want)
	}
	clk.Advance(300 * time.Millisecond)
	if d := apitest.RuleDecisionOf(t, get("/refund", "id=w-tb&rule=tb&hits=-4&window="+win)); d.Count != 0 || d.ResetMs != 0 {
		t.Fatalf("token bucket refund after 300 ms: got %+v, want empty", d)
	}
	// A denial and a peek count nothing: no Ratelimit-Window.
	get("/check_rate", "id=w-d&scale=1m&limit=1")
	for _, q := range []string{"id=w-d&scale=1m&limit=1", "id=w-d&scale=1m&limit=1&hits=0"} {
		if w := get("/check_rate", q).Header.Values("Ratelimit-Window"); len(w) != 0 {
			t.Errorf("%s: got Ratelimit-Window %q, want none", q, w)
		}
	}
}

func TestRefundWindowErrors(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	const rule = "must be the Ratelimit-Window of the check whose hits are given back: an integer between 1 and 9223372036854775807"
	for _, tt := range []struct{ method, path, query, field, msg string }{
		{"GET", "/refund", "id=a&scale=1m&limit=3&hits=-1&window=x", "window", "window: " + rule},
		{"GET", "/refund", "id=a&scale=1m&limit=3&hits=-1&window=0", "window", "window: " + rule},
		{"GET", "/refund", "id=a&scale=1m&limit=3&hits=-1&window=-5", "window", "window: " + rule},
		{"POST", "/refund", `{"id":"a","scale":"1m","limit":3,"hits":-1,"window":"12"}`, "window", "window: " + rule},
		{"GET", "/check_rate", "id=a&scale=1m&limit=3&window=12", "window", "window: is not a known parameter"},
	} {
		var r apitest.Response
		if tt.method == "GET" {
			r = apitest.Do(t, http.DefaultClient, "GET", srv.URL+tt.path+"?"+tt.query, "")
		} else {
			r = apitest.Do(t, http.DefaultClient, "POST", srv.URL+tt.path, tt.query)
		}
		var got apitest.ErrorBody
		apitest.DecodeStrict(t, r.Body, &got)
		if r.Status != 400 || got.Field != tt.field || got.Error != tt.msg {
			t.Errorf("%s %s %s: got %d %+v, want 400 %q on %s", tt.method, tt.path, tt.query, r.Status, got, tt.msg, tt.field)
		}
	}
}
