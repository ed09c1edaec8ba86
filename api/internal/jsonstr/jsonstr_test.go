package jsonstr

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestAppend(t *testing.T) {
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
		if got := string(Append(nil, tt.in)); got != tt.want {
			t.Errorf("Append(%q): got %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzAppend checks the escaper against encoding/json: the output
// is valid JSON and decodes to what json.Marshal's output decodes to.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n", "\xff\xfe", "日本\u2028", "\x00\x1f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Append(nil, s)
		if !json.Valid(got) || !utf8.Valid(got) {
			t.Fatalf("Append(%q): got invalid JSON %s", s, got)
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
			t.Fatalf("Append(%q) decodes to %q, json.Marshal's to %q", s, dGot, dWant)
		}
	})
}
