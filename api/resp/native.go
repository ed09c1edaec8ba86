package resp

import (
	"errors"
	"math"
	"time"

	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// What the arguments of the RL.* commands must be, as their error replies
// say it after the argument's name: check_rate's wording.
const (
	ruleScale      = "must be a whole number of milliseconds, or a duration such as 30s"
	ruleScaleMs    = "must be a whole number of milliseconds"
	ruleLimit      = "must be an integer between 1 and 9223372036854775807"
	ruleHits       = "must be an integer between 0 and 9223372036854775807"
	ruleRefundHits = "must be an integer between 1 and 9223372036854775807: the hits to give back"
	ruleBurst      = "must be an integer between 0 and 9223372036854775807"
	ruleWindow     = "must be the Ratelimit-Window of the check whose hits are given back: an integer between 1 and 9223372036854775807"
	ruleNoRules    = "no rules are configured"
	ruleNoSuchRule = "is not a configured rule"
	ruleUnknown    = "is not a known parameter"
	ruleRepeated   = "must not be repeated"
	ruleNoValue    = "must be followed by its value"
	ruleRequired   = "is required"
)

// ruleScaleRange is the range rule of scale, as table.Request.Validate's.
var ruleScaleRange = "must be between " + table.MinScale.String() + " and " + table.MaxScale.String()

// native is a parsed RL.CHECK, RL.RULE, RL.REFUND or RL.REFUNDRULE.
type native struct {
	req    table.Request
	shadow bool // by a shadow rule: a denial is answered as allowed
}

// Options of the RL.* commands, as bits.
const (
	optHits = 1 << iota
	optAlgorithm
	optBurst
	optWindow
)

// parseNative parses the arguments of an RL.* command (args[0] is its
// name): by rule (byRule: name id ...) or ad hoc (id scale limit ...), a
// check or a refund. The error is the reply, "ERR FIELD: RULE".
func parseNative(args [][]byte, byRule, refund bool, store *rules.Store) (native, string) {
	var n native
	var allowed uint
	fixed := 4 // name and three positional arguments
	if byRule {
		fixed = 3
		allowed = optHits
	} else {
		allowed = optHits | optAlgorithm | optBurst
	}
	if refund {
		allowed |= optWindow
	}
	if len(args) < fixed {
		return n, wrongArity(args[0])
	}
	req := &n.req
	req.Hits = 1
	var ruleName string
	if byRule {
		ruleName, req.ID = string(args[1]), string(args[2])
	} else {
		req.ID = string(args[1])
		var msg string
		if req.Scale, msg = parseScale(string(args[2])); msg != "" {
			return n, fieldErr("scale", msg)
		}
		if req.Limit, msg = parseLimit(string(args[3])); msg != "" {
			return n, fieldErr("limit", msg)
		}
	}
	var seen uint
	for i := fixed; i < len(args); i += 2 {
		name := lowerASCII(args[i])
		bit := optionBit(name) & allowed
		switch {
		case bit == 0:
			return n, fieldErr(echoName(name), ruleUnknown)
		case seen&bit != 0:
			return n, fieldErr(name, ruleRepeated)
		case i+1 == len(args):
			return n, fieldErr(name, ruleNoValue)
		}
		seen |= bit
		v := string(args[i+1])
		d, ok := parseDigits(v)
		switch bit {
		case optHits:
			switch {
			case refund && (!ok || d == 0):
				return n, fieldErr("hits", ruleRefundHits)
			case !ok:
				return n, fieldErr("hits", ruleHits)
			}
			req.Hits = d
		case optAlgorithm:
			a, err := table.ParseAlgorithm(v)
			if v == "" {
				// ParseAlgorithm takes "" as fixed_window; an argument must name one.
				_, err = table.ParseAlgorithm("?")
			}
			if err != nil {
				return n, "ERR " + err.Error()
			}
			req.Algorithm = a
		case optBurst:
			if !ok {
				return n, fieldErr("burst", ruleBurst)
			}
			req.Burst = d
		case optWindow:
			if !ok || d == 0 {
				return n, fieldErr("window", ruleWindow)
			}
			req.Window = d
		}
	}
	if refund && seen&optHits == 0 {
		return n, fieldErr("hits", ruleRequired)
	}
	if byRule {
		if msg := n.resolve(ruleName, store); msg != "" {
			return n, msg
		}
		return n, ""
	}
	if err := req.Validate(); err != nil {
		return n, "ERR " + err.Error()
	}
	return n, ""
}

// resolve fills in n.req from the rule named name of store.
func (n *native) resolve(name string, store *rules.Store) string {
	if store == nil {
		return fieldErr("rule", ruleNoRules)
	}
	r, ok := store.Current().Get(name)
	if !ok {
		return fieldErr("rule", ruleNoSuchRule)
	}
	n.req.Policy = r.Policy
	n.req.Namespace = r.Name
	n.shadow = r.Shadow
	if err := n.req.Validate(); err != nil {
		if fe, ok := asFieldError(err); ok && fe.Field == "id" {
			return "ERR " + err.Error()
		}
		// A rule can pass rules.Rule.Validate and still ask too much of the
		// table (a refill time over table.MaxScale).
		return fieldErr("rule", "is configured with a limit the rate limiter cannot take: "+err.Error())
	}
	return ""
}

// optionBit returns the bit of an option's lower-case name, 0 if unknown.
func optionBit(name string) uint {
	switch name {
	case "hits":
		return optHits
	case "algorithm":
		return optAlgorithm
	case "burst":
		return optBurst
	case "window":
		return optWindow
	}
	return 0
}

// fieldErr is the error reply naming field and the rule it broke.
func fieldErr(field, rule string) string { return "ERR " + field + ": " + rule }

// maxEchoName is the most bytes of an unknown option's name echoed back.
const maxEchoName = 128

func echoName(name string) string {
	if len(name) > maxEchoName {
		return name[:maxEchoName]
	}
	return name
}

// parseScale parses an integer number of milliseconds or a Go duration,
// as check_rate does; the second result is the rule broken, if any.
func parseScale(s string) (time.Duration, string) {
	var d time.Duration
	if ms, ok := parseDigits(s); ok {
		if ms > int64(table.MaxScale/time.Millisecond) {
			return 0, ruleScaleRange
		}
		d = time.Duration(ms) * time.Millisecond
	} else if isDigits(s) {
		return 0, ruleScaleRange // too many digits for an int64
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, ruleScale
		}
	}
	switch {
	case d < table.MinScale || d > table.MaxScale:
		return 0, ruleScaleRange
	case d%time.Millisecond != 0:
		return 0, ruleScaleMs
	}
	return d, ""
}

