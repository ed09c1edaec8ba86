package client

import (
	"encoding/json"
	"errors"
	"math"
	"time"
	"unicode/utf8"
)

// This file decodes the service's answers: a decision object
//
//	{"allowed":B,"id":S[,"rule":S],"count":N,"limit":N,"remaining":N,"reset_ms":N,"retry_after_ms":N[,"shadow_denied":B]}
//
// a batch {"allowed":B,"checks":[DECISION...]}, and an error
// {"error":S,"field":S}. The decision decoders are a small JSON scanner
// that allocates nothing (but the rule name, when it is not the one asked
// for): they accept exactly RFC 8259 JSON, skip members they do not know
// (so the service may add some), and require "allowed" and integers for
// the numeric members.

// errBadAnswer is the cause of an answer that is not the JSON expected.
var errBadAnswer = errors.New("malformed answer")

// maxDepth bounds the nesting of a skipped value.
const maxDepth = 32

// scanner reads JSON from b at i.
type scanner struct {
	b []byte
	i int
}

// ws skips white space.
func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume skips white space, then c if it is next, reporting whether it was.
func (s *scanner) consume(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// str reads a string at i (after white space) and returns it quoted, as
// raw JSON, and its contents; escaped reports a backslash in it, in which
// case the contents are still escaped.
func (s *scanner) str() (quoted, contents []byte, escaped, ok bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, nil, false, false
	}
	start := s.i
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start:s.i], s.b[start+1 : s.i-1], escaped, true
		case c < 0x20:
			return nil, nil, false, false
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return nil, nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex(s.b[s.i+2]) || !isHex(s.b[s.i+3]) || !isHex(s.b[s.i+4]) || !isHex(s.b[s.i+5]) {
					return nil, nil, false, false
				}
				s.i += 6
			default:
				return nil, nil, false, false
			}
		default:
			s.i++
		}
	}
	return nil, nil, false, false
}

// stringValue reads a string and returns its value; hint is returned,
// without allocating, when the value equals it. A value with escapes, or
// with bytes that are not UTF-8, is decoded by encoding/json, which turns
// each such byte into U+FFFD: the value is the one encoding/json gives.
func (s *scanner) stringValue(hint string) (string, bool) {
	quoted, contents, escaped, ok := s.str()
	switch {
	case !ok:
		return "", false
	case escaped || !utf8.Valid(contents):
	case string(contents) == hint:
		return hint, true
	default:
		return string(contents), true
	}
	var v string
	if json.Unmarshal(quoted, &v) != nil {
		return "", false
	}
	return v, true
}

// key reads an object member's name and the ':' after it. A name with
// escapes is unescaped (allocating: the service sends none).
func (s *scanner) key() ([]byte, bool) {
	quoted, contents, escaped, ok := s.str()
	if !ok || !s.consume(':') {
		return nil, false
	}
	if escaped {
		var v string
		if json.Unmarshal(quoted, &v) != nil {
			return nil, false
		}
		return []byte(v), true
	}
	return contents, true
}

// digits skips ASCII digits and reports how many there were.
func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// number skips a JSON number at i (after white space) and reports whether
// it was an integer (no fraction, no exponent).
func (s *scanner) number() (integer, ok bool) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i >= len(s.b):
		return false, false
	case s.b[s.i] == '0':
		s.i++
	case '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return false, false
	}
	integer = true
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false, false
		}
		integer = false
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false, false
		}
		integer = false
	}
	return integer, true
}

