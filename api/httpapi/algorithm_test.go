package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// algoStep is one check of an algorithm flow: the clock is advanced by
// advance, then hits are spent; the answer must be exactly want.
type algoStep struct {
	advance    time.Duration
	hits       int64
	wantStatus int
	want       apitest.DecisionBody // ID is filled in
	wantRetry  string               // Retry-After; "" for none
}

// TestAlgorithms runs every algorithm through GET and through POST on a
// manual clock and checks every number of every answer: the body, the
// status, Retry-After and the RateLimit fields.
func TestAlgorithms(t *testing.T) {
	t.Parallel()
	ok := func(count, limit, resetMs int64) apitest.DecisionBody {
		return apitest.DecisionBody{Allowed: true, Count: count, Limit: limit, Remaining: limit - count, ResetMs: resetMs}
	}
	no := func(count, limit, resetMs, retryMs int64) apitest.DecisionBody {
		return apitest.DecisionBody{Count: count, Limit: limit, Remaining: limit - count, ResetMs: resetMs, RetryAfterMs: retryMs}
	}
	tests := []struct {
		name   string
		Params string // scale, limit, algorithm, burst
		scaleS int64  // w= of RateLimit-Policy
		steps  []algoStep
	}{
		{"fixed window", "scale=1s&limit=3", 1, []algoStep{
			{0, 1, 200, ok(1, 3, 1000), ""},
			{0, 1, 200, ok(2, 3, 1000), ""},
			{0, 1, 200, ok(3, 3, 1000), ""},
			{0, 1, 413, no(3, 3, 1000, 1000), "1"},
			{400 * time.Millisecond, 1, 413, no(3, 3, 600, 600), "1"},
			{400 * time.Millisecond, 0, 413, no(3, 3, 200, 200), "1"},
			{200 * time.Millisecond, 1, 200, ok(1, 3, 1000), ""}, // a new window
			{0, 3, 413, no(1, 3, 1000, 1000), "1"},               // cost over remaining: nothing spent
			{0, 2, 200, ok(3, 3, 1000), ""},
		}},
		{"fixed window explicit", "scale=2500&limit=2&algorithm=fixed_window", 3, []algoStep{
			{0, 2, 200, ok(2, 2, 2500), ""},
			{0, 1, 413, no(2, 2, 2500, 2500), "3"},
		}},
		{"sliding window", "scale=1s&limit=3&algorithm=sliding_window", 1, []algoStep{
			{0, 1, 200, ok(1, 3, 2000), ""},
			{0, 1, 200, ok(2, 3, 2000), ""},
			{0, 1, 200, ok(3, 3, 2000), ""},
			// Fits only in the next window, once 1/3 of this one has slid out.
			{0, 1, 413, no(3, 3, 2000, 1334), "2"},
			// Next window: the previous 3 hits still weigh 3.
			{time.Second, 1, 413, no(3, 3, 1000, 334), "1"},
			// 334ms later they weigh 3·666/1000 = 1.998, so one hit fits.
			{334 * time.Millisecond, 1, 200, ok(3, 3, 1666), ""},
		}},
		{"token bucket", "scale=1s&limit=3&algorithm=token_bucket", 1, []algoStep{
			{0, 1, 200, ok(1, 3, 334), ""}, // a token comes back every 333.333334ms
			{0, 1, 200, ok(2, 3, 667), ""},
			{0, 1, 200, ok(3, 3, 1001), ""},
			{0, 1, 413, no(3, 3, 1001, 334), "1"},
			{334 * time.Millisecond, 1, 200, ok(3, 3, 1000), ""},
		}},
		{"token bucket burst", "scale=1s&limit=3&algorithm=token_bucket&burst=5", 1, []algoStep{
			{0, 5, 200, ok(5, 5, 1667), ""},
			{0, 1, 413, no(5, 5, 1667, 334), "1"},
			{0, 6, 413, no(5, 5, 1667, 1667), "2"}, // never fits: until the bucket is full
		}},
		{"leaky bucket 1000/s", "scale=1s&limit=1000&algorithm=leaky_bucket", 1, []algoStep{
			{0, 1, 200, ok(1, 1, 1), ""},
			{0, 1, 413, no(1, 1, 1, 1), "1"},
			{time.Millisecond, 1, 200, ok(1, 1, 1), ""},
		}},
		{"leaky bucket burst", "scale=1s&limit=2&algorithm=leaky_bucket&burst=2", 1, []algoStep{
			{0, 1, 200, ok(1, 2, 500), ""},
			{0, 1, 200, ok(2, 2, 1000), ""},
			{0, 1, 413, no(2, 2, 1000, 500), "1"},
			{250 * time.Millisecond, 0, 413, no(2, 2, 750, 250), "1"},
			{250 * time.Millisecond, 1, 200, ok(2, 2, 1000), ""},
		}},
	}
	for _, tt := range tests {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			t.Run(tt.name+" "+method, func(t *testing.T) {
				t.Parallel()
				sys, clk := actorstest.StartClocked(t)
				srv := apitest.StartServer(t, sys, httpapi.Options{})
				vals, err := url.ParseQuery(tt.Params)
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range tt.steps {
					clk.Advance(s.advance)
					var r apitest.Response
					if method == http.MethodGet {
						r = apitest.Do(t, http.DefaultClient, method, fmt.Sprintf("%s/check_rate?id=x&%s&hits=%d", srv.URL, tt.Params, s.hits), "")
					} else {
						body := fmt.Sprintf(`{"id":"x","hits":%d`, s.hits)
						for k, v := range vals {
							if k == "limit" || k == "burst" {
								body += fmt.Sprintf(`,%q:%s`, k, v[0])
							} else {
								body += fmt.Sprintf(`,%q:%q`, k, v[0])
							}
						}
						r = apitest.Do(t, http.DefaultClient, method, srv.URL+"/check_rate", body+"}")
					}
					if r.Status != s.wantStatus {
						t.Fatalf("step %d: got status %d, want %d; body %s", i, r.Status, s.wantStatus, r.Body)
					}
					want := s.want
					want.ID = "x"
					if got := apitest.Decision(t, r); got != want {
						t.Errorf("step %d: got %+v, want %+v", i, got, want)
					}
					apitest.WantHeaders(t, r, map[string]string{
						"Retry-After":      s.wantRetry,
						"RateLimit-Policy": fmt.Sprintf(`"default";q=%d;w=%d`, want.Limit, tt.scaleS),
						"RateLimit":        `"default";r=` + strconv.FormatInt(want.Remaining, 10) + ";t=" + strconv.FormatInt((want.ResetMs+999)/1000, 10),
					})
				}
			})
		}
	}
}

// TestAlgorithmsApart checks that the same id under two algorithms, or two
// bursts, counts in two buckets.
func TestAlgorithmsApart(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	srv := apitest.StartServer(t, sys, httpapi.Options{})
	for i, q := range []string{
		"scale=1s&limit=1",
		"scale=1s&limit=1&algorithm=sliding_window",
		"scale=1s&limit=1&algorithm=token_bucket",
		"scale=1s&limit=1&algorithm=token_bucket&burst=2",
		"scale=1s&limit=1&algorithm=leaky_bucket",
	} {
		r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=same&"+q, "")
		if d := apitest.Decision(t, r); r.Status != 200 || d.Count != 1 {
			t.Errorf("check %d (%s): got status %d count %d, want 200 and a bucket of its own", i, q, r.Status, d.Count)
		}
	}
}
