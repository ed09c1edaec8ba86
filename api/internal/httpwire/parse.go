package httpwire

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

	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// MaxBodyBytes is the largest POST /check_rate or /refund body accepted; a
// larger one is answered 400 (not 413, which means "denied"). It holds a
// batch of table.MaxBatch checks of about 250 bytes each.
const MaxBodyBytes = 256 << 10

// What bad input must be, as sent in the "error" member of a 400 body
// (after the field name), besides the table's rules (table.MsgRequired
// and the others).
const (
	msgIDSurrogate  = `must be valid UTF-8: a surrogate escape (\uD800 to \uDFFF) must be half of a pair`
	msgScale        = "must be a whole number of milliseconds, or a duration such as 30s"
	msgLimit        = "must be an integer between 1 and 9223372036854775807"
	msgHits         = "must be an integer between 0 and 9223372036854775807"
	msgRefundHits   = "must be negative on a refund: the hits to give back, e.g. -3"
	msgBurst        = "must be an integer between 0 and 9223372036854775807"
	msgWindow       = "must be the Ratelimit-Window of the check whose hits are given back: an integer between 1 and 9223372036854775807"
	msgRuleName     = "must not be empty"
	msgFromRule     = "must not be given with rule: it comes from the rule"
	msgNoRules      = "no rules are configured"
	msgNoSuchRule   = "is not a configured rule"
	msgUnusableRule = "is configured with a limit the rate limiter cannot take: " // and the table's error
	msgString       = "must be a JSON string"
	msgUnknown      = "is not a known parameter"
	MsgRepeated     = "must not be repeated"
	msgEscape       = "has an invalid percent-encoding"
	msgNoName       = "has a parameter without a name"
	MsgNoMemberName = "has a member with an empty name"
	MsgObject       = "must be a JSON object"
	MsgTrailing     = "must hold one JSON value and nothing after it"
	MsgTruncated    = "is malformed JSON: unexpected end of input"
	msgQueryPost    = "must be empty on POST; send the parameters in the JSON body"
)

var (
	// msgBodyLarge is what a body over MaxBodyBytes must be.
	msgBodyLarge = "must be at most " + strconv.Itoa(MaxBodyBytes) + " bytes"
	// msgChecks is what the number of checks in a batch must be.
	msgChecks = "must hold 1 to " + strconv.Itoa(table.MaxBatch) + " checks"
	// msgBody is what a POST /check_rate body must be.
	msgBody = "must be a JSON object, or a JSON array of 1 to " + strconv.Itoa(table.MaxBatch) + " of them (checked all or nothing)"
)

