package rules

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error matches
// ErrInvalid, and that whatever parses survives Marshal and Parse, and JSON,
// unchanged.
func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "rules.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(seed),
		"",
		"rules: []\n",
		"rules:\n  - {name: a, scale: 30000, limit: 0, match: {prefix: /A, method: get, host: \"[::1]:80\"}}\n",
		"rules:\n  - {name: a, scale: &s 1m, limit: 1}\n  - {name: b, scale: *s, limit: 2, burst: 3, shadow: true}\n",
		"rules:\n  - <<: {name: a}\n",
		"rules: [1, [2], {}]\n",
		"rules:\n  - name: a\n    scale: [1s\n",
		"---\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := Parse(data)
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) {
				t.Fatalf("Parse error %T %v is not an *Error matching ErrInvalid", err, err)
			}
			return
		}
		out, err := Marshal(rules)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", rules, err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(rules)): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(again, rules) {
			t.Fatalf("round trip changed the rules:\n got %+v\nwant %+v\nvia\n%s", again, rules, out)
		}
		js, err := json.Marshal(rules)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		var fromJSON []Rule
		if err := json.Unmarshal(js, &fromJSON); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", js, err)
		}
		if len(rules) > 0 && !reflect.DeepEqual(fromJSON, rules) {
			t.Fatalf("JSON round trip changed the rules:\n got %+v\nwant %+v\nvia %s", fromJSON, rules, js)
		}
		if _, err := NewSet(rules, 1); err != nil {
			t.Fatalf("NewSet of parsed rules: %v", err)
		}
	})
}
