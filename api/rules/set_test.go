package rules

import (
	"reflect"
	"strings"
	"testing"
)

func TestSetMatch(t *testing.T) {
	t.Parallel()
	s, err := NewSet([]Rule{
		urlRule("root", "/", "", ""),
		urlRule("api", "/api", "", ""),
		urlRule("api-slash", "/api/", "", ""),
		urlRule("login", "/api/login", "", ""),
		urlRule("login-post", "/api/login", "POST", ""),
		urlRule("login-host", "/api/login", "", "example.com"),
		urlRule("login-post-host", "/api/login", "POST", "example.com"),
		urlRule("users", "/API/Users", "", ""),
		urlRule("deep", "/api/v1/things", "GET", ""),
		urlRule("static-dir", "/static/", "", "cdn.example.com"),
		urlRule("intl", "/überall", "", ""),
		nameRule("by-name"),
	}, 7)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	tests := []struct {
		method, host, path string
		want               string // "" for no match
	}{
		// Longest prefix wins, segment by segment.
		{"GET", "x.org", "/", "root"},
		{"GET", "x.org", "/other", "root"},
		{"GET", "x.org", "/api", "api"},
		{"GET", "x.org", "/apix", "root"},
		{"GET", "x.org", "/api/", "api-slash"},
		{"GET", "x.org", "/api/x", "api-slash"},
		{"GET", "x.org", "/api/login", "login"},
		{"GET", "x.org", "/api/login/", "login"},
		{"GET", "x.org", "/api/login/2fa", "login"},
		{"GET", "x.org", "/api/loginx", "api-slash"},
		{"GET", "x.org", "/api/v1/things/42", "deep"},
		{"POST", "x.org", "/api/v1/things/42", "api-slash"},
		// Case-insensitive prefixes.
		{"GET", "x.org", "/API/LOGIN", "login"},
		{"GET", "x.org", "/api/users/7", "users"},
		{"GET", "x.org", "/Api/USERS", "users"},
		{"GET", "x.org", "/ÜBERALL", "root"}, // ASCII only
		{"GET", "x.org", "/überall/x", "intl"},
		// Specificity: method and host > host > method > neither.
		{"POST", "example.com", "/api/login", "login-post-host"},
		{"post", "EXAMPLE.com:8443", "/api/login", "login-post-host"},
		{"GET", "example.com", "/api/login", "login-host"},
		{"POST", "other.org", "/api/login", "login-post"},
		{"GET", "other.org", "/api/login", "login"},
		// Host filters.
		{"GET", "cdn.example.com", "/static/app.js", "static-dir"},
		{"GET", "CDN.Example.Com:443", "/static/app.js", "static-dir"},
		{"GET", "example.com", "/static/app.js", "root"},
		{"GET", "cdn.example.com", "/static", "root"},
	}
	for _, tt := range tests {
		got, ok := s.Match(tt.method, tt.host, tt.path)
		if ok != (tt.want != "") || got.Name != tt.want {
			t.Errorf("Match(%q, %q, %q) = %q, %v; want %q", tt.method, tt.host, tt.path, got.Name, ok, tt.want)
		}
	}

	// Without a catch-all there is no match outside the prefixes.
	s2, err := NewSet([]Rule{urlRule("api", "/api", "GET", "a.org"), nameRule("n")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][3]string{{"GET", "a.org", "/x"}, {"POST", "a.org", "/api"}, {"GET", "b.org", "/api"}, {"GET", "a.org", ""}, {"GET", "a.org", "api"}} {
		if got, ok := s2.Match(p[0], p[1], p[2]); ok {
			t.Errorf("Match(%q) = %q, want no match", p, got.Name)
		}
	}
	empty, _ := NewSet(nil, 1)
	if _, ok := empty.Match("GET", "a", "/"); ok {
		t.Error("empty set matched, want no match")
	}
}

func TestSetMatchLongPath(t *testing.T) {
	t.Parallel()
	long := "/" + strings.Repeat("A", 300)
	s, err := NewSet([]Rule{urlRule("long", long, "", ""), urlRule("short", "/a", "", "")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Match("GET", "", strings.ToLower(long)+"/x"); !ok || got.Name != "long" {
		t.Errorf("got %q, %v; want long", got.Name, ok)
	}
	if got, ok := s.Match("GET", "", "/A"+strings.Repeat("/x", 5000)); !ok || got.Name != "short" {
		t.Errorf("got %q, %v; want short", got.Name, ok)
	}
}

func TestSetAccessors(t *testing.T) {
	t.Parallel()
	in := []Rule{urlRule("b", "/b", "get", "B.org:1"), nameRule("a"), nameRule("c")}
	s, err := NewSet(in, 42)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != 42 || s.Len() != 3 {
		t.Errorf("got Version %d Len %d, want 42 and 3", s.Version(), s.Len())
	}
	rules := s.Rules()
	var names []string
	for _, r := range rules {
		names = append(names, r.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c"}) {
		t.Errorf("got names %v, want [a b c]", names)
	}
	rules[0].Limit = 999 // a copy
	if r, _ := s.Get("a"); r.Limit == 999 {
		t.Error("Rules returned the Set's own slice, want a copy")
	}
	if r, ok := s.Get("b"); !ok || r.Match != (Match{Prefix: "/b", Method: "GET", Host: "b.org"}) {
		t.Errorf("Get(b) = %+v, %v; want the canonical rule", r, ok)
	}
	if in[0].Match.Method != "get" {
		t.Error("NewSet modified its argument")
	}
	if _, ok := s.Get("zz"); ok {
		t.Error("Get(zz) found a rule, want none")
	}
}

func TestNewSetErrors(t *testing.T) {
	t.Parallel()
	_, err := NewSet([]Rule{nameRule("a"), nameRule("b"), nameRule("a")}, 1)
	checkError(t, err, Error{Index: 2, Name: "a", Field: "name"})
	_, err = NewSet([]Rule{urlRule("a", "/x", "get", "h:1"), urlRule("b", "/X", "GET", "H")}, 1)
	checkError(t, err, Error{Index: 1, Name: "b", Field: "match"})
	_, err = NewSet([]Rule{nameRule("a"), {Name: "b"}}, 1)
	checkError(t, err, Error{Index: 1, Name: "b", Field: "scale"})
}
