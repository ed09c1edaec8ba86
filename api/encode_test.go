package api

import (
	"testing"
	"time"
)

func TestCeilDiv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d, unit time.Duration
		want    int64
	}{
		{0, time.Second, 0},
		{-time.Second, time.Second, 0},
		{1, time.Second, 1},
		{time.Second, time.Second, 1},
		{time.Second + 1, time.Second, 2},
		{1999 * time.Microsecond, time.Millisecond, 2},
		{1<<63 - 1, time.Second, 9223372037},
	}
	for _, tt := range tests {
		if got := ceilDiv(tt.d, tt.unit); got != tt.want {
			t.Errorf("ceilDiv(%v, %v): got %d, want %d", tt.d, tt.unit, got, tt.want)
		}
	}
}

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
		if got := cleanPath(tt.in); got != tt.want {
			t.Errorf("cleanPath(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFastPathAllocs keeps the GET parser free of allocations on the fast
// path, by rule or not, and cleanPath of a clean path. (AllocsPerRun
// cannot run in a parallel test.)
func TestFastPathAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = cleanPath("/api/v1/users/") }); n != 0 {
		t.Errorf("cleanPath of a clean path: got %v allocations, want 0", n)
	}
	for _, raw := range []string{
		"id=user-42&scale=30s&limit=500",
		"id=user-42&scale=1000&limit=5&algorithm=token_bucket&burst=10&hits=2",
		"id=user-42&rule=login",
	} {
		if n := testing.AllocsPerRun(100, func() { _, _ = parseQuery(raw, modeCheck) }); n != 0 {
			t.Errorf("parseQuery(%q): got %v allocations, want 0", raw, n)
		}
	}
}
