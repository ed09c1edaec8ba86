// Package yamlconf reads YAML configuration files into a small tree of
// nodes that keep their line and column, and checks them strictly: every
// mapping key a known string, none repeated, every leaf of the type asked
// for. It owns go.yaml.in/yaml/v3 for the config formats of ratelimitd
// (api/rules, api/rls), so that no other package needs the YAML library's
// types: besides the tree it decodes strictly into structs (DecodeStrict)
// and encodes (Marshal).
package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("invalid YAML configuration")

// Error is a fault in a YAML document: where it is and what is wrong.
type Error struct {
	Line   int    // 1-based line of the fault; 0 when unknown
	Column int    // 1-based column; 0 when unknown
	Field  string // the key path at fault, e.g. "descriptors[0].rate_limit.unit"; empty for a syntax error
	Msg    string // what is wrong, e.g. "is not a known key"
}

// Error implements error: "line L: FIELD: MSG" (parts left out when unknown).
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Kind is the kind of a Node.
type Kind uint8

// The kinds of node. Aliases are resolved; documents are unwrapped; a
// merge key (<<) stays in its mapping, tagged "!!merge", and Fields
// refuses it.
const (
	Null Kind = iota
	Scalar
	Sequence
	Mapping
)

// Node is one YAML value: a scalar, a sequence or a mapping, and where it is.
type Node struct {
	Kind   Kind
	Line   int
	Column int
	Value  string  // a scalar's text
	Tag    string  // a scalar's resolved tag, e.g. "!!str", "!!int", "!!bool"
	Items  []*Node // a sequence's items
	Pairs  []Pair  // a mapping's pairs, in document order

	y *yaml.Node // the library's node, for decoding a scalar as it does
}

// Pair is one key and value of a mapping.
type Pair struct {
	Key   *Node
	Value *Node
}

// maxAliasDepth bounds alias chains, so that a document of nested aliases
// cannot make the tree exponentially large.
const maxAliasDepth = 16

// maxNodes bounds the nodes of one document.
const maxNodes = 1 << 20

// Parse decodes the first YAML document of data. An empty document (no
// content, or only comments) is a Null node. A syntax error is an *Error
// with the line the YAML library reports.
func Parse(data []byte) (*Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(data, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &Node{Kind: Null, Line: 1, Column: 1}, nil
	}
	count := 0
	return convert(doc.Content[0], 0, &count)
}

// ParseOne is Parse for a file that must hold one YAML document: a second
// document is an *Error at its first line, and a syntax error in it is
// reported too.
func ParseOne(data []byte) (*Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Node{Kind: Null, Line: 1, Column: 1}, nil
		}
		return nil, syntaxError(data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(data, err)
	default:
		line := next.Line
		if len(next.Content) > 0 {
			line = next.Content[0].Line
		}
		return nil, &Error{Line: line, Msg: "must hold one YAML document, not several"}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &Node{Kind: Null, Line: 1, Column: 1}, nil
	}
	count := 0
	return convert(doc.Content[0], 0, &count)
}

// DecodeStrict decodes the first document of data into v as the YAML
// library does with KnownFields: a key that v's type lacks is an error,
// and so is a repeated key. An error is an *Error with the line of the
// first fault; an empty document is none. It is a second check, by the
// library itself, for a format whose tree is walked first.
func DecodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return syntaxError(data, errors.New(te.Errors[0]))
	}
	return syntaxError(data, err)
}

// Any is a field type that DecodeStrict accepts whatever the document
// holds there, for values another pass checks.
type Any struct{}

// UnmarshalYAML accepts any value.
func (*Any) UnmarshalYAML(*yaml.Node) error { return nil }

// Marshal encodes v (structs with yaml tags, maps, slices, scalars) as a
// YAML document indented by two spaces.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// syntaxError turns the YAML library's error about data into an *Error,
// lifting the line out of its "yaml: line N: msg" text.
func syntaxError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	e := &Error{Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(n); err == nil {
				e.Line, e.Msg = line, tail
			}
		}
	}
	if e.Msg == msgTabIndent && e.Line > 0 {
		e.Line, e.Column = tabIndent(data, e.Line)
	}
	return e
}

// msgTabIndent is the YAML library's message for a tab in the indentation
// of a plain scalar's continuation line. The library reports the line the
// scalar starts on, not the line of the tab.
const msgTabIndent = "found a tab character that violates indentation"

// tabIndent returns the line and column (1-based) of the first tab in the
// indentation of a line of data from line on, where a msgTabIndent error
// reported at line is; line and 0 if there is none.
func tabIndent(data []byte, line int) (int, int) {
	n := 1
	for rest := data; len(rest) > 0; n++ {
		l, tail, _ := bytes.Cut(rest, []byte("\n"))
		rest = tail
		if n < line {
			continue
		}
		for i, c := range l {
			if c == '\t' {
				return n, i + 1
			}
			if c != ' ' {
				break
			}
		}
	}
	return line, 0
}

