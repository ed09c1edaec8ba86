package api

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// MaxBodyBytes is the largest POST /check_rate body accepted; a larger one is
// answered 400 (not 413, which means "denied").
const MaxBodyBytes = 64 << 10

// Rules broken by bad input, as sent in the "error" member of a 400 body
// (after the field name).
const (
	ruleRequired  = "is required"
	ruleIDLen     = "must be at most 1024 bytes"
	ruleScale     = "must be a whole number of milliseconds, or a duration such as 30s"
	ruleScaleMs   = "must be a whole number of milliseconds"
	ruleLimit     = "must be an integer between 1 and 9223372036854775807"
	ruleHits      = "must be an integer between 0 and 9223372036854775807"
	ruleString    = "must be a JSON string"
	ruleUnknown   = "is not a known parameter"
	ruleRepeated  = "must not be repeated"
	ruleEscape    = "has an invalid percent-encoding"
	ruleNoName    = "has a parameter without a name"
	ruleObject    = "must be a JSON object"
	ruleTrailing  = "must hold one JSON object and nothing after it"
	ruleBodyLarge = "must be at most 65536 bytes"
	ruleQueryPost = "must be empty on POST; send the parameters in the JSON body"
)

// ruleScaleRange is the range rule of scale, the same as table.Request.Validate's.
var ruleScaleRange = "must be between " + table.MinScale.String() + " and " + table.MaxScale.String()

func fieldErr(field, rule string) *table.FieldError {
	return &table.FieldError{Field: field, Rule: rule}
}

// param bits, to reject repeated parameters.
const (
	seenID = 1 << iota
	seenScale
	seenLimit
	seenHits
	seenAlgorithm
)

// fieldBit returns the bit of a request field's name, or 0 for an unknown name.
func fieldBit(name string) uint {
	switch name {
	case "id":
		return seenID
	case "scale":
		return seenScale
	case "limit":
		return seenLimit
	case "hits":
		return seenHits
	case "algorithm":
		return seenAlgorithm
	}
	return 0
}

// parseQuery parses the raw query of GET /check_rate into a valid Request.
// Any error is a *table.FieldError. It reads raw in place and unescapes a
// key or value only when it holds '%' or '+'.
func parseQuery(raw string) (table.Request, error) {
	req := table.Request{Hits: 1}
	var seen uint
	escaped := needsUnescape(raw) // most queries need no unescaping at all
	for rest := raw; rest != ""; {
		var part string
		if i := strings.IndexByte(rest, '&'); i >= 0 {
			part, rest = rest[:i], rest[i+1:]
		} else {
			part, rest = rest, ""
		}
		if part == "" {
			continue // "a=1&&b=2", as url.ParseQuery
		}
		key, val, _ := strings.Cut(part, "=")
		if escaped && needsUnescape(key) {
			k, err := url.QueryUnescape(key)
			if err != nil {
				return table.Request{}, fieldErr("query", ruleEscape)
			}
			key = k
		}
		bit := fieldBit(key)
		switch {
		case key == "":
			return table.Request{}, fieldErr("query", ruleNoName)
		case bit == 0:
			return table.Request{}, fieldErr(echoName(key), ruleUnknown)
		}
		if seen&bit != 0 {
			return table.Request{}, fieldErr(key, ruleRepeated)
		}
		seen |= bit
		if bit == seenID && len(val) > 3*table.MaxIDLen {
			return table.Request{}, fieldErr("id", ruleIDLen) // too long even if all escaped
		}
		if escaped && needsUnescape(val) {
			v, err := url.QueryUnescape(val)
			if err != nil {
				return table.Request{}, fieldErr(key, ruleEscape)
			}
			val = v
		}
		var err error
		switch bit {
		case seenID:
			req.ID, err = parseID(val)
		case seenScale:
			req.Scale, err = parseScale(val)
		case seenLimit:
			req.Limit, err = parseLimit(val)
		case seenHits:
			req.Hits, err = parseHits(val)
		case seenAlgorithm:
			req.Algorithm, err = table.ParseAlgorithm(val)
		}
		if err != nil {
			return table.Request{}, err
		}
	}
	if err := requireAll(seen); err != nil {
		return table.Request{}, err
	}
	if err := req.Validate(); err != nil {
		return table.Request{}, err
	}
	return req, nil
}

// maxEchoName is the most bytes of an unknown parameter name echoed back
// in a 400, so that an error body stays small whatever the request.
const maxEchoName = 128

// echoName returns name cut to maxEchoName bytes.
func echoName(name string) string {
	if len(name) > maxEchoName {
		return name[:maxEchoName]
	}
	return name
}

// needsUnescape reports whether s holds '%' or '+', which QueryUnescape
// would change.
func needsUnescape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c == '+' {
			return true
		}
	}
	return false
}

// requireAll reports the first required parameter missing from seen.
func requireAll(seen uint) error {
	switch {
	case seen&seenID == 0:
		return fieldErr("id", ruleRequired)
	case seen&seenScale == 0:
		return fieldErr("scale", ruleRequired)
	case seen&seenLimit == 0:
		return fieldErr("limit", ruleRequired)
	}
	return nil
}

