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
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// MaxBodyBytes is the largest POST /check_rate or /refund body accepted; a
// larger one is answered 400 (not 413, which means "denied"). It holds a
// batch of actors.MaxCheckAll checks of about 250 bytes each.
const MaxBodyBytes = 256 << 10

// Rules broken by bad input, as sent in the "error" member of a 400 body
// (after the field name).
const (
	ruleRequired     = "is required"
	ruleIDLen        = "must be at most 1024 bytes"
	ruleIDUTF8       = "must be valid UTF-8"
	ruleIDSurrogate  = `must be valid UTF-8: a surrogate escape (\uD800 to \uDFFF) must be half of a pair`
	ruleScale        = "must be a whole number of milliseconds, or a duration such as 30s"
	ruleScaleMs      = "must be a whole number of milliseconds"
	ruleLimit        = "must be an integer between 1 and 9223372036854775807"
	ruleHits         = "must be an integer between 0 and 9223372036854775807"
	ruleRefundHits   = "must be negative on a refund: the hits to give back, e.g. -3"
	ruleBurst        = "must be an integer between 0 and 9223372036854775807"
	ruleWindow       = "must be the Ratelimit-Window of the check whose hits are given back: an integer between 1 and 9223372036854775807"
	ruleRuleName     = "must not be empty"
	ruleFromRule     = "must not be given with rule: it comes from the rule"
	ruleNoRules      = "no rules are configured"
	ruleNoSuchRule   = "is not a configured rule"
	ruleString       = "must be a JSON string"
	ruleUnknown      = "is not a known parameter"
	ruleRepeated     = "must not be repeated"
	ruleEscape       = "has an invalid percent-encoding"
	ruleNoName       = "has a parameter without a name"
	ruleNoMemberName = "has a member with an empty name"
	ruleObject       = "must be a JSON object"
	ruleTrailing     = "must hold one JSON value and nothing after it"
	ruleTruncated    = "is malformed JSON: unexpected end of input"
	ruleQueryPost    = "must be empty on POST; send the parameters in the JSON body"
)

var (
	// ruleScaleRange is the range rule of scale, the same as table.Request.Validate's.
	ruleScaleRange = "must be between " + table.MinScale.String() + " and " + table.MaxScale.String()
	// ruleBodyLarge is the rule of a body over MaxBodyBytes.
	ruleBodyLarge = "must be at most " + strconv.Itoa(MaxBodyBytes) + " bytes"
	// ruleChecks is the rule of the number of checks in a batch.
	ruleChecks = "must hold 1 to " + strconv.Itoa(actors.MaxCheckAll) + " checks"
	// ruleBody is the rule of a POST /check_rate body.
	ruleBody = "must be a JSON object, or a JSON array of 1 to " + strconv.Itoa(actors.MaxCheckAll) + " of them (checked all or nothing)"
)

func fieldErr(field, rule string) *table.FieldError {
	return &table.FieldError{Field: field, Rule: rule}
}

// param bits, to reject repeated parameters and parameters a mode does not
// take.
const (
	seenID = 1 << iota
	seenScale
	seenLimit
	seenHits
	seenAlgorithm
	seenBurst
	seenRule
	seenWindow // refunds only

	seenAll = seenID | seenScale | seenLimit | seenHits | seenAlgorithm | seenBurst | seenRule
	// seenFromRule are the parameters a rule supplies.
	seenFromRule = seenScale | seenLimit | seenAlgorithm | seenBurst
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
	case "burst":
		return seenBurst
	case "rule":
		return seenRule
	case "window":
		return seenWindow
	}
	return 0
}

// mode says which endpoint parameters are parsed for.
type mode uint8

const (
	modeCheck   mode = iota // check_rate: hits ≥ 0, 1 when absent
	modeRefund              // refund: hits < 0 and required, stored as its absolute value
	modeReset               // admin reset: no hits
	modeBuckets             // admin buckets: id only
)

// params returns the parameter bits m takes.
func (m mode) params() uint {
	switch m {
	case modeReset:
		return seenAll &^ seenHits
	case modeBuckets:
		return seenID
	case modeRefund:
		return seenAll | seenWindow
	}
	return seenAll
}

// params is a parsed set of check parameters: an ad-hoc request, or an id
// and hits to check under a rule (see resolve).
type params struct {
	// req holds the parameters as given. Without a rule it is a valid
	// request; with one, only ID and Hits are set.
	req  table.Request
	rule string // the rule named, or ""
	seen uint   // the parameters given
}

