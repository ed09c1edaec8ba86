package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
	"go.yaml.in/yaml/v3"
)

// The keys of the file format, in the order Marshal writes them.
var (
	fileKeys  = []string{"rules"}
	ruleKeys  = []string{"name", "algorithm", "scale", "limit", "burst", "shadow", "key", "match"}
	matchKeys = []string{"prefix", "method", "host"}
)

// Parse decodes a rules file (see the package documentation for the format)
// and returns its rules, validated as NewSet validates them, in canonical form
// and in file order. An empty file, or one whose rules are null or [], is an
// empty rule set.
//
// Any error is an *Error (matching ErrInvalid) about the first fault found,
// in file order: a YAML syntax error, an unknown or repeated key, a value of
// the wrong type, a rule that breaks Rule.Validate, a duplicate name or an
// ambiguous match. It names the rule (Index, Name), the field and the line.
func Parse(data []byte) ([]Rule, error) {
	doc, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	rules, err := walkFile(doc)
	if err != nil {
		return nil, err
	}
	if err := decodeStrict(data); err != nil {
		// walkFile accepts nothing the strict decoder rejects; this is a
		// second line of defence, which can only report a line.
		return nil, err
	}
	return rules, nil
}

// LoadFile reads the rules file at path and parses it with Parse, except
// that a file holding no rule is refused unless it says so with
// "rules: []": an empty, blank or comment-only file, or "rules:" with no
// value, is an *Error about the field "rules". (Such a file is more likely
// one caught between truncate and write than a wish to drop every rule;
// Watcher applies the same rule to every reload.) An error names the path; a
// parse error wraps an *Error.
func LoadFile(path string) ([]Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	rules, err := parseFile(data)
	if err != nil {
		return nil, fmt.Errorf("rules: %s: %w", path, err)
	}
	return rules, nil
}

// parseFile is Parse for a whole rules file (LoadFile and Watcher): a file
// with no rule must say so with an explicit empty list, "rules: []".
func parseFile(data []byte) ([]Rule, error) {
	rules, err := Parse(data)
	if err != nil || len(rules) > 0 {
		return rules, err
	}
	doc, err := decodeDocument(data)
	if err != nil { // Parse decoded the same bytes
		return nil, err
	}
	line := 0
	if doc != nil && len(doc.Content) > 0 {
		if top := resolve(doc.Content[0]); top.Kind == yaml.MappingNode {
			for k := 0; k+1 < len(top.Content); k += 2 {
				if key := resolve(top.Content[k]); key.Value == "rules" {
					if v := resolve(top.Content[k+1]); v.Kind == yaml.SequenceNode {
						return rules, nil // "rules: []"
					}
					line = key.Line
				}
			}
		}
	}
	return nil, &Error{Index: -1, Field: "rules", Message: `the file holds no rule; a file meant to remove every rule says "rules: []"`, Line: line}
}

// Marshal encodes rules, in the given order, as a rules file that Parse
// decodes to the same rules (in canonical form). Rules are validated as NewSet
// validates them; an error is an *Error and nothing is encoded. Optional
// fields at their zero value (burst, shadow, match and its method and host)
// are left out; scale is written as a Go duration such as "30s" or "1h30m".
func Marshal(rules []Rule) ([]byte, error) {
	norm, err := canonical(rules, true)
	if err != nil {
		return nil, err
	}
	out := yamlFile{Rules: make([]encodedRule, len(norm))}
	for i, r := range norm {
		out.Rules[i] = encode(r)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("rules: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("rules: marshal: %w", err)
	}
	return buf.Bytes(), nil
}

// yamlFile is the file as Marshal writes it.
type yamlFile struct {
	Rules []encodedRule `yaml:"rules"`
}

// The file as decodeStrict reads it: every key of the format, and no other
// (KnownFields), with the values left as nodes for walkFile to judge.
type (
	strictFile struct {
		Rules []strictRule `yaml:"rules"`
	}
	strictRule struct {
		Name      yaml.Node    `yaml:"name"`
		Algorithm yaml.Node    `yaml:"algorithm"`
		Scale     yaml.Node    `yaml:"scale"`
		Limit     yaml.Node    `yaml:"limit"`
		Burst     yaml.Node    `yaml:"burst"`
		Shadow    yaml.Node    `yaml:"shadow"`
		Key       yaml.Node    `yaml:"key"`
		Match     *strictMatch `yaml:"match"`
	}
	strictMatch struct {
		Prefix yaml.Node `yaml:"prefix"`
		Method yaml.Node `yaml:"method"`
		Host   yaml.Node `yaml:"host"`
	}
)

// decodeStrict decodes data into the file's structure with KnownFields, so
// that the YAML library itself rejects unknown and repeated keys.
func decodeStrict(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f strictFile
	err := dec.Decode(&f)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return lineError(te.Errors[0])
	}
	return lineError(err.Error())
}

