package client

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// validUTF8 returns s with each byte of invalid UTF-8 replaced by U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for an invalid byte
		i += size
	}
	return b.String()
}

func TestDecodeDecision(t *testing.T) {
	t.Parallel()
	full := Decision{Allowed: true, Count: 1, Limit: 500, Remaining: 499, Reset: 29 * time.Second, Rule: "login", ShadowDenied: true}
	tests := []struct {
		name string
		body string
		want Decision
		ok   bool
	}{
		{"allowed", `{"allowed":true,"id":"x","count":1,"limit":500,"remaining":499,"reset_ms":29000,"retry_after_ms":0}`,
			Decision{Allowed: true, Count: 1, Limit: 500, Remaining: 499, Reset: 29 * time.Second}, true},
		{"denied", `{"allowed":false,"id":"x","count":3,"limit":3,"remaining":0,"reset_ms":600,"retry_after_ms":600}`,
			Decision{Count: 3, Limit: 3, Reset: 600 * time.Millisecond, RetryAfter: 600 * time.Millisecond}, true},
		{"every member", `{"allowed":true,"id":"x","rule":"login","count":1,"limit":500,"remaining":499,"reset_ms":29000,"retry_after_ms":0,"shadow_denied":true}`, full, true},
		{"white space and order", " \n{ \"shadow_denied\" : true , \"rule\":\"login\",\"reset_ms\":29000,\t\"remaining\":499,\"limit\":500,\"count\":1,\"allowed\":true }\r\n", full, true},
		{"unknown members skipped", `{"x":[1,{"y":null},"z",-0.5e+3,false,[]],"allowed":true,"o":{},"count":2}`, Decision{Allowed: true, Count: 2}, true},
		{"escaped rule", `{"allowed":true,"rule":"a\"b\u00e9\\"}`, Decision{Allowed: true, Rule: "a\"bé\\"}, true},
		{"escaped key", `{"\u0061llowed":true}`, Decision{Allowed: true}, true},
		{"rule in UTF-8", `{"allowed":true,"rule":"é😀"}`, Decision{Allowed: true, Rule: "é😀"}, true},
		// As encoding/json: each byte that is not UTF-8 becomes U+FFFD.
		{"rule not UTF-8", "{\"allowed\":true,\"rule\":\"a\xffb\xc2\"}", Decision{Allowed: true, Rule: "a\ufffdb\ufffd"}, true},
		{"duplicate: last wins", `{"allowed":false,"allowed":true}`, Decision{Allowed: true}, true},
		{"negative count", `{"allowed":true,"count":-2}`, Decision{Allowed: true, Count: -2}, true},
		{"negative retry is 0", `{"allowed":false,"retry_after_ms":-5}`, Decision{}, true},
		{"huge retry saturates", `{"allowed":false,"retry_after_ms":9223372036854775807}`, Decision{RetryAfter: math.MaxInt64}, true},
		{"min int", `{"allowed":true,"count":-9223372036854775808}`, Decision{Allowed: true, Count: math.MinInt64}, true},

		{"empty", ``, Decision{}, false},
		{"no allowed", `{"count":1}`, Decision{}, false},
		{"empty object", `{}`, Decision{}, false},
		{"array", `[{"allowed":true}]`, Decision{}, false},
		{"trailing data", `{"allowed":true}x`, Decision{}, false},
		{"two objects", `{"allowed":true}{"allowed":true}`, Decision{}, false},
		{"truncated", `{"allowed":true,"count":1`, Decision{}, false},
		{"trailing comma", `{"allowed":true,}`, Decision{}, false},
		{"fraction", `{"allowed":true,"count":1.5}`, Decision{}, false},
		{"exponent", `{"allowed":true,"count":1e3}`, Decision{}, false},
		{"leading zero", `{"allowed":true,"count":01}`, Decision{}, false},
		{"overflow", `{"allowed":true,"count":9223372036854775808}`, Decision{}, false},
		{"string count", `{"allowed":true,"count":"1"}`, Decision{}, false},
		{"null allowed", `{"allowed":null}`, Decision{}, false},
		{"capital True", `{"allowed":True}`, Decision{}, false},
		{"control character", "{\"allowed\":true,\"rule\":\"a\nb\"}", Decision{}, false},
		{"bad escape", `{"allowed":true,"rule":"\x"}`, Decision{}, false},
		{"short unicode escape", `{"allowed":true,"rule":"\u12"}`, Decision{}, false},
		{"unquoted key", `{allowed:true}`, Decision{}, false},
		{"deep nesting", `{"allowed":true,"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, Decision{}, false},
		{"bad skipped number", `{"allowed":true,"x":-}`, Decision{}, false},
		{"bad skipped fraction", `{"allowed":true,"x":1.}`, Decision{}, false},
		{"bad skipped literal", `{"allowed":true,"x":nul}`, Decision{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeDecision([]byte(tt.body), "login")
			if (err == nil) != tt.ok {
				t.Fatalf("got error %v, want ok %v", err, tt.ok)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeBatch(t *testing.T) {
	t.Parallel()
	two := []Check{{ID: "a", Limit: Limit{Rule: "login"}}, {ID: "b"}}
	d := `{"allowed":true,"id":"a","count":1,"limit":2,"remaining":1,"reset_ms":1000,"retry_after_ms":0}`
	tests := []struct {
		name        string
		body        string
		wantAllowed bool
		wantN       int
		ok          bool
	}{
		{"allowed", `{"allowed":true,"checks":[` + d + `,` + d + `]}`, true, 2, true},
		{"checks first", `{"checks":[` + d + `,` + d + `],"allowed":false}`, false, 2, true},
		{"too few", `{"allowed":true,"checks":[` + d + `]}`, false, 0, false},
		{"too many", `{"allowed":true,"checks":[` + d + `,` + d + `,` + d + `]}`, false, 0, false},
		{"empty checks", `{"allowed":true,"checks":[]}`, false, 0, false},
		{"no allowed", `{"checks":[` + d + `,` + d + `]}`, false, 0, false},
		{"no checks", `{"allowed":true}`, false, 0, false},
		{"single decision", d, false, 0, false},
		{"bad element", `{"allowed":true,"checks":[` + d + `,{}]}`, false, 0, false},
		{"trailing", `{"allowed":true,"checks":[` + d + `,` + d + `]}]`, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ds, allowed, err := decodeBatch([]byte(tt.body), two)
			if (err == nil) != tt.ok {
				t.Fatalf("got error %v, want ok %v", err, tt.ok)
			}
			if allowed != tt.wantAllowed || len(ds) != tt.wantN {
				t.Errorf("got %v with %d decisions, want %v with %d", allowed, len(ds), tt.wantAllowed, tt.wantN)
			}
		})
	}
}

func TestDecodeFieldError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want FieldError
	}{
		{`{"error":"limit: must be an integer between 1 and 9223372036854775807","field":"limit"}`,
			FieldError{Field: "limit", Message: "must be an integer between 1 and 9223372036854775807"}},
		{`{"error":"checks[1].limit: is required","field":"checks[1].limit"}`, FieldError{Field: "checks[1].limit", Message: "is required"}},
		{`{"error":"something odd","field":""}`, FieldError{Message: "something odd"}},
		{`not json`, FieldError{Message: `"not json"`}},
		{``, FieldError{Message: "(empty body)"}},
	}
	for _, tt := range tests {
		if got := decodeFieldError([]byte(tt.body)); *got != tt.want {
			t.Errorf("body %s: got %+v, want %+v", tt.body, *got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"1", time.Second},
		{"120", 2 * time.Minute},
		{"0", 0},
		{"-3", 0},
		{"99999999999999999", math.MaxInt64 / time.Second * time.Second},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
		{"1.5", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.v, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q): got %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for n := range 100 {
		d := maxBackoff
		if n < 7 {
			d = min(minBackoff<<n, maxBackoff)
		}
		for range 20 {
			if got := backoff(n); got < d/2 || got > d {
				t.Fatalf("backoff(%d): got %v, want within [%v, %v]", n, got, d/2, d)
			}
		}
	}
}

// FuzzDecodeDecision checks the scanner against encoding/json: whatever it
// accepts is valid JSON with the same values.
func FuzzDecodeDecision(f *testing.F) {
	for _, s := range []string{
		`{"allowed":true,"id":"x","count":1,"limit":500,"remaining":499,"reset_ms":29000,"retry_after_ms":0}`,
		`{"allowed":false,"id":"x","rule":"login","count":3,"limit":3,"remaining":0,"reset_ms":600,"retry_after_ms":600,"shadow_denied":true}`,
		`{"x":[1,{"y":null},"z\u00e9",-0.5e+3],"allowed":true}`,
		`{"\u0061llowed":true,"rule":"a\"b"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeDecision(b, "login")
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("accepted %q, which encoding/json rejects: %v", b, err)
		}
		var want Decision
		if err := json.Unmarshal(m["allowed"], &want.Allowed); err != nil {
			t.Fatalf("%q: allowed: %v", b, err)
		}
		ints := map[string]*int64{"count": &want.Count, "limit": &want.Limit, "remaining": &want.Remaining}
		for k, p := range ints {
			if raw, ok := m[k]; ok {
				n, err := strconv.ParseInt(string(raw), 10, 64)
				if err != nil {
					t.Fatalf("%q: %s: %v", b, k, err)
				}
				*p = n
			}
		}
		for k, p := range map[string]*time.Duration{"reset_ms": &want.Reset, "retry_after_ms": &want.RetryAfter} {
			if raw, ok := m[k]; ok {
				n, err := strconv.ParseInt(string(raw), 10, 64)
				if err != nil {
					t.Fatalf("%q: %s: %v", b, k, err)
				}
				*p = msDuration(n)
			}
		}
		if raw, ok := m["rule"]; ok {
			if err := json.Unmarshal(raw, &want.Rule); err != nil {
				t.Fatalf("%q: rule: %v", b, err)
			}
		}
		if raw, ok := m["shadow_denied"]; ok {
			if err := json.Unmarshal(raw, &want.ShadowDenied); err != nil {
				t.Fatalf("%q: shadow_denied: %v", b, err)
			}
		}
		if got != want {
			t.Fatalf("%q: got %+v, encoding/json says %+v", b, got, want)
		}
	})
}

