package httpwire

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestCleanPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", "/"},
		{"/", "/"},
		{"api", "/api"},
		{"/api", "/api"},
		{"/api/", "/api/"},
		{"//api//x/", "/api/x/"},
		{"/a/../api", "/api"},
		{"/a/../api/", "/api/"},
		{"/./api/.", "/api"},
		{"/..", "/"},
		{"/api/x/..", "/api"},
	}
	for _, tt := range tests {
		if got := CleanPath(tt.in); got != tt.want {
			t.Errorf("cleanPath(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFastPathAllocs keeps the GET parser free of allocations on the fast
// path, by rule or not, and cleanPath of a clean path. (AllocsPerRun
// cannot run in a parallel test.)
func TestFastPathAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = CleanPath("/api/v1/users/") }); n != 0 {
		t.Errorf("cleanPath of a clean path: got %v allocations, want 0", n)
	}
	for _, raw := range []string{
		"id=user-42&scale=30s&limit=500",
		"id=user-42&scale=1000&limit=5&algorithm=token_bucket&burst=10&hits=2",
		"id=user-42&rule=login",
	} {
		if n := testing.AllocsPerRun(100, func() { _, _ = ParseQuery(raw, ModeCheck) }); n != 0 {
			t.Errorf("parseQuery(%q): got %v allocations, want 0", raw, n)
		}
	}
}

// TestWriteBatchNumbers: a batch's body has each answer's own numbers,
// whether they repeat from the answer before or not.
func TestWriteBatchNumbers(t *testing.T) {
	t.Parallel()
	ans := func(id string, count, limit int64, reset, retry time.Duration) Answer {
		return Answer{ID: id, Scale: time.Minute, D: table.Decision{Allowed: true, Count: count, Limit: limit, Remaining: limit - count, ResetAfter: reset, RetryAfter: retry}}
	}
	as := []Answer{
		ans("a", 1, 10, time.Second, 0),
		ans("b", 2, 10, time.Second, 0),
		ans("c", 3, 1_000_000_000_000, 1500*time.Microsecond, 0),
		ans("d", 4, 10, time.Second, 2*time.Millisecond),
		ans("e", 0, 0, 0, 0),
	}
	rs := &Responder{DenyStatus: 413}
	w := httptest.NewRecorder()
	if res := rs.WriteBatch(w, as, true); res != api.ResultAllowed || w.Code != 200 {
		t.Fatalf("result %v, status %d", res, w.Code)
	}
	want := `{"allowed":true,"checks":[` +
		`{"allowed":true,"id":"a","count":1,"limit":10,"remaining":9,"reset_ms":1000,"retry_after_ms":0},` +
		`{"allowed":true,"id":"b","count":2,"limit":10,"remaining":8,"reset_ms":1000,"retry_after_ms":0},` +
		`{"allowed":true,"id":"c","count":3,"limit":1000000000000,"remaining":999999999997,"reset_ms":2,"retry_after_ms":0},` +
		`{"allowed":true,"id":"d","count":4,"limit":10,"remaining":6,"reset_ms":1000,"retry_after_ms":2},` +
		`{"allowed":true,"id":"e","count":0,"limit":0,"remaining":0,"reset_ms":0,"retry_after_ms":0}]}`
	if got := w.Body.String(); got != want {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
}
