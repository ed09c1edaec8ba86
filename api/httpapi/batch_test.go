package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// batchServer serves a clocked system with two rules: login (2 per minute)
// and watch (a shadow rule, 1 per minute).
func batchServer(t *testing.T, opts httpapi.Options) string {
	t.Helper()
	sys, _ := actorstest.StartClocked(t)
	opts.Rules = apitest.NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}},
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Shadow: true},
	)
	return apitest.StartServer(t, sys, opts).URL
}

func postBatch(t *testing.T, srvURL string, checks ...string) (apitest.Response, apitest.BatchBody) {
	t.Helper()
	r := apitest.Do(t, http.DefaultClient, "POST", srvURL+"/check_rate", "["+strings.Join(checks, ",")+"]")
	var b apitest.BatchBody
	if r.Status == 200 || r.Status == 413 || r.Status == 429 {
		apitest.DecodeStrict(t, r.Body, &b)
		for i, c := range b.Checks {
			if c.ID == "" {
				t.Errorf("check %d: got %+v without an id", i, c)
			}
		}
	}
	return r, b
}

// peek returns the count of a check with hits=0.
func peek(t *testing.T, srvURL, query string) int64 {
	t.Helper()
	r := apitest.Do(t, http.DefaultClient, "GET", srvURL+"/check_rate?hits=0&"+query, "")
	var d apitest.RuleDecision
	apitest.DecodeStrict(t, r.Body, &d)
	return d.Count
}

func TestBatchAllowed(t *testing.T) {
	t.Parallel()
	srv := batchServer(t, httpapi.Options{})
	r, b := postBatch(t, srv,
		`{"id":"u","scale":"1m","limit":5,"hits":2}`,
		`{"id":"u","rule":"login"}`,
		`{"id":"u","scale":"1s","limit":10,"algorithm":"token_bucket"}`,
	)
	if r.Status != 200 {
		t.Fatalf("got status %d, want 200; body %s", r.Status, r.Body)
	}
	want := apitest.BatchBody{Allowed: true, Checks: []apitest.RuleDecision{
		{Allowed: true, ID: "u", Count: 2, Limit: 5, Remaining: 3, ResetMs: 60000},
		{Allowed: true, ID: "u", Rule: "login", Count: 1, Limit: 2, Remaining: 1, ResetMs: 60000},
		{Allowed: true, ID: "u", Count: 1, Limit: 10, Remaining: 9, ResetMs: 100},
	}}
	if !sameBatch(b, want) {
		t.Errorf("got %+v, want %+v", b, want)
	}
	// The binding check is login: one left.
	apitest.WantHeaders(t, r, map[string]string{
		"Retry-After":      "",
		"RateLimit-Policy": `"login";q=2;w=60`,
		"RateLimit":        `"login";r=1;t=60`,
		"Content-Type":     "application/json",
		"Cache-Control":    "no-store",
	})
	// Everything was counted.
	for q, want := range map[string]int64{
		"id=u&scale=1m&limit=5": 2,
		"id=u&rule=login":       1,
	} {
		if got := peek(t, srv, q); got != want {
			t.Errorf("after the batch, %s: got count %d, want %d", q, got, want)
		}
	}
}

