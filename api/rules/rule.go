package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/table"
)

// Limits on a Rule, enforced by Rule.Validate.
const (
	// MaxNameLen is the longest rule name, in bytes.
	MaxNameLen = 64
	// MaxPrefixLen is the longest Match.Prefix, in bytes.
	MaxPrefixLen = 1024
	// MaxMethodLen is the longest Match.Method, in bytes.
	MaxMethodLen = 32
	// MaxHostLen is the longest Match.Host, in bytes, port included.
	MaxHostLen = 261
)

// What a field must be, as written in Error.Message, besides the table's
// rules (table.MsgRequired, table.MsgScaleRange and the others).
const (
	msgName      = "must be 1 to 64 characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit"
	msgScaleForm = `must be a duration such as "30s" or an integer number of milliseconds`
	msgInteger   = "must be an integer between 0 and 9223372036854775807"
	msgBool      = "must be true or false"
	msgString    = "must be a string"
	msgUnknown   = "is not a known field"
	msgPrefix    = `must start with "/"`
	msgPrefixLen = "must be at most 1024 bytes"
	msgPrefixChr = "must be valid UTF-8 without spaces, control characters, '?' or '#'"
	msgMethod    = "must be an HTTP method token of at most 32 characters, such as GET or POST"
	msgHost      = "must be a host name or IP address, optionally with a port"
)

// Match selects the requests a rule applies to. The zero Match selects no
// request: the rule is then used only by name (?rule=NAME).
//
// Prefix is required in a non-zero Match. See Set.Match for how a request is
// matched.
type Match struct {
	Prefix string // URL path prefix, starting with "/"; compared ASCII case-insensitively, segment by segment
	Method string // HTTP method; empty matches every method; stored upper-case
	Host   string // host name or IP address; empty matches every host; stored lower-case, without port
}

// IsZero reports whether m is the zero Match, which selects no request.
func (m Match) IsZero() bool { return m == Match{} }

// Rule is a named rate limit: at most Limit hits per Scale, counted with
// Algorithm, optionally applied to the requests Match selects.
//
// Rule is comparable with ==. Rules held by a Set are in canonical form:
// Match.Method upper-case, Match.Host lower-case without a port.
type Rule struct {
	// Name identifies the rule: 1 to MaxNameLen characters of [a-z0-9_.-],
	// starting with a letter or digit. Unique within a Set.
	Name string
	// Policy is the limit: its Algorithm counts the hits, Scale is the
	// window, Limit the hits admitted per window (0 denies everything),
	// Burst the bucket size of bucket algorithms (0 means Limit; accepted,
	// and ignored, by the windows).
	table.Policy
	// Shadow makes the rule count and report without ever denying.
	Shadow bool
	// Key says whose budget a request spends under this rule, when the
	// request does not name the id itself (the middleware, the proxy):
	// "" or "ip" the client address, "header:NAME" a request header,
	// "query:NAME" a query parameter, "user" the authenticated user.
	Key string
	// Match selects the requests the rule applies to; zero: used only by name.
	Match Match
}

// Key sources of Rule.Key.
const (
	KeyIP     = "ip"
	KeyUser   = "user"
	KeyHeader = "header:"
	KeyQuery  = "query:"
)

// MaxKeyNameLen is the longest header or query parameter name in a Key.
const MaxKeyNameLen = 128

// msgKey is what the key field must be.
const msgKey = `must be "ip", "user", "header:NAME" or "query:NAME" (a name of 1 to 128 token characters)`

// checkKey returns what key breaks, or "".
func checkKey(key string) string {
	switch key {
	case "", KeyIP, KeyUser:
		return ""
	}
	name, ok := strings.CutPrefix(key, KeyHeader)
	if !ok {
		name, ok = strings.CutPrefix(key, KeyQuery)
	}
	if !ok || name == "" || len(name) > MaxKeyNameLen || !validMethod(name) {
		return msgKey
	}
	return ""
}

// Validate reports the first field of r that breaks its rule, in the order
// name, algorithm, scale, limit, burst, key, match.prefix, match.method,
// match.host, as an *Error with Index -1. It makes the same checks as Parse
// makes of each rule; the checks across rules (unique names, unambiguous
// matches) are NewSet's. Match.Method and Match.Host may be in any case, and
// Match.Host may carry a port: NewSet stores them in canonical form.
func (r Rule) Validate() error {
	if e := r.check(); e != nil {
		return e
	}
	return nil
}

// check is Validate with a concrete result type.
func (r Rule) check() *Error {
	fail := func(field, msg string) *Error {
		return &Error{Index: -1, Name: r.Name, Field: field, Message: msg}
	}
	if msg := checkName(r.Name); msg != "" {
		return fail("name", msg)
	}
	if msg := checkAlgorithm(r.Algorithm); msg != "" {
		return fail("algorithm", msg)
	}
	switch {
	case r.Scale < table.MinScale || r.Scale > table.MaxScale:
		return fail("scale", table.MsgScaleRange)
	case r.Scale%time.Millisecond != 0:
		return fail("scale", table.MsgScaleMs)
	case r.Limit < 0:
		return fail("limit", table.MsgNotNegative)
	case r.Burst < 0:
		return fail("burst", table.MsgNotNegative)
	}
	if msg := checkKey(r.Key); msg != "" {
		return fail("key", msg)
	}
	if r.Match.IsZero() {
		return nil
	}
	if msg := checkPrefix(r.Match.Prefix); msg != "" {
		return fail("match.prefix", msg)
	}
	if r.Match.Method != "" && !validMethod(r.Match.Method) {
		return fail("match.method", msgMethod)
	}
	if r.Match.Host != "" && !validHost(r.Match.Host) {
		return fail("match.host", msgHost)
	}
	return nil
}

