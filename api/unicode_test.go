package api

import (
	"testing"
)

// TestUnicodeRule: the escapes of a JSON string id are read one by one, a
// surrogate escape accepted only as the first half of a pair followed by
// its second; bytes must be UTF-8.
func TestUnicodeRule(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, want string }{
		{`"a"`, ""},
		{`"\n\t\"\\\/"`, ""},
		{`"\u0041\u00e9\uFFFD\uffff"`, ""},
		{`"\ud83d\ude00"`, ""},
		{`"\uD83D\uDE00x"`, ""},
		{`"\udbff\udfff"`, ""},
		{`"\\udc00"`, ""},               // an escaped backslash, then text
		{`"\\\ud800"`, ruleIDSurrogate}, // an escaped backslash, then an escape
		{`"\udc00"`, ruleIDSurrogate},
		{`"\ud800"`, ruleIDSurrogate},
		{`"x\ud800"`, ruleIDSurrogate},
		{`"\ud800x"`, ruleIDSurrogate},
		{`"\ud800\n"`, ruleIDSurrogate},
		{`"\ud800\u0041"`, ruleIDSurrogate},
		{`"\ud800\ud800"`, ruleIDSurrogate},
		{`"\ude00\ud83d"`, ruleIDSurrogate},
		{`"\ud83d\ude00\udc00"`, ruleIDSurrogate},
		{"\"é€😀\"", ""},
		{"\"\xff\"", ruleIDUTF8},
		{"\"\\ud800\xff\"", ruleIDUTF8}, // bytes first
		{"\"\xed\xa0\x80\"", ruleIDUTF8},
		{"\"\xc3\"", ruleIDUTF8},
	}
	for _, tt := range tests {
		if _, _, ok := scanString(tt.raw, 0); !ok {
			t.Fatalf("%q is not a well-formed JSON string", tt.raw)
		}
		if got := unicodeRule(tt.raw); got != tt.want {
			t.Errorf("unicodeRule(%q): got %q, want %q", tt.raw, got, tt.want)
		}
		if got := refUnicodeRule([]byte(tt.raw)); got != tt.want {
			t.Errorf("refUnicodeRule(%q): got %q, want %q", tt.raw, got, tt.want)
		}
	}
}

// FuzzUnicodeRule holds unicodeRule to the reference's way of finding the
// same rule, on every well-formed JSON string.
func FuzzUnicodeRule(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83d\ude00"`, `"\\udc00"`, `"\ud800\u0041"`, "\"\xff\"", `"\udc00"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if end, _, ok := scanString(raw, 0); raw == "" || raw[0] != '"' || !ok || end != len(raw) {
			return
		}
		if got, want := unicodeRule(raw), refUnicodeRule([]byte(raw)); got != want {
			t.Fatalf("unicodeRule(%q): got %q, the reference %q", raw, got, want)
		}
	})
}

// TestParseBodyIDAllocs: checking an id's UTF-8 allocates nothing, whether
// the id is plain ASCII (not checked: it cannot be invalid) or holds bytes
// over 0x7f (checked, then sliced from the body as before).
func TestParseBodyIDAllocs(t *testing.T) {
	for _, body := range []string{
		`{"id":"alice","scale":1000,"limit":5}`,
		`{"id":"é日本😀","scale":1000,"limit":5}`,
		`[{"id":"é","scale":1000,"limit":5},{"id":"b","scale":1000,"limit":5}]`,
	} {
		batch := make([]params, 0, 2)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := parseBody(body, nil, modeCheck, batch); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("parseBody(%s): %v allocations, want 0", body, n)
		}
	}
}
