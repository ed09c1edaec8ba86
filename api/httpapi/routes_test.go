package httpapi_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// TestExtraRoutes: Options.Routes serves its exact paths with their own
// handlers (their methods, their statuses); every other path keeps the
// check API's 404 and 405; a route of the check API cannot be replaced.
func TestExtraRoutes(t *testing.T) {
	t.Parallel()
	json := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("mounted"))
	})
	srv := apitest.StartServer(t, &apitest.FakeChecker{}, httpapi.Options{Routes: map[string]http.Handler{"/json": json}})
	tests := []struct {
		method, path string
		want         int
		allow, body  string
	}{
		{"POST", "/json", 429, "", "mounted"},
		{"GET", "/json", 405, "POST", ""},
		{"POST", "/json/", 404, "", ""},
		{"POST", "/JSON", 404, "", ""},
		{"GET", "/nope", 404, "", ""},
		{"PUT", "/check_rate", 405, "GET, POST", ""},
		{"GET", "/healthz", 200, "", `{"status":"ok"}`},
	}
	for _, tt := range tests {
		r := apitest.Do(t, http.DefaultClient, tt.method, srv.URL+tt.path, "")
		if r.Status != tt.want || r.Header.Get("Allow") != tt.allow || (tt.body != "" && string(r.Body) != tt.body) {
			t.Errorf("%s %s: got %d Allow %q body %q, want %d Allow %q body %q", tt.method, tt.path, r.Status, r.Header.Get("Allow"), r.Body, tt.want, tt.allow, tt.body)
		}
	}
	for _, p := range []string{"/check_rate", "/refund", "/healthz", "/metrics"} {
		_, err := httpapi.NewHandler(&apitest.FakeChecker{}, httpapi.Options{Routes: map[string]http.Handler{p: json}})
		if !errors.Is(err, api.ErrInvalidOption) {
			t.Errorf("Routes over %s: got %v, want ErrInvalidOption", p, err)
		}
	}
	if _, err := httpapi.NewHandler(&apitest.FakeChecker{}, httpapi.Options{Routes: map[string]http.Handler{"/json": nil}}); !errors.Is(err, api.ErrInvalidOption) {
		t.Errorf("a nil route handler: got %v, want ErrInvalidOption", err)
	}
}
