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
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestRefundWithWindow: a check's answer says in Ratelimit-Window where its
// hits were counted; a /refund that names that window credits it while it
// lasts and gives nothing once it is over.
func TestRefundWithWindow(t *testing.T) {
	t.Parallel()
	sys, clk := actorstest.StartClocked(t, actors.Config{})
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
	srv := apitest.StartServer(t, actorstest.StartSystem(t, actors.Config{}), httpapi.Options{})
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
