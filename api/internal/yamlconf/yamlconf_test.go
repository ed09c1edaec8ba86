package yamlconf

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseKeepsPositions(t *testing.T) {
	t.Parallel()
	n, err := Parse([]byte("a: 1\nb:\n  - x: true\n  - y\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := n.Fields("", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f["a"].Uint("a", 10); got != 1 || f["a"].Line != 1 {
		t.Errorf("a = %d at line %d, want 1 at line 1", got, f["a"].Line)
	}
	items, err := f["b"].List("b")
	if err != nil || len(items) != 2 || items[0].Line != 3 || items[1].Line != 4 {
		t.Fatalf("b = %v, %v; want two items at lines 3 and 4", items, err)
	}
	x, err := items[0].Fields("b[0]", []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := x["x"].Bool("b[0].x"); err != nil || !b {
		t.Errorf("b[0].x = %v, %v; want true", b, err)
	}
}

func TestStrictErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc string
		check     func(*Node) error
		want      string
	}{
		{"unknown key", "a: 1\nzz: 2\n", func(n *Node) error { _, err := n.Fields("", []string{"a"}); return err },
			"line 2: zz: is not a known key (known: a)"},
		{"repeated key", "a: 1\na: 2\n", func(n *Node) error { _, err := n.Fields("", []string{"a"}); return err },
			"line 2: a: is repeated (first at line 1)"},
		{"key not a string", "0.25: x\n", func(n *Node) error { _, err := n.Fields("", []string{"a"}); return err },
			`line 1: key "0.25" is not a string`},
		{"not a mapping", "- a\n", func(n *Node) error { _, err := n.Fields("root", nil); return err },
			"line 1: root: must be a mapping"},
		{"not a list", "a: 1\n", func(n *Node) error { _, err := n.List("top"); return err },
			"line 1: top: must be a list"},
		{"not a bool", "yes please\n", func(n *Node) error { _, err := n.Bool("f"); return err },
			"line 1: f: must be true or false"},
		{"out of range", "300\n", func(n *Node) error { _, err := n.Uint("u", 255); return err },
			"line 1: u: must be a whole number from 0 to 255"},
		{"negative", "-1\n", func(n *Node) error { _, err := n.Uint("u", 255); return err },
			"line 1: u: must be a whole number from 0 to 255"},
		{"a list is not a string", "[1]\n", func(n *Node) error { _, err := n.String("s"); return err },
			"line 1: s: must be a string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n, err := Parse([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			err = c.check(n)
			if err == nil || err.Error() != c.want || !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, want %q (matching ErrInvalid)", err, c.want)
			}
		})
	}
}

func TestSyntaxErrorHasLine(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("a: 1\nb: [\n"))
	var e *Error
	if !errors.As(err, &e) || e.Line == 0 || strings.HasPrefix(e.Msg, "yaml:") {
		t.Errorf("got %#v, want an *Error with a line and the library's message", err)
	}
}

func TestEmptyDocumentIsNull(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"", "# only a comment\n", "~\n"} {
		n, err := Parse([]byte(doc))
		if err != nil || n.Kind != Null {
			t.Errorf("Parse(%q) = %v, %v; want a Null node", doc, n, err)
		}
		if f, err := n.Fields("", nil); err != nil || len(f) != 0 {
			t.Errorf("Fields of %q = %v, %v; want empty", doc, f, err)
		}
	}
}

func TestAliasesBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x]\n")
	for i := 1; i < 40; i++ {
		b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [*a" + strconv.Itoa(i-1) + ", *a" + strconv.Itoa(i-1) + "]\n")
	}
	if _, err := Parse([]byte(b.String())); err == nil {
		t.Error("an exponential alias document parsed; want an error")
	}
}

// TestTabIndentLine: a tab in the indentation of the line after a plain
// scalar is reported at the tab's line and column, where the YAML library
// names the line the scalar starts on; every entry point says the same.
func TestTabIndentLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in           string
		line, column int
	}{
		{"a:\n  - name: x\n\tscale: 1s\n", 3, 1},
		{"a:\n  - name: x\n    scale: 1s\n\t\n    limit: 1\n", 4, 1},
		{"a:\n  - name: x\n    scale: 1s\n    limit: 1\n  \tmatch: {prefix: /}\n", 5, 3},
		{"# a comment\n\nk: v\n\tw: 1\n", 4, 1},
	}
	for _, c := range cases {
		for name, parse := range map[string]func([]byte) error{
			"Parse":        func(b []byte) error { _, err := Parse(b); return err },
			"ParseOne":     func(b []byte) error { _, err := ParseOne(b); return err },
			"DecodeStrict": func(b []byte) error { var v map[string]any; return DecodeStrict(b, &v) },
		} {
			err := parse([]byte(c.in))
			var e *Error
			if !errors.As(err, &e) || e.Msg != msgTabIndent || e.Line != c.line || e.Column != c.column {
				t.Errorf("%s(%q) = %#v, want %q at line %d, column %d", name, c.in, err, msgTabIndent, c.line, c.column)
			}
		}
	}
	// Another syntax error keeps the library's line.
	_, err := Parse([]byte("a:\n\t- x\n"))
	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || e.Column != 0 || e.Msg == msgTabIndent {
		t.Errorf("a tab that starts a token: %#v, want the library's line 2", err)
	}
}