// decodeDocument parses data into a node tree; it returns nil for an empty
// input and an error for a syntax error or a second document.
func decodeDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, lineError(err.Error())
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &doc, nil
	case err != nil:
		return nil, lineError(err.Error())
	}
	line := next.Line
	if len(next.Content) > 0 {
		line = next.Content[0].Line
	}
	return nil, &Error{Index: -1, Message: "must hold one YAML document, not several", Line: line}
}

// lineError turns a message of the YAML library, "yaml: line N: PROBLEM" or
// "line N: PROBLEM", into an *Error with Line N.
func lineError(msg string) *Error {
	msg = strings.TrimPrefix(msg, "yaml: ")
	e := &Error{Index: -1, Message: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, problem, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil && n > 0 {
				e.Line, e.Message = n, problem
			}
		}
	}
	return e
}

// walkFile turns the document into rules, checking everything Parse promises.
func walkFile(doc *yaml.Node) ([]Rule, error) {
	rules := []Rule{}
	if doc == nil || len(doc.Content) == 0 {
		return rules, nil
	}
	top := resolve(doc.Content[0])
	if isNull(top) {
		return rules, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, &Error{Index: -1, Message: `must be a mapping with the key "rules"`, Line: top.Line}
	}
	fields, e := keysOf(top, fileKeys, "", func(field, msg string, line int) *Error {
		return &Error{Index: -1, Field: field, Message: msg, Line: line}
	})
	if e != nil {
		return nil, e
	}
	list := fields["rules"]
	if list == nil || isNull(list) {
		return rules, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, &Error{Index: -1, Field: "rules", Message: "must be a list of rules", Line: list.Line}
	}
	c := newChecker(true, len(list.Content))
	for i, item := range list.Content {
		r, f, e := walkRule(i, resolve(item))
		if e != nil {
			return nil, e
		}
		if e := c.add(i, r); e != nil {
			e.Line = f.line(e.Field)
			return nil, e
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// walkRule turns the node of rule i into a valid Rule in canonical form
// (buildRule), and returns its fields, which know the line of each.
func walkRule(i int, n *yaml.Node) (Rule, fields, *Error) {
	if n.Kind != yaml.MappingNode {
		return Rule{}, nil, &Error{Index: i, Message: "must be a mapping with name, scale and limit", Line: n.Line}
	}
	var name string // read first, so that every error can carry it
	for k := 0; k+1 < len(n.Content); k += 2 {
		if key := resolve(n.Content[k]); key.Kind == yaml.ScalarNode && key.Value == "name" {
			if v := resolve(n.Content[k+1]); v.Kind == yaml.ScalarNode && !isNull(v) {
				name = v.Value
			}
			break
		}
	}
	values, e := keysOf(n, ruleKeys, "", func(field, msg string, line int) *Error {
		return &Error{Index: i, Name: name, Field: field, Message: msg, Line: line}
	})
	if e != nil {
		return Rule{}, nil, e
	}
	f := &yamlFields{values: values, lines: map[string]int{"": n.Line}}
	for k, v := range values {
		f.lines[k] = v.Line
	}
	r, e := buildRule(f, i, "a mapping")
	return r, f, e
}

// yamlFields is a mapping of a rules file, a rule or its match, for
// buildRule.
type yamlFields struct {
	values map[string]*yaml.Node // by key, aliases resolved
	// lines holds the line of every field of the rule, by its name
	// ("match.prefix" for a key of the match), and of the rule itself ("").
	lines map[string]int
}

func (y *yamlFields) has(key string) bool { v := y.values[key]; return v != nil && !isNull(v) }

func (y *yamlFields) scalar(key string) (string, bool) {
	if v := y.values[key]; v != nil && v.Kind == yaml.ScalarNode && !isNull(v) {
		return v.Value, true
	}
	return "", false
}

func (y *yamlFields) text(key string) (string, bool) {
	if v := y.values[key]; v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
		return v.Value, true
	}
	return "", false
}

func (y *yamlFields) integer(key string) (int64, bool) { return intNode(y.values[key]) }

func (y *yamlFields) boolean(key string) (bool, bool) {
	var b bool
	v := y.values[key]
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&b) != nil {
		return false, false
	}
	return b, true
}

func (y *yamlFields) scale(key string) (time.Duration, string) { return scaleNode(y.values[key]) }

func (y *yamlFields) sub(key string, known []string, fail failFunc) (fields, bool, *Error) {
	v := y.values[key]
	if v.Kind != yaml.MappingNode {
		return nil, false, nil
	}
	values, e := keysOf(v, known, key+".", fail)
	if e != nil {
		return nil, true, e
	}
	for k, mv := range values {
		if !isNull(mv) {
			y.lines[key+"."+k] = mv.Line
		}
	}
	return &yamlFields{values: values, lines: y.lines}, true, nil
}

func (y *yamlFields) line(field string) int { return y.lines[field] }

// keysOf returns the values of the mapping n by key, after checking that
// every key is one of known, given once. Errors name the key with prefix.
func keysOf(n *yaml.Node, known []string, prefix string, fail func(field, msg string, line int) *Error) (map[string]*yaml.Node, *Error) {
	values := make(map[string]*yaml.Node, len(n.Content)/2)
	keyLine := make(map[string]int, len(n.Content)/2)
	for k := 0; k+1 < len(n.Content); k += 2 {
		key := resolve(n.Content[k])
		if key.Kind != yaml.ScalarNode {
			return nil, fail(strings.TrimSuffix(prefix, "."), "has a key that is not a string", key.Line)
		}
		name := key.Value
		switch {
		case key.ShortTag() == "!!merge":
			return nil, fail(prefix+name, "merge keys are not supported", key.Line)
		case !slices.Contains(known, name):
			return nil, fail(prefix+name, msgUnknown, key.Line)
		}
		if first, dup := keyLine[name]; dup {
			return nil, fail(prefix+name, fmt.Sprintf("is set twice (first on line %d)", first), key.Line)
		}
		keyLine[name] = key.Line
		values[name] = resolve(n.Content[k+1])
	}
	return values, nil
}

// scaleNode reads a scale: an integer number of milliseconds, or a string
// that parseScaleString accepts.
func scaleNode(v *yaml.Node) (time.Duration, string) {
	if v.Kind != yaml.ScalarNode {
		return 0, msgScaleForm
	}
	switch v.ShortTag() {
	case "!!int":
		var ms int64
		if err := v.Decode(&ms); err != nil {
			return 0, table.MsgScaleRange
		}
		return scaleFromMillis(ms)
	case "!!str":
		return parseScaleString(v.Value)
	}
	return 0, msgScaleForm
}

// intNode reads an integer.
func intNode(v *yaml.Node) (int64, bool) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		return 0, false
	}
	var i int64
	if err := v.Decode(&i); err != nil {
		return 0, false
	}
	return i, true
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; i < 8 && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is a null scalar ("", "~", "null").
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}