// parseLimit parses the limit of an ad-hoc check: at least 1.
func parseLimit(s string) (int64, string) {
	n, ok := parseDigits(s)
	if !ok || n == 0 {
		return 0, ruleLimit
	}
	return n, ""
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

// parseDigits parses one or more ASCII digits (no sign) as a non-negative
// int64; ok is false on any other input or on overflow.
func parseDigits(s string) (n int64, ok bool) {
	if !isDigits(s) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := int64(s[i] - '0')
		if n > (math.MaxInt64-c)/10 {
			return 0, false
		}
		n = n*10 + c
	}
	return n, true
}

// reply returns the 6 integers of an RL.* reply to d, as check_rate's
// JSON has them: [allowed, count, limit, remaining, reset_ms,
// retry_after_ms], a shadow rule's denial allowed, durations rounded up to
// the millisecond.
func (n *native) reply(d table.Decision) [6]int64 {
	var allowed int64
	if d.Allowed || n.shadow {
		allowed = 1
	}
	return [6]int64{allowed, d.Count, d.Limit, d.Remaining, ceilMs(d.ResetAfter), ceilMs(d.RetryAfter)}
}

// ceilMs is d in milliseconds, rounded up; 0 for d ≤ 0.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return ceilDivInt(int64(d), int64(time.Millisecond))
}

// lowerASCII returns b as a string, ASCII lower-cased.
func lowerASCII(b []byte) string {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			l := make([]byte, len(b))
			for i, c := range b {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				l[i] = c
			}
			return string(l)
		}
	}
	return string(b)
}

// wrongArity is Redis's reply to a command with the wrong number of
// arguments.
func wrongArity(name []byte) string {
	return "ERR wrong number of arguments for '" + lowerASCII(name) + "' command"
}

// asFieldError returns err as a *table.FieldError, if it is one.
func asFieldError(err error) (*table.FieldError, bool) {
	var fe *table.FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}
