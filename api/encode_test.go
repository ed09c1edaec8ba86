package api

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"
)

func TestAppendJSONString(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", `""`},
		{"abc", `"abc"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\n\r\t\x00\x1f", `"\u000a\u000d\u0009\u0000\u001f"`},
		{"\x7f<>&/", "\"\x7f<>&/\""},
		{"é日本🚀", `"é日本🚀"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"a\xffb", `"a\ufffdb"`},
		{"\xc3", `"\ufffd"`},
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`}, // a surrogate half is invalid UTF-8
	}
	for _, tt := range tests {
		if got := string(appendJSONString(nil, tt.in)); got != tt.want {
			t.Errorf("appendJSONString(%q): got %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzAppendJSONString checks the escaper against encoding/json: the output
// is valid JSON and decodes to what json.Marshal's output decodes to.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n", "\xff\xfe", "日本\u2028", "\x00\x1f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		if !json.Valid(got) || !utf8.Valid(got) {
			t.Fatalf("appendJSONString(%q): got invalid JSON %s", s, got)
		}
		var dGot, dWant string
		want, _ := json.Marshal(s)
		if err := json.Unmarshal(got, &dGot); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &dWant); err != nil {
			t.Fatal(err)
		}
		if dGot != dWant {
			t.Fatalf("appendJSONString(%q) decodes to %q, json.Marshal's to %q", s, dGot, dWant)
		}
	})
}

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