// FuzzAppendQuery checks that every id, rule and algorithm survives the
// query encoding, as the service parses it.
func FuzzAppendQuery(f *testing.F) {
	f.Add("alice", "", "", int64(1), int64(1000), int64(5))
	f.Add("a b&c=d+e%f", "r&s", "leaky_bucket", int64(0), int64(-1), int64(0))
	f.Add("\x00\xff é", "", "x y", int64(-7), int64(1500000), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, id, rule, alg string, hits, scaleNs, limit int64) {
		l := Limit{Policy: Policy{Scale: time.Duration(scaleNs), Limit: limit, Algorithm: alg}, Rule: rule}
		q := string(appendQuery(nil, id, &l, hits))
		vals, err := url.ParseQuery(q)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		if got := vals.Get("id"); got != id {
			t.Errorf("%q: got id %q, want %q", q, got, id)
		}
		if got := vals.Get("rule"); got != rule {
			t.Errorf("%q: got rule %q, want %q", q, got, rule)
		}
		if got := vals.Get("algorithm"); got != alg {
			t.Errorf("%q: got algorithm %q, want %q", q, got, alg)
		}
		if got := vals.Get("hits"); got != strconv.FormatInt(hits, 10) {
			t.Errorf("%q: got hits %q, want %d", q, got, hits)
		}
		if s := vals.Get("scale"); s != "" {
			d, err := time.ParseDuration(s)
			if ms, merr := strconv.ParseInt(s, 10, 64); merr == nil {
				d, err = time.Duration(ms)*time.Millisecond, nil
			}
			if err != nil || d != l.Scale {
				t.Errorf("%q: got scale %q (%v), want %v", q, s, d, l.Scale)
			}
		}
		// The JSON form of the same check decodes to the same values
		// (ids of valid UTF-8 only: JSON cannot carry the others).
		var obj struct {
			ID   string `json:"id"`
			Hits int64  `json:"hits"`
			Rule string `json:"rule"`
		}
		body := appendCheckJSON(nil, &Check{ID: id, Limit: l, Hits: hits})
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if obj.ID != validUTF8(id) || obj.Hits != hits {
			t.Errorf("%s: got id %q hits %d, want %q %d", body, obj.ID, obj.Hits, id, hits)
		}
	})
}