func parseID(s string) (string, error) {
	switch {
	case s == "":
		return "", fieldErr("id", ruleRequired)
	case len(s) > table.MaxIDLen:
		return "", fieldErr("id", ruleIDLen)
	}
	return s, nil
}

// parseScale parses an integer number of milliseconds or a Go duration.
func parseScale(s string) (time.Duration, error) {
	var d time.Duration
	if isDigits(s) {
		ms, ok := parseDigits(s)
		if !ok || ms > int64(table.MaxScale/time.Millisecond) {
			return 0, fieldErr("scale", ruleScaleRange)
		}
		d = time.Duration(ms) * time.Millisecond
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fieldErr("scale", ruleScale)
		}
	}
	switch {
	case d < table.MinScale || d > table.MaxScale:
		return 0, fieldErr("scale", ruleScaleRange)
	case d%time.Millisecond != 0:
		return 0, fieldErr("scale", ruleScaleMs)
	}
	return d, nil
}

func parseLimit(s string) (int64, error) {
	n, ok := parseDigits(s)
	if !ok || n == 0 {
		return 0, fieldErr("limit", ruleLimit)
	}
	return n, nil
}

func parseHits(s string) (int64, error) {
	n, ok := parseDigits(s)
	if !ok {
		return 0, fieldErr("hits", ruleHits)
	}
	return n, nil
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseDigits parses one or more ASCII digits (no sign, no space) as a
// non-negative int64; ok is false on any other input or on overflow.
func parseDigits(s string) (n int64, ok bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxInt64-int64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// readJSON reads the body of POST /check_rate, at most MaxBodyBytes, and
// parses it with parseJSON.
func readJSON(w http.ResponseWriter, r *http.Request) (table.Request, error) {
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	defer body.Close()
	return parseJSON(body)
}

// parseJSON parses a JSON object with the members of GET /check_rate's query
// into a valid Request. Any error is a *table.FieldError. Member names are
// matched exactly (case-sensitively), each at most once.
func parseJSON(r io.Reader) (table.Request, error) {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return table.Request{}, bodyErr(err, ruleObject)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return table.Request{}, fieldErr("body", ruleObject)
	}
	req := table.Request{Hits: 1}
	var seen uint
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return table.Request{}, bodyErr(err, ruleObject)
		}
		key, ok := tok.(string)
		if !ok { // cannot happen: Token reports a non-string key as a syntax error
			return table.Request{}, fieldErr("body", ruleObject)
		}
		bit := fieldBit(key)
		if bit == 0 {
			return table.Request{}, fieldErr(echoName(key), ruleUnknown)
		}
		if seen&bit != 0 {
			return table.Request{}, fieldErr(key, ruleRepeated)
		}
		seen |= bit
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return table.Request{}, bodyErr(err, ruleObject)
		}
		switch bit {
		case seenID:
			var s string
			if s, err = jsonString(raw, "id"); err == nil {
				req.ID, err = parseID(s)
			}
		case seenScale:
			if len(raw) > 0 && raw[0] == '"' {
				var s string
				if s, err = jsonString(raw, "scale"); err == nil {
					req.Scale, err = parseScale(s)
				}
			} else if isDigits(string(raw)) {
				req.Scale, err = parseScale(string(raw))
			} else {
				err = fieldErr("scale", ruleScale)
			}
		case seenLimit:
			req.Limit, err = parseLimit(string(raw))
		case seenHits:
			req.Hits, err = parseHits(string(raw))
		case seenAlgorithm:
			var s string
			if s, err = jsonString(raw, "algorithm"); err == nil {
				req.Algorithm, err = table.ParseAlgorithm(s)
			}
		}
		if err != nil {
			return table.Request{}, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return table.Request{}, bodyErr(err, ruleObject)
	}
	if _, err := dec.Token(); err != io.EOF {
		return table.Request{}, bodyErr(err, ruleTrailing)
	}
	if err := requireAll(seen); err != nil {
		return table.Request{}, err
	}
	if err := req.Validate(); err != nil {
		return table.Request{}, err
	}
	return req, nil
}

// jsonString decodes raw, which must be a JSON string, for field.
func jsonString(raw json.RawMessage, field string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fieldErr(field, ruleString)
	}
	return s, nil
}

// bodyErr turns an error reading or decoding the body into a field error on
// "body": too large, malformed, or (for a nil or io.EOF err) broken rule.
func bodyErr(err error, rule string) error {
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &tooLarge):
		return fieldErr("body", ruleBodyLarge)
	case err == nil || err == io.EOF:
		return fieldErr("body", rule)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fieldErr("body", "is malformed JSON: unexpected end of input")
	case errors.As(err, &syntax):
		return fieldErr("body", "is malformed JSON at byte "+strconv.FormatInt(syntax.Offset, 10)+": "+syntax.Error())
	}
	return fieldErr("body", "could not be read: "+err.Error())
}
