package rules

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

func TestRuleKey(t *testing.T) {
	t.Parallel()
	good := []string{"", "ip", "user", "header:X-API-Key", "query:api_key"}
	for _, k := range good {
		file := "rules:\n  - name: r\n    scale: 1s\n    limit: 1\n"
		if k != "" {
			file += "    key: \"" + k + "\"\n"
		}
		got, err := Parse([]byte(file))
		if err != nil || len(got) != 1 || got[0].Key != k {
			t.Errorf("key %q: got %+v, %v", k, got, err)
			continue
		}
		// Round trips through the file format and JSON.
		b, err := Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := Parse(b); err != nil || again[0] != got[0] {
			t.Errorf("key %q: Marshal/Parse gives %+v, %v", k, again, err)
		}
		j, _ := json.Marshal(got[0])
		var back Rule
		if err := json.Unmarshal(j, &back); err != nil || back != got[0] {
			t.Errorf("key %q: JSON round trip gives %+v, %v (%s)", k, back, err, j)
		}
	}
	bad := []string{"cookie:x", "header:", "query:", "header:bad name", "IP", "header:" + string(make([]byte, 200))}
	for _, k := range bad {
		r := Rule{Name: "r", Policy: table.Policy{Scale: time.Second, Limit: 1}, Key: k}
		var e *Error
		if err := r.Validate(); !errors.As(err, &e) || e.Field != "key" {
			t.Errorf("key %q: got %v, want an error on field key", k, err)
		}
	}
	if _, err := Parse([]byte("rules:\n  - name: r\n    scale: 1s\n    limit: 1\n    key: 7\n")); err == nil {
		t.Error("a non-string key was accepted")
	}
}
