package rules

import (
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// fields is one rule, or its match, as a format decoded it: its values by
// key, each read the way that format reads one. The YAML file and the JSON
// of the admin API both feed buildRule through it, so that a rule's fields
// are checked once, in one order, whatever its format.
type fields interface {
	// has reports whether key is set and not null.
	has(key string) bool
	// scalar returns the value of key as text: a JSON string, any YAML
	// scalar.
	scalar(key string) (string, bool)
	// text returns the value of key if it is a string (a YAML !!str).
	text(key string) (string, bool)
	// integer returns the value of key if it is an integer.
	integer(key string) (int64, bool)
	// boolean returns the value of key if it is true or false.
	boolean(key string) (bool, bool)
	// scale returns the scale of key, a duration or milliseconds, or what
	// it breaks.
	scale(key string) (time.Duration, string)
	// sub returns the fields of the object or mapping of key; ok is false
	// when it is not one, and an error is fail's about a key not known.
	sub(key string, known []string, fail failFunc) (f fields, ok bool, e *Error)
	// line returns the line of field ("match.prefix" for a key of the
	// match), or 0 where the format has none.
	line(field string) int
}

// failFunc returns the error of a rule's field, found at line.
type failFunc func(field, msg string, line int) *Error

// buildRule turns f into a valid Rule in canonical form: name, algorithm,
// scale, limit, burst, shadow, key and match, each read and checked in
// that order, then the whole as Rule.Validate checks it. Its errors have
// index (the rule's position in its file, or -1), the rule's name as read,
// and f's lines. matchShape names the kind of value a match must be ("a
// JSON object", "a mapping").
func buildRule(f fields, index int, matchShape string) (Rule, *Error) {
	var r Rule
	r.Name, _ = f.scalar("name")
	fail := func(field, msg string, line int) *Error {
		return &Error{Index: index, Name: r.Name, Field: field, Message: msg, Line: line}
	}
	if !f.has("name") {
		return Rule{}, fail("name", table.MsgRequired, f.line(""))
	}
	if _, ok := f.scalar("name"); !ok {
		return Rule{}, fail("name", msgString, f.line("name"))
	}
	if msg := checkName(r.Name); msg != "" {
		return Rule{}, fail("name", msg, f.line("name"))
	}
	if f.has("algorithm") {
		s, ok := f.scalar("algorithm")
		if !ok {
			return Rule{}, fail("algorithm", msgString, f.line("algorithm"))
		}
		a, err := table.ParseAlgorithm(s)
		if err != nil {
			return Rule{}, fail("algorithm", algorithmMsg(err), f.line("algorithm"))
		}
		r.Algorithm = a
	}
	if !f.has("scale") {
		return Rule{}, fail("scale", table.MsgRequired, f.line(""))
	}
	var msg string
	if r.Scale, msg = f.scale("scale"); msg != "" {
		return Rule{}, fail("scale", msg, f.line("scale"))
	}
	if !f.has("limit") {
		return Rule{}, fail("limit", table.MsgRequired, f.line(""))
	}
	var ok bool
	if r.Limit, ok = f.integer("limit"); !ok {
		return Rule{}, fail("limit", msgInteger, f.line("limit"))
	}
	for _, opt := range [...]struct {
		key, msg string
		read     func() bool // reads the field into r, reporting whether it could
	}{
		{"burst", msgInteger, func() (ok bool) { r.Burst, ok = f.integer("burst"); return ok }},
		{"shadow", msgBool, func() (ok bool) { r.Shadow, ok = f.boolean("shadow"); return ok }},
		{"key", msgString, func() (ok bool) { r.Key, ok = f.text("key"); return ok }},
	} {
		if f.has(opt.key) && !opt.read() {
			return Rule{}, fail(opt.key, opt.msg, f.line(opt.key))
		}
	}
	if f.has("match") {
		m, ok, e := f.sub("match", matchKeys, fail)
		switch {
		case !ok:
			return Rule{}, fail("match", "must be "+matchShape+" with prefix and optionally method and host", f.line("match"))
		case e != nil:
			return Rule{}, e
		}
		for _, key := range matchKeys {
			if !m.has(key) {
				continue
			}
			s, ok := m.scalar(key)
			if !ok {
				return Rule{}, fail("match."+key, msgString, f.line("match."+key))
			}
			switch key {
			case "prefix":
				r.Match.Prefix = s
			case "method":
				r.Match.Method = s
			case "host":
				r.Match.Host = s
			}
		}
		if r.Match.Prefix == "" {
			line := f.line("match.prefix")
			if line == 0 {
				line = f.line("match")
			}
			return Rule{}, fail("match.prefix", table.MsgRequired, line)
		}
	}
	if e := r.check(); e != nil {
		e.Index, e.Line = index, f.line(e.Field)
		return Rule{}, e
	}
	return r.normalize(), nil
}

// encodedRule is a Rule as both formats write it (MarshalJSON, Marshal):
// scale as a duration string, algorithm by name; a JSON rule always has
// burst and shadow.
type encodedRule struct {
	Name      string        `json:"name" yaml:"name"`
	Algorithm string        `json:"algorithm" yaml:"algorithm"`
	Scale     string        `json:"scale" yaml:"scale"`
	Limit     int64         `json:"limit" yaml:"limit"`
	Burst     int64         `json:"burst" yaml:"burst,omitempty"`
	Shadow    bool          `json:"shadow" yaml:"shadow,omitempty"`
	Key       string        `json:"key,omitempty" yaml:"key,omitempty"`
	Match     *encodedMatch `json:"match,omitempty" yaml:"match,omitempty"`
}

// encodedMatch is a Match as both formats write it.
type encodedMatch struct {
	Prefix string `json:"prefix" yaml:"prefix"`
	Method string `json:"method,omitempty" yaml:"method,omitempty"`
	Host   string `json:"host,omitempty" yaml:"host,omitempty"`
}

// encode returns r as both formats write it.
func encode(r Rule) encodedRule {
	e := encodedRule{
		Name:      r.Name,
		Algorithm: r.Algorithm.String(),
		Scale:     formatScale(r.Scale),
		Limit:     r.Limit,
		Burst:     r.Burst,
		Shadow:    r.Shadow,
		Key:       r.Key,
	}
	if !r.Match.IsZero() {
		m := encodedMatch(r.Match)
		e.Match = &m
	}
	return e
}
