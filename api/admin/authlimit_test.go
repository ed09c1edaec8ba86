package admin_test

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// TestAdminAuthFailures: with AuthFailures 3, the third wrong token from
// an address locks it out (logged once): its requests with a token, the
// right one included, are answered 429 with Retry-After (20 s: 3 attempts
// a minute) and the JSON error, until an attempt refills; a request
// without a token is still 401, /healthz still 200, another address
// still served, and right tokens never count; OnTokenFailure hears of
// every refused token.
func TestAdminAuthFailures(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	var now atomic.Int64
	now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	var logs apitest.LogBuffer
	var fails apitest.TokenFailures
	h, err := admin.NewHandler(admin.Options{
		Backend:        backend{sys},
		Token:          adminToken,
		AuthFailures:   3,
		Now:            func() time.Time { return time.Unix(0, now.Load()) },
		Logger:         logs.Logger(),
		OnTokenFailure: fails.Hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	base := apitest.Serve(t, h).URL
	get := func(path string, auth ...string) apitest.Response {
		t.Helper()
		var kv []string
		for _, a := range auth {
			kv = append(kv, "Authorization", a)
		}
		return apitest.DoHeader(t, "GET", base+path, "", kv...)
	}
	right, wrong := "Bearer "+adminToken, "Bearer not-the-token"
	want := func(r apitest.Response, status int, what string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: got %d, want %d; body %s", what, r.Status, status, r.Body)
		}
	}
	limited := apitest.ErrorBody{Error: "too many requests with a wrong admin token from this address; retry in 20 s"}
	for range 10 {
		want(get("/stats"), 401, "no token")
	}
	for range 50 {
		want(get("/stats", right), 200, "the right token")
	}
	want(get("/stats", wrong), 401, "wrong token 1")
	want(get("/rules", "Basic "+adminToken), 401, "wrong token 2 (another scheme)")
	if strings.Contains(logs.String(), "refused for a while") {
		t.Fatalf("a lock-out logged after 2 wrong tokens:\n%s", logs.String())
	}
	r := get("/nope", wrong)
	want(r, 401, "wrong token 3")
	wantError(t, r, 401, apitest.ErrorBody{Error: "this endpoint needs the admin token: send Authorization: Bearer TOKEN"})
	for _, auth := range []string{right, wrong, "Bearer"} {
		r := get("/stats", auth)
		wantError(t, r, 429, limited)
		apitest.WantHeaders(t, r, map[string]string{"Retry-After": "20", "WWW-Authenticate": ""})
	}
	want(get("/stats"), 401, "no token while locked out")
	want(get("/healthz"), 200, "/healthz while locked out")

	// Another address, and the same /64 of IPv6, are apart.
	for _, addr := range []string{"192.0.2.7:5555", "[2001:db8:1:2::7]:5555"} {
		req := httptest.NewRequest("GET", "/stats", nil)
		req.RemoteAddr = addr
		req.Header.Set("Authorization", right)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("the right token from %s: got %d, want 200", addr, rec.Code)
		}
	}

	now.Add(int64(19 * time.Second))
	r = get("/stats", right)
	wantError(t, r, 429, apitest.ErrorBody{Error: "too many requests with a wrong admin token from this address; retry in 1 s"})
	apitest.WantHeaders(t, r, map[string]string{"Retry-After": "1"})
	now.Add(int64(time.Second))
	want(get("/stats", right), 200, "the right token 20 s on")
	want(get("/stats", wrong), 401, "a wrong token 20 s on (the one attempt refilled)")
	wantError(t, get("/stats", right), 429, limited)

	// Told: the 4 wrong tokens and the 5 requests refused unread, never
	// the requests without a token.
	if w, l := fails.Wrong.Load(), fails.Limited.Load(); w != 4 || l != 5 {
		t.Errorf("OnTokenFailure: %d wrong and %d limited, want 4 and 5", w, l)
	}
	if got := strings.Count(logs.String(), "refused for a while after too many wrong ones from one address"); got != 2 {
		t.Errorf("logged %d lock-outs, want 2:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "client=127.0.0.1") || strings.Contains(logs.String(), "not-the-token") || strings.Contains(logs.String(), adminToken) {
		t.Errorf("the lock-out log should name the client and no token:\n%s", logs.String())
	}
}

// TestAdminAuthFailuresOff: a negative AuthFailures limits nothing, and
// the default is DefaultAuthFailures.
func TestAdminAuthFailuresOff(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	for _, tt := range []struct {
		failures, wrongOK int
	}{{-1, 40}, {0, admin.DefaultAuthFailures}} {
		h, err := admin.NewHandler(admin.Options{Backend: backend{sys}, Token: adminToken, AuthFailures: tt.failures})
		if err != nil {
			t.Fatal(err)
		}
		base := apitest.Serve(t, h).URL
		for i := range tt.wrongOK {
			if r := apitest.DoHeader(t, "GET", base+"/stats", "", "Authorization", "Bearer wrong"); r.Status != 401 {
				t.Fatalf("AuthFailures %d, wrong token %d: got %d, want 401", tt.failures, i+1, r.Status)
			}
		}
		want := 200
		if tt.failures == 0 {
			want = 429
		}
		if r := apitest.DoHeader(t, "GET", base+"/stats", "", "Authorization", "Bearer "+adminToken); r.Status != want {
			t.Errorf("AuthFailures %d, the right token after %d wrong ones: got %d, want %d", tt.failures, tt.wrongOK, r.Status, want)
		}
	}
}