// normalize returns r in canonical form; r must be valid.
func (r Rule) normalize() Rule {
	r.Match.Method = upperASCII(r.Match.Method)
	r.Match.Host = lowerASCII(hostOnly(r.Match.Host))
	return r
}

// checkName returns what name breaks, or "".
func checkName(name string) string {
	if name == "" {
		return table.MsgRequired
	}
	if len(name) > MaxNameLen || !isLowerAlnum(name[0]) {
		return msgName
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isLowerAlnum(c) && c != '_' && c != '.' && c != '-' {
			return msgName
		}
	}
	return ""
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// checkAlgorithm returns what a breaks, or "". It asks table.ParseAlgorithm,
// so that algorithms added there are accepted here.
func checkAlgorithm(a table.Algorithm) string {
	b, err := table.ParseAlgorithm(a.String())
	if err != nil {
		return algorithmMsg(err)
	}
	if b != a {
		return "is not a known algorithm"
	}
	return ""
}

// algorithmMsg returns the message of an error of table.ParseAlgorithm.
func algorithmMsg(err error) string {
	var fe *table.FieldError
	if errors.As(err, &fe) {
		return fe.Message
	}
	return err.Error()
}

// checkPrefix returns what p breaks, or "".
func checkPrefix(p string) string {
	switch {
	case p == "":
		return table.MsgRequired
	case p[0] != '/':
		return msgPrefix
	case len(p) > MaxPrefixLen:
		return msgPrefixLen
	case !utf8.ValidString(p):
		return msgPrefixChr
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f || c == '?' || c == '#' {
			return msgPrefixChr
		}
	}
	return ""
}

// validMethod reports whether m is an HTTP method token (RFC 9110 tchar) of at
// most MaxMethodLen bytes.
func validMethod(m string) bool {
	if m == "" || len(m) > MaxMethodLen {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHost reports whether h is a host name or IP address, optionally
// followed by ":PORT", with an IPv6 address in brackets when a port follows.
func validHost(h string) bool {
	if len(h) > MaxHostLen {
		return false
	}
	name, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		name, port = h[1:end], h[end+1:]
		if port != "" {
			if port[0] != ':' {
				return false
			}
			port = port[1:]
			if port == "" {
				return false
			}
		}
		if !strings.Contains(name, ":") {
			return false
		}
	} else if i := strings.IndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i+1:], ':') < 0 {
		name, port = h[:i], h[i+1:]
		if port == "" {
			return false
		}
	}
	if len(port) > 5 {
		return false
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return false
		}
	}
	if name == "" || len(name) > 253 {
		return false
	}
	if strings.Contains(name, ":") {
		// An IPv6 address, which the canonical form keeps without its
		// brackets: a name of hex digits and colons that is no address
		// ("[:]") would lose them and read back as a port.
		a, err := netip.ParseAddr(name)
		return err == nil && a.Is6() && a.Zone() == ""
	}
	for i := 0; i < len(name); i++ {
		c, lower := name[i], name[i]|0x20 // lower is c in lower case when c is a letter
		switch {
		case '0' <= c && c <= '9', c == '.':
		case 'a' <= lower && lower <= 'z', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// hostOnly returns h without its port and without the brackets of an IPv6
// address. It does not allocate.
func hostOnly(h string) string {
	if strings.HasPrefix(h, "[") {
		if end := strings.IndexByte(h, ']'); end > 0 {
			return h[1:end]
		}
		return h
	}
	if i := strings.IndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i+1:], ':') < 0 {
		return h[:i]
	}
	return h
}

// lowerASCII returns s with ASCII upper-case letters lowered, allocating only
// when s has one.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// upperASCII returns s with ASCII lower-case letters raised, allocating only
// when s has one.
func upperASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'a' <= b[j] && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// parseScaleString parses a scale written as a string: all digits are
// milliseconds, anything else a Go duration. The result is range-checked by
// Rule.check, except that a number of milliseconds too large to be a
// Duration is reported here.
func parseScaleString(s string) (time.Duration, string) {
	if s != "" && strings.Trim(s, "0123456789") == "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, table.MsgScaleRange
		}
		return scaleFromMillis(ms)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, msgScaleForm
	}
	return d, ""
}

// scaleFromMillis converts a number of milliseconds to a Duration, reporting
// the range rule for values Rule.check would reject anyway and that could
// overflow.
func scaleFromMillis(ms int64) (time.Duration, string) {
	if ms < 1 || ms > int64(table.MaxScale/time.Millisecond) {
		return 0, table.MsgScaleRange
	}
	return time.Duration(ms) * time.Millisecond, ""
}

// formatScale writes d as a short Go duration: "30s", "1h", "1h30m", "1.5s".
func formatScale(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// ruleRef names rule j of a list for another rule's error message.
func ruleRef(indexed bool, j int, name string) string {
	if indexed {
		return fmt.Sprintf("rules[%d] %q", j, name)
	}
	return fmt.Sprintf("rule %q", name)
}
