package rules

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

func TestParseGood(t *testing.T) {
	t.Parallel()
	login := Rule{Name: "login", Policy: table.Policy{Scale: 30 * time.Second, Limit: 5}}
	tests := []struct {
		name string
		in   string
		want []Rule
	}{
		{"empty file", "", []Rule{}},
		{"comment only", "# no rules yet\n", []Rule{}},
		{"empty document", "---\n", []Rule{}},
		{"empty list", "rules: []\n", []Rule{}},
		{"null list", "rules:\n", []Rule{}},
		{"duration", "rules:\n  - name: login\n    scale: 30s\n    limit: 5\n", []Rule{login}},
		{"milliseconds", "rules:\n  - name: login\n    scale: 30000\n    limit: 5\n", []Rule{login}},
		{"milliseconds string", "rules:\n  - name: login\n    scale: \"30000\"\n    limit: 5\n", []Rule{login}},
		{"compound duration", "rules:\n  - {name: a, scale: 1h30m, limit: 1}\n",
			[]Rule{{Name: "a", Policy: table.Policy{Scale: 90 * time.Minute, Limit: 1}}}},
		{"sub-second whole ms", "rules:\n  - {name: a, scale: 1.5s, limit: 1}\n",
			[]Rule{{Name: "a", Policy: table.Policy{Scale: 1500 * time.Millisecond, Limit: 1}}}},
		{"bounds", "rules:\n  - {name: a, scale: 1ms, limit: 0}\n  - {name: b, scale: 8784h, limit: 9223372036854775807}\n",
			[]Rule{{Name: "a", Policy: table.Policy{Scale: time.Millisecond}}, {Name: "b", Policy: table.Policy{Scale: table.MaxScale, Limit: 1<<63 - 1}}}},
		{"defaults", "rules:\n  - name: a\n    scale: 1s\n    limit: 1\n    algorithm:\n    burst: ~\n    shadow: null\n    match:\n",
			[]Rule{{Name: "a", Policy: table.Policy{Algorithm: table.FixedWindow, Scale: time.Second, Limit: 1}}}},
		{"every field", `rules:
  - name: login
    algorithm: fixed_window
    scale: 30s
    limit: 5
    burst: 10
    shadow: true
    match:
      prefix: /api/login
      method: POST
      host: example.com
`, []Rule{{
			Name:   "login",
			Policy: table.Policy{Scale: 30 * time.Second, Limit: 5, Burst: 10},
			Shadow: true,
			Match:  Match{Prefix: "/api/login", Method: "POST", Host: "example.com"},
		}}},
		{"case normalisation", "rules:\n  - {name: a, scale: 1s, limit: 1, match: {prefix: /API/Login, method: post, host: Example.COM:8080}}\n",
			[]Rule{{Name: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}, Match: Match{Prefix: "/API/Login", Method: "POST", Host: "example.com"}}}},
		{"ipv6 host", "rules:\n  - {name: a, scale: 1s, limit: 1, match: {prefix: /, host: \"[2001:DB8::1]:443\"}}\n",
			[]Rule{{Name: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}, Match: Match{Prefix: "/", Host: "2001:db8::1"}}}},
		{"file order kept", "rules:\n  - {name: z, scale: 1s, limit: 1}\n  - {name: a, scale: 1s, limit: 1}\n",
			[]Rule{{Name: "z", Policy: table.Policy{Scale: time.Second, Limit: 1}}, {Name: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}}}},
		{"same prefix, different filters", `rules:
  - {name: a, scale: 1s, limit: 1, match: {prefix: /api}}
  - {name: b, scale: 1s, limit: 1, match: {prefix: /API, method: GET}}
  - {name: c, scale: 1s, limit: 1, match: {prefix: /api, host: x.org}}
`, []Rule{
			{Name: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}, Match: Match{Prefix: "/api"}},
			{Name: "b", Policy: table.Policy{Scale: time.Second, Limit: 1}, Match: Match{Prefix: "/API", Method: "GET"}},
			{Name: "c", Policy: table.Policy{Scale: time.Second, Limit: 1}, Match: Match{Prefix: "/api", Host: "x.org"}},
		}},
		{"numeric-looking name", "rules:\n  - {name: 123, scale: 1s, limit: 1}\n", []Rule{{Name: "123", Policy: table.Policy{Scale: time.Second, Limit: 1}}}},
		{"hex and underscores in integers", "rules:\n  - {name: a, scale: 0x3e8, limit: 0x10}\n",
			[]Rule{{Name: "a", Policy: table.Policy{Scale: time.Second, Limit: 16}}}},
		{"aliases", "rules:\n  - {name: a, scale: &s 1m, limit: &l 7}\n  - {name: b, scale: *s, limit: *l}\n",
			[]Rule{{Name: "a", Policy: table.Policy{Scale: time.Minute, Limit: 7}}, {Name: "b", Policy: table.Policy{Scale: time.Minute, Limit: 7}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	t.Parallel()
	// rule wraps the fields of a rule named a at index 0, from line 2.
	rule := func(fields string) string { return "rules:\n  - name: a\n" + fields }
	tests := []struct {
		name string
		in   string
		want Error
	}{
		{"unknown field", rule("    scale: 1s\n    limit: 1\n    bogus: 1\n"), Error{Index: 0, Name: "a", Field: "bogus", Line: 5}},
		{"unknown field before name", "rules:\n  - bogus: 1\n    name: a\n", Error{Index: 0, Name: "a", Field: "bogus", Line: 2}},
		{"unknown top-level field", "rules: []\nlimits: []\n", Error{Index: -1, Field: "limits", Line: 2}},
		{"unknown match field", rule("    scale: 1s\n    limit: 1\n    match: {prefix: /, path: /x}\n"), Error{Index: 0, Name: "a", Field: "match.path", Line: 5}},
		{"misspelt field", rule("    Scale: 1s\n"), Error{Index: 0, Name: "a", Field: "Scale", Line: 3}},
		{"repeated field", rule("    scale: 1s\n    scale: 2s\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale", Line: 4}},
		{"merge key", "rules:\n  - &r {name: a, scale: 1s, limit: 1}\n  - <<: *r\n    name: b\n", Error{Index: 1, Name: "b", Field: "<<", Line: 3}},
		{"missing name", "rules:\n  - scale: 1s\n    limit: 1\n", Error{Index: 0, Field: "name", Line: 2}},
		{"null name", "rules:\n  - name:\n    scale: 1s\n    limit: 1\n", Error{Index: 0, Field: "name"}},
		{"empty name", "rules:\n  - name: ''\n    scale: 1s\n    limit: 1\n", Error{Index: 0, Field: "name"}},
		{"missing scale", rule("    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale", Line: 2}},
		{"missing limit", rule("    scale: 1s\n"), Error{Index: 0, Name: "a", Field: "limit", Line: 2}},
		{"name upper case", "rules:\n  - {name: Login, scale: 1s, limit: 1}\n", Error{Index: 0, Name: "Login", Field: "name", Line: 2}},
		{"name leading dash", "rules:\n  - {name: -a, scale: 1s, limit: 1}\n", Error{Index: 0, Name: "-a", Field: "name"}},
		{"name space", "rules:\n  - {name: a b, scale: 1s, limit: 1}\n", Error{Index: 0, Name: "a b", Field: "name"}},
		{"name too long", "rules:\n  - {name: " + strings.Repeat("a", 65) + ", scale: 1s, limit: 1}\n", Error{Index: 0, Name: strings.Repeat("a", 65), Field: "name"}},
		{"name not a string", "rules:\n  - {name: [a], scale: 1s, limit: 1}\n", Error{Index: 0, Field: "name"}},
		{"duplicate name", "rules:\n  - {name: a, scale: 1s, limit: 1}\n  - {name: b, scale: 1s, limit: 1}\n  - {name: a, scale: 2s, limit: 1}\n", Error{Index: 2, Name: "a", Field: "name", Line: 4}},
		{"scale zero", rule("    scale: 0\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale", Line: 3}},
		{"scale zero duration", rule("    scale: 0s\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale negative", rule("    scale: -5\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale negative duration", rule("    scale: -1s\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale not whole ms", rule("    scale: 1500us\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale below 1ms", rule("    scale: 500us\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale too large", rule("    scale: 8785h\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale too many ms", rule("    scale: 31622400001\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale overflowing ms", rule("    scale: \"99999999999999999999\"\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale garbage", rule("    scale: soon\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale", Line: 3}},
		{"scale float", rule("    scale: 1.5\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale list", rule("    scale: [1s]\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"scale bool", rule("    scale: true\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "scale"}},
		{"limit negative", rule("    scale: 1s\n    limit: -1\n"), Error{Index: 0, Name: "a", Field: "limit", Line: 4}},
		{"limit float", rule("    scale: 1s\n    limit: 1.5\n"), Error{Index: 0, Name: "a", Field: "limit"}},
		{"limit string", rule("    scale: 1s\n    limit: \"5\"\n"), Error{Index: 0, Name: "a", Field: "limit"}},
		{"limit overflow", rule("    scale: 1s\n    limit: 9223372036854775808\n"), Error{Index: 0, Name: "a", Field: "limit"}},
		{"burst negative", rule("    scale: 1s\n    limit: 1\n    burst: -1\n"), Error{Index: 0, Name: "a", Field: "burst", Line: 5}},
		{"shadow not bool", rule("    scale: 1s\n    limit: 1\n    shadow: maybe\n"), Error{Index: 0, Name: "a", Field: "shadow"}},
		{"unknown algorithm", rule("    algorithm: leaky\n    scale: 1s\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "algorithm", Line: 3}},
		{"algorithm wrong case", rule("    algorithm: FIXED_WINDOW\n    scale: 1s\n    limit: 1\n"), Error{Index: 0, Name: "a", Field: "algorithm"}},
		{"prefix without slash", rule("    scale: 1s\n    limit: 1\n    match:\n      prefix: api\n"), Error{Index: 0, Name: "a", Field: "match.prefix", Line: 6}},
		{"prefix with space", rule("    scale: 1s\n    limit: 1\n    match: {prefix: '/a b'}\n"), Error{Index: 0, Name: "a", Field: "match.prefix"}},
		{"prefix with query", rule("    scale: 1s\n    limit: 1\n    match: {prefix: '/a?b'}\n"), Error{Index: 0, Name: "a", Field: "match.prefix"}},
		{"match without prefix", rule("    scale: 1s\n    limit: 1\n    match: {method: GET}\n"), Error{Index: 0, Name: "a", Field: "match.prefix", Line: 5}},
		{"empty match", rule("    scale: 1s\n    limit: 1\n    match: {}\n"), Error{Index: 0, Name: "a", Field: "match.prefix"}},
		{"match not a mapping", rule("    scale: 1s\n    limit: 1\n    match: /api\n"), Error{Index: 0, Name: "a", Field: "match"}},
		{"bad method", rule("    scale: 1s\n    limit: 1\n    match: {prefix: /, method: 'GE T'}\n"), Error{Index: 0, Name: "a", Field: "match.method"}},
		{"bad method char", rule("    scale: 1s\n    limit: 1\n    match: {prefix: /, method: 'G(ET'}\n"), Error{Index: 0, Name: "a", Field: "match.method"}},
		{"bad host", rule("    scale: 1s\n    limit: 1\n    match: {prefix: /, host: 'exa mple.com'}\n"), Error{Index: 0, Name: "a", Field: "match.host"}},
		{"bad port", rule("    scale: 1s\n    limit: 1\n    match: {prefix: /, host: 'example.com:http'}\n"), Error{Index: 0, Name: "a", Field: "match.host"}},
		{"empty host with port", rule("    scale: 1s\n    limit: 1\n    match: {prefix: /, host: ':80'}\n"), Error{Index: 0, Name: "a", Field: "match.host"}},
		{"ambiguous match", `rules:
  - {name: a, scale: 1s, limit: 1, match: {prefix: /api, method: get, host: Example.com}}
  - {name: b, scale: 1s, limit: 1, match: {prefix: /api}}
  - {name: c, scale: 1s, limit: 1, match: {prefix: /API, method: GET, host: example.com:443}}
`, Error{Index: 2, Name: "c", Field: "match", Line: 4}},
		{"ambiguous plain prefix", "rules:\n  - {name: a, scale: 1s, limit: 1, match: {prefix: /x}}\n  - {name: b, scale: 1s, limit: 1, match: {prefix: /X}}\n",
			Error{Index: 1, Name: "b", Field: "match"}},
		{"first bad rule reported", "rules:\n  - {name: a, scale: 1s, limit: 1}\n  - {name: b, scale: 0, limit: 1}\n  - {name: c, scale: 1s, limit: -1}\n",
			Error{Index: 1, Name: "b", Field: "scale", Line: 3}},
		{"rules not a list", "rules: 5\n", Error{Index: -1, Field: "rules", Line: 1}},
		{"rule not a mapping", "rules:\n  - {name: a, scale: 1s, limit: 1}\n  - 5\n", Error{Index: 1, Line: 3}},
		{"null rule", "rules:\n  - ~\n", Error{Index: 0}},
		{"top level a list", "- name: a\n", Error{Index: -1, Line: 1}},
		{"top level a string", "rules\n", Error{Index: -1, Line: 1}},
		{"syntax error", "rules:\n  - name: a\n    scale: [1s\n    limit: 1\n", Error{Index: -1, Line: 2}},
		{"unterminated string", "rules:\n  - name: a\n    scale: \"1s\n", Error{Index: -1, Line: 3}},
		{"tab indentation", "rules:\n\t- name: a\n", Error{Index: -1, Line: 2}},
		{"tab indentation after a scalar", "rules:\n  - name: a\n    scale: 1s\n\tlimit: 1\n", Error{Index: -1, Line: 4}},
		{"two documents", "rules: []\n---\nrules: []\n", Error{Index: -1, Line: 3}},
		{"syntax error in second document", "rules: []\n---\nrules: [\n", Error{Index: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("got %+v and no error, want %+v", got, tt.want)
			}
			if got != nil {
				t.Errorf("got rules %+v with the error, want none", got)
			}
			checkError(t, err, tt.want)
		})
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  Error
		want string
	}{
		{Error{Index: 2, Name: "login", Field: "scale", Message: "must be between 1ms and 8784h0m0s"}, `rules[2] "login": scale: must be between 1ms and 8784h0m0s`},
		{Error{Index: 0, Field: "name", Message: "is required"}, `rules[0]: name: is required`},
		{Error{Index: -1, Name: "login", Field: "limit", Message: "must not be negative"}, `rule "login": limit: must not be negative`},
		{Error{Index: -1, Message: "mapping values are not allowed in this context", Line: 3}, `line 3: mapping values are not allowed in this context`},
		{Error{Index: 1, Name: "a", Field: "match.bogus", Message: "is not a known field", Line: 4}, `line 4: rules[1] "a": match.bogus: is not a known field`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	// The message of a real range error uses table's bounds.
	_, err := Parse([]byte("rules:\n  - {name: login, scale: 0, limit: 1}\n"))
	if want := `line 2: rules[0] "login": scale: must be between 1ms and 8784h0m0s`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	in := []Rule{
		{Name: "z-last", Policy: table.Policy{Scale: time.Hour, Limit: 0}},
		{
			Name:   "login",
			Policy: table.Policy{Scale: 30 * time.Second, Limit: 5, Burst: 10},
			Shadow: true,
			Match:  Match{Prefix: "/API/Login", Method: "post", Host: "Example.COM:8443"},
		},
		{Name: "api", Policy: table.Policy{Scale: 1500 * time.Millisecond, Limit: 100}, Match: Match{Prefix: "/api/"}},
		{Name: "true", Policy: table.Policy{Scale: table.MaxScale, Limit: 1<<63 - 1}, Match: Match{Prefix: "/&x:{y}*[z]"}},
		{Name: "0", Policy: table.Policy{Scale: 90 * time.Minute, Limit: 1}, Match: Match{Prefix: "/", Host: "::1"}},
	}
	data, err := Marshal(in)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(Marshal(rules)): %v\n%s", err, data)
	}
	want, err := canonical(in, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v\nfrom:\n%s", got, want, data)
	}
	for _, s := range []string{"scale: 1h\n", "scale: 1.5s\n", "scale: 1h30m\n", "method: POST\n", "host: example.com\n"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("got\n%s\nwant it to contain %q", data, s)
		}
	}

	empty, err := Marshal(nil)
	if err != nil || string(empty) != "rules: []\n" {
		t.Errorf("Marshal(nil) = %q, %v; want %q", empty, err, "rules: []\n")
	}
}

func TestMarshalInvalid(t *testing.T) {
	t.Parallel()
	_, err := Marshal([]Rule{nameRule("a"), {Name: "b", Policy: table.Policy{Scale: 0, Limit: 1}}})
	checkError(t, err, Error{Index: 1, Name: "b", Field: "scale"})
	_, err = Marshal([]Rule{nameRule("a"), nameRule("a")})
	checkError(t, err, Error{Index: 1, Name: "a", Field: "name"})
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	rules, err := LoadFile(filepath.Join("testdata", "rules.yaml"))
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	if len(rules) != 4 || rules[0].Name != "login" || rules[0].Match.Method != "POST" {
		t.Errorf("got %+v, want the 4 rules of testdata/rules.yaml, login first", rules)
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules:\n  - {name: a, scale: 1s, limit: -1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFile(bad)
	checkError(t, err, Error{Index: 0, Name: "a", Field: "limit", Line: 2})
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("got %v, want the path %s in it", err, bad)
	}

	_, err = LoadFile(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Errorf("got %v, want an error matching fs.ErrNotExist and not ErrInvalid", err)
	}
}

// TestDecodeStrict checks the second line of defence of Parse: the YAML
// library's own KnownFields decoding rejects what walkFile rejects first.
func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		line int // 0: valid
	}{
		{"valid", "rules:\n  - {name: a, scale: 1s, limit: 1, match: {prefix: /}}\n", 0},
		{"empty", "", 0},
		{"unknown rule field", "rules:\n  - name: a\n    bogus: 1\n", 3},
		{"unknown match field", "rules:\n  - name: a\n    match:\n      path: /\n", 4},
		{"unknown top-level field", "rules: []\nextra: 1\n", 2},
		{"repeated field", "rules:\n  - name: a\n    name: b\n", 3},
		{"rules not a list", "rules: 5\n", 1},
	}
	for _, tt := range tests {
		err := decodeStrict([]byte(tt.in))
		if tt.line == 0 {
			if err != nil {
				t.Errorf("%s: got %v, want no error", tt.name, err)
			}
			continue
		}
		checkError(t, err, Error{Index: -1, Line: tt.line})
	}
}

// TestLoadFileNoRules: a rules file that holds no rule is refused unless it
// says so with "rules: []": an empty, blank or comment-only file is more
// likely a file caught between truncate and write than a wish to drop every
// rule.
func TestLoadFileNoRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, data string
		line       int // of the error; 0: none
	}{
		{"empty", "", 0},
		{"blank", " \n  \n\n", 0},
		{"comment only", "# no rules yet\n", 0},
		{"empty document", "---\n", 0},
		{"null list", "rules:\n", 1},
		{"explicit null", "\nrules: null\n", 2},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
			t.Fatal(err)
		}
		rules, err := LoadFile(path)
		if rules != nil {
			t.Errorf("%s: got rules %+v, want none", tt.name, rules)
		}
		checkError(t, err, Error{Index: -1, Field: "rules", Line: tt.line})
		if err != nil && (!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"rules: []"`)) {
			t.Errorf("%s: got %v, want the path and the way to say no rules (\"rules: []\")", tt.name, err)
		}
	}

	for _, data := range []string{"rules: []\n", "# every rule is gone\nrules: []\n"} {
		path := filepath.Join(dir, "explicit.yaml")
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		rules, err := LoadFile(path)
		if err != nil || rules == nil || len(rules) != 0 {
			t.Errorf("LoadFile(%q) = %+v, %v; want an empty rule set and no error", data, rules, err)
		}
	}
}
