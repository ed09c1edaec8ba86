package table

import (
	"errors"
	"fmt"
	"time"
)

// Limits on a Request, enforced by Request.Validate.
const (
	// MaxIDLen is the longest id, in bytes, a Request may carry.
	MaxIDLen = 1024
	// MinScale is the shortest window: the table counts time in whole milliseconds.
	MinScale = time.Millisecond
	// MaxScale is the longest window, one leap year, so that window arithmetic in
	// milliseconds can never overflow.
	MaxScale = 366 * 24 * time.Hour
)

// ErrInvalid is matched (errors.Is) by every error Request.Validate returns.
var ErrInvalid = errors.New("invalid request")

// FieldError names the Request field at fault and the rule it broke.
// It matches ErrInvalid with errors.Is.
type FieldError struct {
	Field string // the wire name of the field: "id", "scale", "limit", "hits", "algorithm"
	Rule  string // what the field must be, e.g. "must be at least 1ms"
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Algorithm selects how a bucket counts.
type Algorithm uint8

// The algorithms. The zero value is FixedWindow.
const (
	// FixedWindow counts hits in epoch-aligned windows of length Scale:
	// window number floor(now_ms / scale_ms), at most Limit hits in each.
	FixedWindow Algorithm = iota
)

// valid reports whether a is one of the algorithms.
func (a Algorithm) valid() bool { return a == FixedWindow }

// String returns the wire name of a, e.g. "fixed_window".
func (a Algorithm) String() string {
	switch a {
	case FixedWindow:
		return "fixed_window"
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the Algorithm whose wire name is s.
// The empty string means FixedWindow.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "", "fixed_window":
		return FixedWindow, nil
	}
	return 0, &FieldError{Field: "algorithm", Rule: "must be one of: fixed_window"}
}

// Request asks whether ID may spend Hits now under a limit of Limit per Scale.
//
// The same ID under a different Scale, Limit or Algorithm is a different
// bucket: limits never share counters.
type Request struct {
	ID        string        // who is being limited; 1 to MaxIDLen bytes
	Scale     time.Duration // window length, a whole number of milliseconds in [MinScale, MaxScale]
	Limit     int64         // hits admitted per window; 0 denies everything
	Hits      int64         // cost of this request; 0 is a peek that changes nothing
	Algorithm Algorithm     // how to count; the zero value is FixedWindow
}

// Validate reports the first field of r that breaks its rule, as a *FieldError.
func (r *Request) Validate() error {
	switch {
	case r.ID == "":
		return &FieldError{Field: "id", Rule: "is required"}
	case len(r.ID) > MaxIDLen:
		return &FieldError{Field: "id", Rule: fmt.Sprintf("must be at most %d bytes", MaxIDLen)}
	case r.Scale < MinScale || r.Scale > MaxScale:
		return &FieldError{Field: "scale", Rule: fmt.Sprintf("must be between %v and %v", MinScale, MaxScale)}
	case r.Scale%time.Millisecond != 0:
		return &FieldError{Field: "scale", Rule: "must be a whole number of milliseconds"}
	case r.Limit < 0:
		return &FieldError{Field: "limit", Rule: "must not be negative"}
	case r.Hits < 0:
		return &FieldError{Field: "hits", Rule: "must not be negative"}
	case !r.Algorithm.valid():
		return &FieldError{Field: "algorithm", Rule: "must be one of: fixed_window"}
	}
	return nil
}

// Decision is the answer to a Request.
type Decision struct {
	Allowed    bool          // whether the hits were admitted (for a peek: whether one more hit would be)
	Count      int64         // hits counted in the current window, after this request
	Limit      int64         // the limit the request was checked against
	Remaining  int64         // Limit - Count, never negative
	ResetAfter time.Duration // until the current window ends and the count starts again
	RetryAfter time.Duration // on a denial, until the window ends and the count starts again; 0 when allowed
}