// FieldErr returns the error of field, which breaks msg.
func FieldErr(field, msg string) *table.FieldError {
	return &table.FieldError{Field: field, Message: msg}
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

// Mode says which endpoint parameters are parsed for.
type Mode uint8

const (
	ModeCheck   Mode = iota // check_rate: hits ≥ 0, 1 when absent
	ModeRefund              // refund: hits < 0 and required, stored as its absolute value
	ModeReset               // admin reset: no hits
	ModeBuckets             // admin buckets: id only
)

// Params returns the parameter bits m takes.
func (m Mode) Params() uint {
	switch m {
	case ModeReset:
		return seenAll &^ seenHits
	case ModeBuckets:
		return seenID
	case ModeRefund:
		return seenAll | seenWindow
	}
	return seenAll
}

// Params is a parsed set of check parameters: an ad-hoc request, or an id
// and hits to check under a rule (see resolve).
type Params struct {
	// Req holds the parameters as given, each valid. Without a rule it is a
	// request whose one remaining fault can be its refill time (see
	// tableErr), which the Checker finds; with a rule, only ID and Hits
	// are set.
	Req  table.Request
	Rule string // the rule named, or ""
	seen uint   // the parameters given
}

// newParams returns the params of m before any parameter is parsed.
func newParams(m Mode) Params {
	if m == ModeCheck {
		return Params{Req: table.Request{Hits: 1}}
	}
	return Params{}
}

// finish checks what only the whole set of parameters shows: the required
// ones, and a rule given with what it supplies. What the table asks of a
// request as a whole is the Checker's to check, once (see tableErr).
func (p *Params) finish(m Mode) error {
	if p.seen&seenID == 0 {
		return FieldErr("id", table.MsgRequired)
	}
	if m == ModeBuckets {
		return nil
	}
	if p.seen&seenRule != 0 {
		if extra := p.seen & seenFromRule; extra != 0 {
			return FieldErr(bitName(extra&-extra), msgFromRule)
		}
	} else {
		switch {
		case p.seen&seenScale == 0:
			return FieldErr("scale", table.MsgRequired)
		case p.seen&seenLimit == 0:
			return FieldErr("limit", table.MsgRequired)
		}
	}
	if m == ModeRefund && p.seen&seenHits == 0 {
		return FieldErr("hits", msgRefundHits)
	}
	return nil
}

// tableErr returns the fault the Checker will find in the ad-hoc check p,
// if any: the refill time of its policy, the one rule of the table that no
// parameter shows alone. The Checker validates every request it is given;
// tableErr is asked only when a body fails after p, or a batch fails at
// one of its rules, so that the first fault of a body is reported first.
func (p *Params) tableErr() error {
	if p.seen&seenRule != 0 || p.seen&seenScale == 0 { // by rule, or no policy (buckets)
		return nil
	}
	return p.Req.Policy.Validate()
}

// FirstFault returns err, unless one of ps, the complete checks before
// the point of err, holds a fault the Checker will find (tableErr): the
// first of those then, named as element i of a batch when batch is set.
func FirstFault(ps []Params, batch bool, err error) error {
	for i := range ps {
		if terr := ps[i].tableErr(); terr != nil {
			if batch {
				return ElemErr(i, terr)
			}
			return terr
		}
	}
	return err
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

// Resolve returns the request p asks for: p.req itself for an ad-hoc
// check, or, when p names a rule, the request of that rule of set, in the
// rule's namespace. set is nil when the server has no rules store at all
// (an empty set is a store whose rules were all deleted: its rules are
// unknown, not missing). rule is the zero Rule for an ad-hoc check. Any
// error is a *table.FieldError; a rule whose policy the table cannot take
// is one on field "rule", found when its Set was built.
func Resolve(p *Params, set *rules.Set) (req table.Request, rule rules.Rule, err error) {
	if p.Rule == "" {
		return p.Req, rules.Rule{}, nil
	}
	if set == nil {
		return table.Request{}, rules.Rule{}, FieldErr("rule", msgNoRules)
	}
	rule, ok, perr := set.Lookup(p.Rule)
	switch {
	case !ok:
		return table.Request{}, rules.Rule{}, FieldErr("rule", msgNoSuchRule)
	case perr != nil:
		return table.Request{}, rules.Rule{}, FieldErr("rule", msgUnusableRule+perr.Error())
	}
	req = RuleRequest(rule, p.Req.ID, p.Req.Hits)
	req.Window = p.Req.Window
	return req, rule, nil
}

// RuleRequest returns the request of id spending hits under rule r.
func RuleRequest(r rules.Rule, id string, hits int64) table.Request {
	return table.Request{
		ID:        id,
		Hits:      hits,
		Policy:    table.Policy{Scale: r.Scale, Limit: r.Limit, Burst: r.Burst, Algorithm: r.Algorithm},
		Namespace: r.Name,
	}
}

// ParseQuery parses a raw query string of parameters for m. Any error is a
// *table.FieldError. It reads raw in place, unescaping a key or value only
// when it holds '%' or '+', and allocates nothing unless it must unescape
// or fails.
func ParseQuery(raw string, m Mode) (Params, error) {
	p := newParams(m)
	allowed := m.Params()
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
				return Params{}, FieldErr("query", msgEscape)
			}
			key = k
		}
		bit := fieldBit(key) & allowed
		switch {
		case key == "":
			return Params{}, FieldErr("query", msgNoName)
		case bit == 0:
			return Params{}, FieldErr(EchoName(key), msgUnknown)
		}
		if p.seen&bit != 0 {
			return Params{}, FieldErr(key, MsgRepeated)
		}
		p.seen |= bit
		if bit == seenID && len(val) > 3*table.MaxIDLen {
			return Params{}, FieldErr("id", table.MsgIDLen) // too long even if all escaped
		}
		if escaped && needsUnescape(val) {
			v, err := url.QueryUnescape(val)
			if err != nil {
				return Params{}, FieldErr(key, msgEscape)
			}
			val = v
		}
		if err := p.set(bit, val, m); err != nil {
			return Params{}, err
		}
	}
	if err := p.finish(m); err != nil {
		return Params{}, err
	}
	return p, nil
}

// set parses the value s of the parameter bit into p. A JSON member comes
// here as its string value, or as its raw text for a number.
func (p *Params) set(bit uint, s string, m Mode) error {
	var err error
	switch bit {
	case seenID:
		p.Req.ID, err = parseID(s)
	case seenScale:
		p.Req.Scale, err = parseScale(s)
	case seenLimit:
		p.Req.Limit, err = parseLimit(s)
	case seenHits:
		if m == ModeRefund {
			p.Req.Hits, err = parseRefundHits(s)
		} else {
			p.Req.Hits, err = parseHits(s)
		}
	case seenAlgorithm:
		p.Req.Algorithm, err = table.ParseAlgorithm(s)
	case seenBurst:
		p.Req.Burst, err = parseBurst(s)
	case seenRule:
		if s == "" {
			err = FieldErr("rule", msgRuleName)
		}
		p.Rule = s
	case seenWindow:
		var ok bool
		if p.Req.Window, ok = parseDigits(s); !ok || p.Req.Window == 0 {
			err = FieldErr("window", msgWindow)
		}
	}
	return err
}

