package httpwire

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/table"
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
		{`"\\udc00"`, ""},              // an escaped backslash, then text
		{`"\\\ud800"`, msgIDSurrogate}, // an escaped backslash, then an escape
		{`"\udc00"`, msgIDSurrogate},
		{`"\ud800"`, msgIDSurrogate},
		{`"x\ud800"`, msgIDSurrogate},
		{`"\ud800x"`, msgIDSurrogate},
		{`"\ud800\n"`, msgIDSurrogate},
		{`"\ud800\u0041"`, msgIDSurrogate},
		{`"\ud800\ud800"`, msgIDSurrogate},
		{`"\ude00\ud83d"`, msgIDSurrogate},
		{`"\ud83d\ude00\udc00"`, msgIDSurrogate},
		{"\"é€😀\"", ""},
		{"\"\xff\"", table.MsgUTF8},
		{"\"\\ud800\xff\"", table.MsgUTF8}, // bytes first
		{"\"\xed\xa0\x80\"", table.MsgUTF8},
		{"\"\xc3\"", table.MsgUTF8},
	}
	for _, tt := range tests {
		if _, _, ok := scanString(tt.raw, 0); !ok {
			t.Fatalf("%q is not a well-formed JSON string", tt.raw)
		}
		if got := unicodeMsg(tt.raw); got != tt.want {
			t.Errorf("unicodeMsg(%q): got %q, want %q", tt.raw, got, tt.want)
		}
		if got := refUnicodeMsg([]byte(tt.raw)); got != tt.want {
			t.Errorf("refUnicodeMsg(%q): got %q, want %q", tt.raw, got, tt.want)
		}
	}
}

// FuzzUnicodeRule holds unicodeMsg to the reference's way of finding the
// same rule, on every well-formed JSON string.
func FuzzUnicodeRule(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83d\ude00"`, `"\\udc00"`, `"\ud800\u0041"`, "\"\xff\"", `"\udc00"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if end, _, ok := scanString(raw, 0); raw == "" || raw[0] != '"' || !ok || end != len(raw) {
			return
		}
		if got, want := unicodeMsg(raw), refUnicodeMsg([]byte(raw)); got != want {
			t.Fatalf("unicodeMsg(%q): got %q, the reference %q", raw, got, want)
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
		batch := make([]Params, 0, 2)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := parseBody(body, nil, ModeCheck, batch); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("parseBody(%s): %v allocations, want 0", body, n)
		}
	}
}