// newParams returns the params of m before any parameter is parsed.
func newParams(m mode) params {
	if m == modeCheck {
		return params{req: table.Request{Hits: 1}}
	}
	return params{}
}

// finish checks what only the whole set of parameters shows: the required
// ones, a rule given with what it supplies, and (without a rule) the
// request's own validity.
func (p *params) finish(m mode) error {
	if p.seen&seenID == 0 {
		return fieldErr("id", ruleRequired)
	}
	if m == modeBuckets {
		return nil
	}
	if p.seen&seenRule != 0 {
		if extra := p.seen & seenFromRule; extra != 0 {
			return fieldErr(bitName(extra&-extra), ruleFromRule)
		}
	} else {
		switch {
		case p.seen&seenScale == 0:
			return fieldErr("scale", ruleRequired)
		case p.seen&seenLimit == 0:
			return fieldErr("limit", ruleRequired)
		}
	}
	if m == modeRefund && p.seen&seenHits == 0 {
		return fieldErr("hits", ruleRefundHits)
	}
	if p.seen&seenRule != 0 {
		return nil
	}
	return p.req.Validate()
}

// bitName returns the parameter name of a single param bit.
func bitName(bit uint) string {
	switch bit {
	case seenID:
		return "id"
	case seenScale:
		return "scale"
	case seenLimit:
		return "limit"
	case seenHits:
		return "hits"
	case seenAlgorithm:
		return "algorithm"
	case seenBurst:
		return "burst"
	case seenWindow:
		return "window"
	}
	return "rule"
}

// resolve returns the request p asks for: p.req itself for an ad-hoc
// check, or, when p names a rule, the request of that rule of set, in the
// rule's namespace. set is nil when the server has no rules store at all
// (an empty set is a store whose rules were all deleted: its rules are
// unknown, not missing). rule is the zero Rule for an ad-hoc check. Any
// error is a *table.FieldError.
func resolve(p *params, set *rules.Set) (req table.Request, rule rules.Rule, err error) {
	if p.rule == "" {
		return p.req, rules.Rule{}, nil
	}
	if set == nil {
		return table.Request{}, rules.Rule{}, fieldErr("rule", ruleNoRules)
	}
	rule, ok := set.Get(p.rule)
	if !ok {
		return table.Request{}, rules.Rule{}, fieldErr("rule", ruleNoSuchRule)
	}
	req = ruleRequest(rule, p.req.ID, p.req.Hits)
	req.Window = p.req.Window
	if err := req.Validate(); err != nil {
		// A rule can pass rules.Rule.Validate and still ask too much of the
		// table (a refill time over table.MaxScale).
		return table.Request{}, rules.Rule{}, fieldErr("rule", "is configured with a limit the rate limiter cannot take: "+err.Error())
	}
	return req, rule, nil
}

// ruleRequest returns the request of id spending hits under rule r.
func ruleRequest(r rules.Rule, id string, hits int64) table.Request {
	return table.Request{
		ID:        id,
		Hits:      hits,
		Policy:    table.Policy{Scale: r.Scale, Limit: r.Limit, Burst: r.Burst, Algorithm: r.Algorithm},
		Namespace: r.Name,
	}
}

// parseQuery parses a raw query string of parameters for m. Any error is a
// *table.FieldError. It reads raw in place, unescaping a key or value only
// when it holds '%' or '+', and allocates nothing unless it must unescape
// or fails.
func parseQuery(raw string, m mode) (params, error) {
	p := newParams(m)
	allowed := m.params()
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
				return params{}, fieldErr("query", ruleEscape)
			}
			key = k
		}
		bit := fieldBit(key) & allowed
		switch {
		case key == "":
			return params{}, fieldErr("query", ruleNoName)
		case bit == 0:
			return params{}, fieldErr(echoName(key), ruleUnknown)
		}
		if p.seen&bit != 0 {
			return params{}, fieldErr(key, ruleRepeated)
		}
		p.seen |= bit
		if bit == seenID && len(val) > 3*table.MaxIDLen {
			return params{}, fieldErr("id", ruleIDLen) // too long even if all escaped
		}
		if escaped && needsUnescape(val) {
			v, err := url.QueryUnescape(val)
			if err != nil {
				return params{}, fieldErr(key, ruleEscape)
			}
			val = v
		}
		if err := p.set(bit, val, m); err != nil {
			return params{}, err
		}
	}
	if err := p.finish(m); err != nil {
		return params{}, err
	}
	return p, nil
}

