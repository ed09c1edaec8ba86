package httpwire

import (
	"testing"
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