func convert(y *yaml.Node, depth int, count *int) (*Node, error) {
	*count++
	if *count > maxNodes {
		return nil, &Error{Line: y.Line, Column: y.Column, Msg: fmt.Sprintf("document has more than %d nodes", maxNodes)}
	}
	n := &Node{Line: y.Line, Column: y.Column, y: y}
	switch y.Kind {
	case yaml.AliasNode:
		if depth >= maxAliasDepth || y.Alias == nil {
			return nil, &Error{Line: y.Line, Column: y.Column, Msg: "aliases nest too deeply"}
		}
		a, err := convert(y.Alias, depth+1, count)
		if err != nil {
			return nil, err
		}
		a.Line, a.Column = y.Line, y.Column
		return a, nil
	case yaml.ScalarNode:
		n.Kind, n.Value, n.Tag = Scalar, y.Value, y.ShortTag()
		if n.Tag == "!!null" {
			n.Kind = Null
		}
	case yaml.SequenceNode:
		n.Kind = Sequence
		for _, c := range y.Content {
			item, err := convert(c, depth, count)
			if err != nil {
				return nil, err
			}
			n.Items = append(n.Items, item)
		}
	case yaml.MappingNode:
		n.Kind = Mapping
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, err := convert(y.Content[i], depth, count)
			if err != nil {
				return nil, err
			}
			v, err := convert(y.Content[i+1], depth, count)
			if err != nil {
				return nil, err
			}
			n.Pairs = append(n.Pairs, Pair{Key: k, Value: v})
		}
	default:
		return nil, &Error{Line: y.Line, Column: y.Column, Msg: "unexpected YAML node"}
	}
	return n, nil
}

// Fields checks that n is a mapping (a Null node is an empty one) whose
// keys are strings, each one of known and none repeated, and returns its
// values by key. path names n in errors ("" for the document's root).
func (n *Node) Fields(path string, known []string) (map[string]*Node, error) {
	if n.Kind == Null {
		return map[string]*Node{}, nil
	}
	if n.Kind != Mapping {
		return nil, n.errorf(path, "must be a mapping")
	}
	m := make(map[string]*Node, len(n.Pairs))
	for _, p := range n.Pairs {
		if p.Key.Tag == "!!merge" {
			return nil, p.Key.errorf(Join(path, p.Key.Value), "merge keys (<<) are not supported")
		}
		if p.Key.Kind != Scalar || p.Key.Tag != "!!str" {
			return nil, p.Key.errorf(path, fmt.Sprintf("key %s is not a string", strconv.Quote(p.Key.Value)))
		}
		k := p.Key.Value
		field := Join(path, k)
		if !contains(known, k) {
			return nil, p.Key.errorf(field, "is not a known key (known: "+strings.Join(known, ", ")+")")
		}
		if prev, dup := m[k]; dup {
			return nil, p.Key.errorf(field, fmt.Sprintf("is repeated (first at line %d)", prev.Line))
		}
		m[k] = p.Value
		if p.Value.Line == 0 {
			p.Value.Line, p.Value.Column = p.Key.Line, p.Key.Column
		}
	}
	return m, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// Join returns the key path of key inside path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index returns the key path of item i of the sequence at path.
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Errorf returns an *Error at n about field.
func (n *Node) Errorf(field, format string, args ...any) error {
	return n.errorf(field, fmt.Sprintf(format, args...))
}

func (n *Node) errorf(field, msg string) error {
	return &Error{Line: n.Line, Column: n.Column, Field: field, Msg: msg}
}

// List returns the items of the sequence n (none for a Null node).
func (n *Node) List(field string) ([]*Node, error) {
	switch n.Kind {
	case Null:
		return nil, nil
	case Sequence:
		return n.Items, nil
	}
	return nil, n.errorf(field, "must be a list")
}

// String returns the scalar n as a string; a Null node is "". Numbers and
// booleans are taken as written, as YAML configuration formats usually do
// for values ("value: 200" matches the descriptor value "200").
func (n *Node) String(field string) (string, error) {
	switch n.Kind {
	case Null:
		return "", nil
	case Scalar:
		return n.Value, nil
	}
	return "", n.errorf(field, "must be a string")
}

// Int64 returns the integer scalar n as YAML reads it (0x10, 0o17, -5),
// and whether it is an integer that fits.
func (n *Node) Int64() (int64, bool) {
	if n.Kind != Scalar || n.Tag != "!!int" || n.y == nil {
		return 0, false
	}
	var v int64
	if err := n.y.Decode(&v); err != nil {
		return 0, false
	}
	return v, true
}

// Boolean returns the boolean scalar n as YAML reads it, and whether it is
// one.
func (n *Node) Boolean() (bool, bool) {
	if n.Kind != Scalar || n.Tag != "!!bool" || n.y == nil {
		return false, false
	}
	var b bool
	if err := n.y.Decode(&b); err != nil {
		return false, false
	}
	return b, true
}

// Bool returns the boolean scalar n; a Null node is false.
func (n *Node) Bool(field string) (bool, error) {
	switch {
	case n.Kind == Null:
		return false, nil
	case n.Kind == Scalar && n.Tag == "!!bool":
		var b bool
		if err := yaml.Unmarshal([]byte(n.Value), &b); err == nil {
			return b, nil
		}
	}
	return false, n.errorf(field, "must be true or false")
}

// Uint returns the integer scalar n, which must be in [0, max]; a Null
// node is 0.
func (n *Node) Uint(field string, max uint64) (uint64, error) {
	if n.Kind == Null {
		return 0, nil
	}
	if n.Kind == Scalar && n.Tag == "!!int" {
		var v uint64
		if err := yaml.Unmarshal([]byte(n.Value), &v); err == nil && v <= max {
			return v, nil
		}
	}
	if max == math.MaxUint64 {
		return 0, n.errorf(field, "must be a whole number, at least 0")
	}
	return 0, n.errorf(field, fmt.Sprintf("must be a whole number from 0 to %d", max))
}
