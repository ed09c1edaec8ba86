package rules

import (
	"errors"
	"strconv"
	"strings"
)

// The sentinel errors of the package. Match them with errors.Is.
var (
	// ErrInvalid is matched by every validation error: a malformed or
	// ambiguous rule, a YAML syntax error, an unknown field. Such errors are
	// *Error values, which carry the rule, field and line at fault.
	ErrInvalid = errors.New("invalid rules")

	// ErrNotFound is returned (wrapped) by Store.Delete when no rule has the
	// name.
	ErrNotFound = errors.New("rule not found")

	// ErrClosed is returned (wrapped, in ReloadResult.Err) by Watcher.Reload
	// after Watcher.Close.
	ErrClosed = errors.New("rules watcher closed")

	// ErrUnsettled is returned (wrapped, in ReloadResult.Err) by a Watcher
	// reload when the file was still changing after every read it makes.
	ErrUnsettled = errors.New("rules file still changing")
)

// Error is a validation error: it names the rule and the field at fault and
// says what the field must be. It matches ErrInvalid with errors.Is.
//
// Its message has the form
//
//	[line L: ][rules[I] ["NAME"]: | rule "NAME": ][FIELD: ]MESSAGE
//
// for example
//
//	rules[2] "login": scale: must be between 1ms and 8784h0m0s
//	rules[0]: name: is required
//	line 4: rules[1] "api": match.bogus: is not a known field
//	line 3: mapping values are not allowed in this context
//	rule "login": limit: must not be negative
type Error struct {
	// Index is the rule's position in the file or slice, from 0; -1 when no
	// position applies (Rule.Validate, Store.Put, errors about the whole file).
	Index int
	// Name is the rule's name as written, when known; it may itself be the
	// invalid value.
	Name string
	// Field is the wire name of the field at fault: "name", "algorithm",
	// "scale", "limit", "burst", "shadow", "match", "match.prefix",
	// "match.method", "match.host", "rules", or an unknown key as written
	// ("match.bogus"). Empty when no field applies (a YAML syntax error, a rule
	// that is not a mapping).
	Field string
	// Message says what is wrong, e.g. "is required" or "must not be negative".
	Message string
	// Line is the 1-based line in the YAML input where the fault is, when
	// known (Parse, LoadFile); 0 otherwise.
	Line int
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	switch {
	case e.Index >= 0:
		b.WriteString("rules[")
		b.WriteString(strconv.Itoa(e.Index))
		b.WriteString("]")
		if e.Name != "" {
			b.WriteString(" ")
			b.WriteString(strconv.Quote(e.Name))
		}
		b.WriteString(": ")
	case e.Name != "":
		b.WriteString("rule ")
		b.WriteString(strconv.Quote(e.Name))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