// TestBatchDenied: one check denied, nothing consumed; Retry-After is the
// longest wait of the denials.
func TestBatchDenied(t *testing.T) {
	t.Parallel()
	srv := batchServer(t, httpapi.Options{DenyStatus: 429})
	// Use up two limits: 1 per 2s and 1 per 5s.
	for _, q := range []string{"id=v&scale=2s&limit=1", "id=v&scale=5s&limit=1"} {
		if r := apitest.Do(t, http.DefaultClient, "GET", srv+"/check_rate?"+q, ""); r.Status != 200 {
			t.Fatalf("%s: got status %d, want 200", q, r.Status)
		}
	}
	r, b := postBatch(t, srv,
		`{"id":"v","scale":"1m","limit":5,"hits":3}`,
		`{"id":"v","scale":2000,"limit":1}`,
		`{"id":"v","rule":"login"}`,
		`{"id":"v","scale":"5s","limit":1}`,
	)
	if r.Status != 429 {
		t.Fatalf("got status %d, want 429; body %s", r.Status, r.Body)
	}
	want := apitest.BatchBody{Allowed: false, Checks: []apitest.RuleDecision{
		// The admitted checks show their state before the refund.
		{Allowed: true, ID: "v", Count: 3, Limit: 5, Remaining: 2, ResetMs: 60000},
		{Allowed: false, ID: "v", Count: 1, Limit: 1, Remaining: 0, ResetMs: 2000, RetryAfterMs: 2000},
		{Allowed: true, ID: "v", Rule: "login", Count: 1, Limit: 2, Remaining: 1, ResetMs: 60000},
		{Allowed: false, ID: "v", Count: 1, Limit: 1, Remaining: 0, ResetMs: 5000, RetryAfterMs: 5000},
	}}
	if !sameBatch(b, want) {
		t.Errorf("got %+v, want %+v", b, want)
	}
	// Retry-After is the longest wait; the headers describe that denial.
	apitest.WantHeaders(t, r, map[string]string{
		"Retry-After":      "5",
		"RateLimit-Policy": `"default";q=1;w=5`,
		"RateLimit":        `"default";r=0;t=5`,
	})
	// Nothing was consumed.
	for q, want := range map[string]int64{
		"id=v&scale=1m&limit=5": 0,
		"id=v&rule=login":       0,
		"id=v&scale=2s&limit=1": 1,
		"id=v&scale=5s&limit=1": 1,
	} {
		if got := peek(t, srv, q); got != want {
			t.Errorf("after the denied batch, %s: got count %d, want %d", q, got, want)
		}
	}
}

// TestBatchShadow: a shadow rule's denial never denies a batch; a denied
// batch does not count the shadow rule's hit either.
func TestBatchShadow(t *testing.T) {
	t.Parallel()
	srv := batchServer(t, httpapi.Options{})
	// The first batch spends the shadow rule's only hit; the second is
	// denied by it, and let through.
	for i, wantShadow := range []bool{false, true} {
		r, b := postBatch(t, srv, `{"id":"w","rule":"watch"}`, `{"id":"w","scale":"1m","limit":3}`)
		if r.Status != 200 || !b.Allowed || len(b.Checks) != 2 {
			t.Fatalf("batch %d: got status %d %+v, want 200 allowed", i, r.Status, b)
		}
		s := b.Checks[0]
		if s.Rule != "watch" || !s.Allowed || s.ShadowDenied != wantShadow || s.Count != 1 {
			t.Errorf("batch %d: got shadow check %+v, want allowed, shadow_denied %v, count 1", i, s, wantShadow)
		}
		// The headers describe the enforced check, not the shadow rule.
		apitest.WantHeaders(t, r, map[string]string{"Retry-After": "", "RateLimit-Policy": `"default";q=3;w=60`})
	}
	// A denied batch: the shadow check is only peeked at.
	if r := apitest.Do(t, http.DefaultClient, "GET", srv+"/check_rate?id=x&scale=1m&limit=1", ""); r.Status != 200 {
		t.Fatal(r.Status)
	}
	r, b := postBatch(t, srv, `{"id":"x","rule":"watch"}`, `{"id":"x","scale":"1m","limit":1}`)
	if r.Status != 413 || b.Allowed || b.Checks[0].Count != 0 || !b.Checks[0].Allowed {
		t.Errorf("denied batch: got status %d %+v, want 413 with the shadow check at count 0", r.Status, b)
	}
	if got := peek(t, srv, "id=x&rule=watch"); got != 0 {
		t.Errorf("after the denied batch: got shadow count %d, want 0", got)
	}
	// A batch of shadow checks only: allowed, the headers describe them.
	r, b = postBatch(t, srv, `{"id":"w","rule":"watch"}`)
	if r.Status != 200 || !b.Allowed || !b.Checks[0].ShadowDenied {
		t.Errorf("shadow-only batch: got status %d %+v, want 200 allowed, shadow_denied", r.Status, b)
	}
	apitest.WantHeaders(t, r, map[string]string{"Retry-After": "", "RateLimit-Policy": `"watch";q=1;w=60`})
}