// set parses the value s of the parameter bit into p. A JSON member comes
// here as its string value, or as its raw text for a number.
func (p *params) set(bit uint, s string, m mode) error {
	var err error
	switch bit {
	case seenID:
		p.req.ID, err = parseID(s)
	case seenScale:
		p.req.Scale, err = parseScale(s)
	case seenLimit:
		p.req.Limit, err = parseLimit(s)
	case seenHits:
		if m == modeRefund {
			p.req.Hits, err = parseRefundHits(s)
		} else {
			p.req.Hits, err = parseHits(s)
		}
	case seenAlgorithm:
		p.req.Algorithm, err = table.ParseAlgorithm(s)
	case seenBurst:
		p.req.Burst, err = parseBurst(s)
	case seenRule:
		if s == "" {
			err = fieldErr("rule", ruleRuleName)
		}
		p.rule = s
	case seenWindow:
		var ok bool
		if p.req.Window, ok = parseDigits(s); !ok || p.req.Window == 0 {
			err = fieldErr("window", ruleWindow)
		}
	}
	return err
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

func parseID(s string) (string, error) {
	switch {
	case s == "":
		return "", fieldErr("id", ruleRequired)
	case len(s) > table.MaxIDLen:
		return "", fieldErr("id", ruleIDLen)
	case !utf8.ValidString(s):
		return "", fieldErr("id", ruleIDUTF8)
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

// parseLimit parses the limit of an ad-hoc check: at least 1 (a rule may
// have limit 0, a request by its parameters may not).
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

// parseRefundHits parses the hits of a refund, a negative integer, and
// returns its absolute value.
func parseRefundHits(s string) (int64, error) {
	if len(s) > 1 && s[0] == '-' {
		if n, ok := parseDigits(s[1:]); ok && n > 0 {
			return n, nil
		}
	}
	return 0, fieldErr("hits", ruleRefundHits)
}

func parseBurst(s string) (int64, error) {
	n, ok := parseDigits(s)
	if !ok {
		return 0, fieldErr("burst", ruleBurst)
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
	if len(s) < len("9223372036854775807") { // cannot overflow
		for i := 0; i < len(s); i++ {
			c := s[i] - '0'
			if c > 9 {
				return 0, false
			}
			n = n*10 + int64(c)
		}
		return n, true
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

// checkBody is a parsed POST body: one set of parameters, or a batch.
type checkBody struct {
	one   params
	batch []params // non-nil for a JSON array
}

// elemField returns the name of field of element i of a batch: "checks[i]"
// for the element itself (field ""), else "checks[i].field".
func elemField(i int, field string) string {
	f := "checks[" + strconv.Itoa(i) + "]"
	if field != "" {
		f += "." + field
	}
	return f
}

// elemErr renames the field of a field error about element i of a batch;
// an error about the whole body stays one.
func elemErr(i int, err error) error {
	var fe *table.FieldError
	if !errors.As(err, &fe) || fe.Field == "body" {
		return err
	}
	return fieldErr(elemField(i, fe.Field), fe.Rule)
}

// setJSON parses raw, the JSON text of the value of member key, whose bit
// is bit, into p: id, algorithm and rule are strings; limit, hits and
// burst integers; scale either. plain is as for unquote. An id must be
// valid UTF-8 as sent: decoding would replace what is not by U+FFFD.
func (p *params) setJSON(bit uint, key, raw string, plain bool, m mode) error {
	switch bit {
	case seenID, seenAlgorithm, seenRule:
		if raw[0] != '"' {
			return fieldErr(key, ruleString)
		}
		if bit == seenID && !plain {
			if rule := unicodeRule(raw); rule != "" {
				return fieldErr("id", rule)
			}
		}
		return p.set(bit, unquote(raw, plain), m)
	case seenScale:
		if raw[0] == '"' {
			return p.set(bit, unquote(raw, plain), m)
		}
		if !isDigits(raw) {
			return fieldErr("scale", ruleScale)
		}
	}
	return p.set(bit, raw, m)
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
		return fieldErr("body", ruleTruncated)
	case errors.As(err, &syntax):
		return malformed(int(syntax.Offset), syntax.Error())
	}
	return fieldErr("body", "could not be read: "+err.Error())
}
