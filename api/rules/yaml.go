package rules

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/yamlconf"
	"github.com/ratelimitd/ratelimitd/table"
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
	if doc.Kind == yamlconf.Mapping {
		for _, p := range doc.Pairs {
			if p.Key.Value == "rules" {
				if p.Value.Kind == yamlconf.Sequence {
					return rules, nil // "rules: []"
				}
				line = p.Key.Line
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
	data, err := yamlconf.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("rules: marshal: %w", err)
	}
	return data, nil
}

// yamlFile is the file as Marshal writes it.
type yamlFile struct {
	Rules []encodedRule `yaml:"rules"`
}

// The file as decodeStrict reads it: every key of the format, and no other
// (KnownFields), with the values left for walkFile to judge.
type (
	strictFile struct {
		Rules []strictRule `yaml:"rules"`
	}
	strictRule struct {
		Name      yamlconf.Any `yaml:"name"`
		Algorithm yamlconf.Any `yaml:"algorithm"`
		Scale     yamlconf.Any `yaml:"scale"`
		Limit     yamlconf.Any `yaml:"limit"`
		Burst     yamlconf.Any `yaml:"burst"`
		Shadow    yamlconf.Any `yaml:"shadow"`
		Key       yamlconf.Any `yaml:"key"`
		Match     *strictMatch `yaml:"match"`
	}
	strictMatch struct {
		Prefix yamlconf.Any `yaml:"prefix"`
		Method yamlconf.Any `yaml:"method"`
		Host   yamlconf.Any `yaml:"host"`
	}
)

// decodeStrict decodes data into the file's structure with KnownFields, so
// that the YAML library itself rejects unknown and repeated keys.
func decodeStrict(data []byte) error {
	var f strictFile
	if err := yamlconf.DecodeStrict(data, &f); err != nil {
		return yamlError(err)
	}
	return nil
}

// decodeDocument parses data, which must hold at most one YAML document,
// into a node tree: a Null node for an empty input.
func decodeDocument(data []byte) (*yamlconf.Node, error) {
	doc, err := yamlconf.ParseOne(data)
	if err != nil {
		return nil, yamlError(err)
	}
	return doc, nil
}

// yamlError turns an error of yamlconf (a syntax error, a second
// document, aliases past its bounds) into an *Error of the file.
func yamlError(err error) *Error {
	var ye *yamlconf.Error
	if errors.As(err, &ye) {
		return &Error{Index: -1, Message: ye.Msg, Line: ye.Line}
	}
	return &Error{Index: -1, Message: err.Error()}
}

// walkFile turns the document into rules, checking everything Parse promises.
func walkFile(top *yamlconf.Node) ([]Rule, error) {
	rules := []Rule{}
	if isNull(top) {
		return rules, nil
	}
	if top.Kind != yamlconf.Mapping {
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
	if list.Kind != yamlconf.Sequence {
		return nil, &Error{Index: -1, Field: "rules", Message: "must be a list of rules", Line: list.Line}
	}
	c := newChecker(true, len(list.Items))
	for i, item := range list.Items {
		r, f, e := walkRule(i, item)
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
func walkRule(i int, n *yamlconf.Node) (Rule, fields, *Error) {
	if n.Kind != yamlconf.Mapping {
		return Rule{}, nil, &Error{Index: i, Message: "must be a mapping with name, scale and limit", Line: n.Line}
	}
	var name string // read first, so that every error can carry it
	for _, p := range n.Pairs {
		if p.Key.Kind == yamlconf.Scalar && p.Key.Value == "name" {
			if p.Value.Kind == yamlconf.Scalar {
				name = p.Value.Value
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
	values map[string]*yamlconf.Node // by key, aliases resolved
	// lines holds the line of every field of the rule, by its name
	// ("match.prefix" for a key of the match), and of the rule itself ("").
	lines map[string]int
}

func (y *yamlFields) has(key string) bool { v := y.values[key]; return v != nil && !isNull(v) }

func (y *yamlFields) scalar(key string) (string, bool) {
	if v := y.values[key]; v != nil && v.Kind == yamlconf.Scalar {
		return v.Value, true
	}
	return "", false
}

func (y *yamlFields) text(key string) (string, bool) {
	if v := y.values[key]; v != nil && v.Kind == yamlconf.Scalar && v.Tag == "!!str" {
		return v.Value, true
	}
	return "", false
}

func (y *yamlFields) integer(key string) (int64, bool) { return intNode(y.values[key]) }

func (y *yamlFields) boolean(key string) (bool, bool) { return y.values[key].Boolean() }

func (y *yamlFields) scale(key string) (time.Duration, string) { return scaleNode(y.values[key]) }

func (y *yamlFields) sub(key string, known []string, fail failFunc) (fields, bool, *Error) {
	v := y.values[key]
	if v.Kind != yamlconf.Mapping {
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
func keysOf(n *yamlconf.Node, known []string, prefix string, fail func(field, msg string, line int) *Error) (map[string]*yamlconf.Node, *Error) {
	values := make(map[string]*yamlconf.Node, len(n.Pairs))
	keyLine := make(map[string]int, len(n.Pairs))
	for _, p := range n.Pairs {
		key := p.Key
		if key.Kind != yamlconf.Scalar && key.Kind != yamlconf.Null {
			return nil, fail(strings.TrimSuffix(prefix, "."), "has a key that is not a string", key.Line)
		}
		name := key.Value
		switch {
		case key.Tag == "!!merge":
			return nil, fail(prefix+name, "merge keys are not supported", key.Line)
		case !slices.Contains(known, name):
			return nil, fail(prefix+name, msgUnknown, key.Line)
		}
		if first, dup := keyLine[name]; dup {
			return nil, fail(prefix+name, fmt.Sprintf("is set twice (first on line %d)", first), key.Line)
		}
		keyLine[name] = key.Line
		values[name] = p.Value
	}
	return values, nil
}

// scaleNode reads a scale: an integer number of milliseconds, or a string
// that parseScaleString accepts.
func scaleNode(v *yamlconf.Node) (time.Duration, string) {
	if v.Kind != yamlconf.Scalar {
		return 0, msgScaleForm
	}
	switch v.Tag {
	case "!!int":
		ms, ok := v.Int64()
		if !ok {
			return 0, table.MsgScaleRange
		}
		return scaleFromMillis(ms)
	case "!!str":
		return parseScaleString(v.Value)
	}
	return 0, msgScaleForm
}

// intNode reads an integer.
func intNode(v *yamlconf.Node) (int64, bool) { return v.Int64() }

// isNull reports whether n is null ("", "~", "null").
func isNull(n *yamlconf.Node) bool { return n.Kind == yamlconf.Null }