// int reads a JSON number that is an integer within int64.
func (s *scanner) int() (int64, bool) {
	s.ws()
	start := s.i
	if integer, ok := s.number(); !ok || !integer {
		return 0, false
	}
	t := s.b[start:s.i]
	neg := t[0] == '-'
	if neg {
		t = t[1:]
	}
	var n uint64
	for _, c := range t {
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	switch {
	case !neg && n <= math.MaxInt64:
		return int64(n), true
	case neg && n <= math.MaxInt64+1:
		return int64(-n), true // -(MaxInt64+1) wraps to MinInt64
	}
	return 0, false
}

// literal reads the literal lit (true, false or null).
func (s *scanner) literal(lit string) bool {
	s.ws()
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// bool reads true or false.
func (s *scanner) bool() (bool, bool) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == 't' {
		return true, s.literal("true")
	}
	return false, s.literal("false")
}

// skip reads any JSON value, nested at most maxDepth deep.
func (s *scanner) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, _, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		_, ok := s.number()
		return ok
	case c == '[':
		s.i++
		if s.consume(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if s.consume(']') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	case c == '{':
		s.i++
		if s.consume('}') {
			return true
		}
		for {
			if _, ok := s.key(); !ok || !s.skip(depth+1) {
				return false
			}
			if s.consume('}') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	}
	return false
}

// msDuration converts milliseconds to a Duration, 0 for a negative count
// and saturating at the largest Duration.
func msDuration(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// decision reads a decision object; ruleHint is the rule asked for, whose
// string is reused when the answer names it.
func (s *scanner) decision(ruleHint string) (Decision, bool) {
	var d Decision
	if !s.consume('{') {
		return d, false
	}
	if s.consume('}') {
		return d, false // no "allowed"
	}
	seen := false
	for {
		k, ok := s.key()
		if !ok {
			return d, false
		}
		var n int64
		switch string(k) {
		case "allowed":
			d.Allowed, ok = s.bool()
			seen = true
		case "count":
			d.Count, ok = s.int()
		case "limit":
			d.Limit, ok = s.int()
		case "remaining":
			d.Remaining, ok = s.int()
		case "reset_ms":
			n, ok = s.int()
			d.Reset = msDuration(n)
		case "retry_after_ms":
			n, ok = s.int()
			d.RetryAfter = msDuration(n)
		case "rule":
			d.Rule, ok = s.stringValue(ruleHint)
		case "shadow_denied":
			d.ShadowDenied, ok = s.bool()
		default:
			ok = s.skip(1)
		}
		if !ok {
			return d, false
		}
		if s.consume('}') {
			return d, seen
		}
		if !s.consume(',') {
			return d, false
		}
	}
}

// decodeDecision decodes the body of an answer to a single check or
// refund.
func decodeDecision(b []byte, ruleHint string) (Decision, error) {
	s := scanner{b: b}
	d, ok := s.decision(ruleHint)
	if !ok || !s.end() {
		return Decision{}, errBadAnswer
	}
	return d, nil
}

// decodeBatch decodes the body of an answer to a batch of checks, which
// must hold one decision per check.
func decodeBatch(b []byte, checks []Check) ([]Decision, bool, error) {
	s := scanner{b: b}
	if !s.consume('{') || s.consume('}') {
		return nil, false, errBadAnswer
	}
	var ds []Decision
	allowed, seenAllowed, seenChecks := false, false, false
	for {
		k, ok := s.key()
		if !ok {
			return nil, false, errBadAnswer
		}
		switch string(k) {
		case "allowed":
			allowed, ok = s.bool()
			seenAllowed = true
		case "checks":
			ds, ok = s.decisions(checks)
			seenChecks = true
		default:
			ok = s.skip(1)
		}
		if !ok {
			return nil, false, errBadAnswer
		}
		if s.consume('}') {
			break
		}
		if !s.consume(',') {
			return nil, false, errBadAnswer
		}
	}
	if !s.end() || !seenAllowed || !seenChecks || len(ds) != len(checks) {
		return nil, false, errBadAnswer
	}
	return ds, allowed, nil
}

// decisions reads the array of decisions of a batch of checks.
func (s *scanner) decisions(checks []Check) ([]Decision, bool) {
	if !s.consume('[') {
		return nil, false
	}
	ds := make([]Decision, 0, len(checks))
	if s.consume(']') {
		return ds, true
	}
	for {
		hint := ""
		if i := len(ds); i < len(checks) {
			hint = checks[i].Limit.Rule
		}
		d, ok := s.decision(hint)
		if !ok {
			return nil, false
		}
		ds = append(ds, d)
		if s.consume(']') {
			return ds, true
		}
		if !s.consume(',') {
			return nil, false
		}
	}
}

// decodeErrorBody decodes an error body {"error":S,"field":S}.
func decodeErrorBody(b []byte) (msg, field string, ok bool) {
	var e struct {
		Error *string `json:"error"`
		Field string  `json:"field"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil {
		return "", "", false
	}
	return *e.Error, e.Field, true
}