// maxEchoName is the most bytes of an unknown parameter name echoed back
// in a 400, so that an error body stays small whatever the request.
const maxEchoName = 128

// EchoName returns name cut to maxEchoName bytes.
func EchoName(name string) string {
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
		return "", FieldErr("id", table.MsgRequired)
	case len(s) > table.MaxIDLen:
		return "", FieldErr("id", table.MsgIDLen)
	case !utf8.ValidString(s):
		return "", FieldErr("id", table.MsgUTF8)
	}
	return s, nil
}

// parseScale parses an integer number of milliseconds or a Go duration.
func parseScale(s string) (time.Duration, error) {
	var d time.Duration
	if isDigits(s) {
		ms, ok := parseDigits(s)
		if !ok || ms > int64(table.MaxScale/time.Millisecond) {
			return 0, FieldErr("scale", table.MsgScaleRange)
		}
		d = time.Duration(ms) * time.Millisecond
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, FieldErr("scale", msgScale)
		}
	}
	switch {
	case d < table.MinScale || d > table.MaxScale:
		return 0, FieldErr("scale", table.MsgScaleRange)
	case d%time.Millisecond != 0:
		return 0, FieldErr("scale", table.MsgScaleMs)
	}
	return d, nil
}

// parseLimit parses the limit of an ad-hoc check: at least 1 (a rule may
// have limit 0, a request by its parameters may not).
func parseLimit(s string) (int64, error) {
	n, ok := parseDigits(s)
	if !ok || n == 0 {
		return 0, FieldErr("limit", msgLimit)
	}
	return n, nil
}

func parseHits(s string) (int64, error) {
	n, ok := parseDigits(s)
	if !ok {
		return 0, FieldErr("hits", msgHits)
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
	return 0, FieldErr("hits", msgRefundHits)
}

func parseBurst(s string) (int64, error) {
	n, ok := parseDigits(s)
	if !ok {
		return 0, FieldErr("burst", msgBurst)
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
type Body struct {
	One   Params
	Batch []Params // non-nil for a JSON array
}

// elemField returns the name of field of element i of a batch: "checks[i]"
// for the element itself (field ""), else "checks[i].field".
func elemField(i int, field string) string {
	return (&table.IndexError{Index: i}).Field(field)
}

// ElemErr renames the field of a field error about element i of a batch;
// an error about the whole body stays one.
func ElemErr(i int, err error) error {
	var fe *table.FieldError
	if !errors.As(err, &fe) || fe.Field == "body" {
		return err
	}
	return FieldErr(elemField(i, fe.Field), fe.Message)
}

// setJSON parses raw, the JSON text of the value of member key, whose bit
// is bit, into p: id, algorithm and rule are strings; limit, hits and
// burst integers; scale either. plain is as for unquote. An id must be
// valid UTF-8 as sent: decoding would replace what is not by U+FFFD.
func (p *Params) setJSON(bit uint, key, raw string, plain bool, m Mode) error {
	switch bit {
	case seenID, seenAlgorithm, seenRule:
		if raw[0] != '"' {
			return FieldErr(key, msgString)
		}
		if bit == seenID && !plain {
			if msg := unicodeMsg(raw); msg != "" {
				return FieldErr("id", msg)
			}
		}
		return p.set(bit, unquote(raw, plain), m)
	case seenScale:
		if raw[0] == '"' {
			return p.set(bit, unquote(raw, plain), m)
		}
		if !isDigits(raw) {
			return FieldErr("scale", msgScale)
		}
	}
	return p.set(bit, raw, m)
}

// JSONString decodes raw, which must be a JSON string, for field.
func JSONString(raw json.RawMessage, field string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", FieldErr(field, msgString)
	}
	return s, nil
}

// BodyErr turns an error reading or decoding the body into a field error on
// "body": too large, malformed, or (for a nil or io.EOF err) msg.
func BodyErr(err error, msg string) error {
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &tooLarge):
		return FieldErr("body", msgBodyLarge)
	case err == nil || err == io.EOF:
		return FieldErr("body", msg)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return FieldErr("body", MsgTruncated)
	case errors.As(err, &syntax):
		return malformed(int(syntax.Offset), syntax.Error())
	}
	return FieldErr("body", "could not be read: "+err.Error())
}
