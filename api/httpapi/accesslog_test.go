package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/httpapi"
)

func TestAccessLogQuotesClientValues(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := httpapi.AccessLog(log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("12345"))
	}))
	r := httptest.NewRequest(http.MethodGet, "/check_rate?id=a%0Alevel%3DERROR+msg%3Dforged&scale=1s&limit=1", nil)
	h.ServeHTTP(httptest.NewRecorder(), r)

	got := buf.String()
	if n := strings.Count(got, "\n"); n != 1 {
		t.Fatalf("got %d log lines, want 1:\n%s", n, got)
	}
	for _, want := range []string{`level=DEBUG msg=request method=GET path=/check_rate`, `id="a\nlevel=ERROR msg=forged"`, `status=418 bytes=5`} {
		if !strings.Contains(got, want) {
			t.Errorf("got log line %q, want it to contain %q", got, want)
		}
	}
}
