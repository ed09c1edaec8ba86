package yamlconf

import (
	"errors"
	"testing"
)

// TestParseOne: one document is parsed as Parse parses it; a second one,
// or a syntax error in it, is an *Error at its line; no document is Null.
func TestParseOne(t *testing.T) {
	t.Parallel()
	n, err := ParseOne([]byte("a: 1\n"))
	if err != nil || n.Kind != Mapping || len(n.Pairs) != 1 || n.Pairs[0].Value.Line != 1 {
		t.Fatalf("ParseOne(a: 1) = %+v, %v; want a mapping of one pair", n, err)
	}
	for _, doc := range []string{"", "# nothing\n", "---\n"} {
		if n, err := ParseOne([]byte(doc)); err != nil || n.Kind != Null {
			t.Errorf("ParseOne(%q) = %+v, %v; want a Null node", doc, n, err)
		}
	}
	cases := []struct {
		doc  string
		want string
	}{
		{"a: 1\n---\nb: 2\n", "line 3: must hold one YAML document, not several"},
		{"a: 1\n---\nb: [\n", "line 3: did not find expected node content"},
		{"a: [\n", "line 1: did not find expected node content"},
	}
	for _, c := range cases {
		_, err := ParseOne([]byte(c.doc))
		var e *Error
		if !errors.As(err, &e) || err.Error() != c.want {
			t.Errorf("ParseOne(%q) = %v, want the *Error %q", c.doc, err, c.want)
		}
	}
	// Parse reads the first document only.
	if n, err := Parse([]byte("a: 1\n---\nb: 2\n")); err != nil || n.Kind != Mapping {
		t.Errorf("Parse of two documents = %+v, %v; want the first", n, err)
	}
}

// TestMergeKeyRefused: a merge key is kept in the tree, marked by its
// tag, and Fields refuses it naming it and its line.
func TestMergeKeyRefused(t *testing.T) {
	t.Parallel()
	n, err := Parse([]byte("base: &b {x: 1}\nitem:\n  <<: *b\n  y: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := n.Fields("", []string{"base", "item"})
	if err != nil {
		t.Fatal(err)
	}
	item := f["item"]
	if len(item.Pairs) != 2 || item.Pairs[0].Key.Tag != "!!merge" {
		t.Fatalf("item's pairs %+v, want the merge key first, tagged !!merge", item.Pairs)
	}
	_, err = item.Fields("item", []string{"x", "y"})
	if want := "line 3: item.<<: merge keys (<<) are not supported"; err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
		t.Errorf("Fields with a merge key = %v, want %q", err, want)
	}
}

// TestScalarDecoding: Int64 and Boolean read scalars as YAML does, and
// refuse other kinds and tags.
func TestScalarDecoding(t *testing.T) {
	t.Parallel()
	n, err := Parse([]byte("[0x10, -5, 0o17, 9223372036854775807, 9223372036854775808, \"5\", 1.5, true, off, yes, ~]\n"))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		i      int64
		iOK    bool
		b, bOK bool
	}
	wants := []want{
		{16, true, false, false},
		{-5, true, false, false},
		{15, true, false, false},
		{9223372036854775807, true, false, false},
		{0, false, false, false}, // past int64
		{0, false, false, false}, // a string
		{0, false, false, false}, // a float
		{0, false, true, true},
		{0, false, false, false}, // YAML 1.2: "off" is a string
		{0, false, false, false},
		{0, false, false, false}, // null
	}
	for k, w := range wants {
		item := n.Items[k]
		if i, ok := item.Int64(); i != w.i || ok != w.iOK {
			t.Errorf("item %d (%q): Int64 = %d, %v; want %d, %v", k, item.Value, i, ok, w.i, w.iOK)
		}
		if b, ok := item.Boolean(); b != w.b || ok != w.bOK {
			t.Errorf("item %d (%q): Boolean = %v, %v; want %v, %v", k, item.Value, b, ok, w.b, w.bOK)
		}
	}
}

// TestDecodeStrict: the library's KnownFields decoding, its first fault
// as an *Error with its line; Any takes whatever is there.
func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type doc struct {
		A Any              `yaml:"a"`
		B *struct{ C Any } `yaml:"b"`
	}
	cases := []struct {
		in   string
		line int // 0: no error
	}{
		{"", 0},
		{"a: [1, {x: y}]\nb: {c: 2}\n", 0},
		{"a: 1\nzz: 2\n", 2},
		{"a: 1\na: 2\n", 2},
		{"a: 1\nb: {c: 1, d: 2}\n", 2},
		{"a: [\n", 1},
	}
	for _, c := range cases {
		var d doc
		err := DecodeStrict([]byte(c.in), &d)
		var e *Error
		switch {
		case c.line == 0 && err != nil:
			t.Errorf("DecodeStrict(%q) = %v, want no error", c.in, err)
		case c.line != 0 && (!errors.As(err, &e) || e.Line != c.line || e.Msg == ""):
			t.Errorf("DecodeStrict(%q) = %#v, want an *Error at line %d", c.in, err, c.line)
		}
	}
}

// TestMarshal: two-space indentation, keys in field order.
func TestMarshal(t *testing.T) {
	t.Parallel()
	type item struct {
		Name string `yaml:"name"`
		N    int    `yaml:"count,omitempty"`
	}
	out, err := Marshal(struct {
		Items []item `yaml:"items"`
	}{[]item{{"a", 1}, {"b", 0}}})
	if want := "items:\n  - name: a\n    count: 1\n  - name: b\n"; err != nil || string(out) != want {
		t.Errorf("Marshal = %q, %v; want %q", out, err, want)
	}
}