// TestBatchOfMaxSize sends the largest batch, each check on its own id.
func TestBatchOfMaxSize(t *testing.T) {
	t.Parallel()
	srv := batchServer(t, httpapi.Options{})
	checks := make([]string, actors.MaxCheckAll)
	for i := range checks {
		checks[i] = fmt.Sprintf(`{"id":"user-%d","scale":"1m","limit":1}`, i)
	}
	r, b := postBatch(t, srv, checks...)
	if r.Status != 200 || len(b.Checks) != actors.MaxCheckAll {
		t.Fatalf("got status %d and %d checks, want 200 and %d", r.Status, len(b.Checks), actors.MaxCheckAll)
	}
	// An answer this long (well past net/http's 2 KiB) still says its
	// length, rather than come in chunks: one write less for the server,
	// no chunks for the client to parse.
	if got, want := r.Header.Get("Content-Length"), strconv.Itoa(len(r.Body)); got != want {
		t.Errorf("Content-Length %q, want %q (the body's %d bytes)", got, want, len(r.Body))
	}
	for i, c := range b.Checks {
		if want := fmt.Sprintf("user-%d", i); c.ID != want || c.Count != 1 {
			t.Fatalf("check %d: got %+v, want id %s count 1", i, c, want)
		}
	}
}

// TestBatchCheckerErrors maps CheckAll errors as Check errors are mapped.
func TestBatchCheckerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		want      int
		wantField string
	}{
		// The shadow check in front is not sent to CheckAll: its check 1 is
		// element 2.
		{"invalid element", &table.IndexError{Index: 1, Err: &table.FieldError{Field: "id", Message: "is required"}}, 400, "checks[2].id"},
		{"invalid element itself", &table.IndexError{Index: 0, Err: &table.FieldError{Message: "is wrong"}}, 400, "checks[1]"},
		{"invalid batch", &table.FieldError{Field: "checks", Message: "must hold 1 to 1000 checks"}, 400, "checks"},
		{"out of range", &table.IndexError{Index: 7, Err: &table.FieldError{Field: "id", Message: "is required"}}, 400, "checks[7].id"},
		{"stopped", actors.ErrStopped, 503, ""},
		{"unavailable", fmt.Errorf("shard 2: %w", actors.ErrUnavailable), 503, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &apitest.FakeChecker{Err: tt.err}
			srv := apitest.StartServer(t, f, httpapi.Options{Rules: apitest.NewStore(t, rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Second, Limit: 1}, Shadow: true})})
			r := apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", `[{"id":"s","rule":"watch"},{"id":"a","scale":1000,"limit":1},{"id":"b","scale":1000,"limit":1}]`)
			if r.Status != tt.want {
				t.Fatalf("got status %d, want %d; body %s", r.Status, tt.want, r.Body)
			}
			var e apitest.ErrorBody
			apitest.DecodeStrict(t, r.Body, &e)
			if e.Field != tt.wantField || e.Error == "" {
				t.Errorf("got %+v, want field %q and a message", e, tt.wantField)
			}
			if got := f.Requests(); len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
				t.Errorf("got requests %+v to the checker, want a and b in one CheckAll", got)
			}
		})
	}
}

func sameBatch(a, b apitest.BatchBody) bool {
	return a.Allowed == b.Allowed && slices.Equal(a.Checks, b.Checks)
}
