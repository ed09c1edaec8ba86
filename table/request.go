package table

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	// MaxNamespaceLen is the longest Namespace (a rule name), in bytes.
	MaxNamespaceLen = 64
)

// ErrInvalid is matched (errors.Is) by every error Request.Validate returns.
var ErrInvalid = errors.New("invalid request")

// FieldError names the Request field at fault and what it must be.
// It matches ErrInvalid with errors.Is.
type FieldError struct {
	Field   string // the wire name of the field: "id", "scale", "limit", "hits", "algorithm", "burst", "rule"
	Message string // what the field must be, e.g. "must not be negative"
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// What the fields of a Request must be, as the Message of the FieldError
// that names one. The parsers of the wire forms say them too, so that a
// field breaks one rule in the same words everywhere; the numbers in them
// are MaxIDLen, MinScale and MaxScale (TestMessages keeps them so).
const (
	MsgRequired    = "is required"
	MsgIDLen       = "must be at most 1024 bytes"
	MsgUTF8        = "must be valid UTF-8"
	MsgScaleRange  = "must be between 1ms and 8784h0m0s"
	MsgScaleMs     = "must be a whole number of milliseconds"
	MsgNotNegative = "must not be negative"
	MsgRefill      = "burst × scale/limit (the time to refill) must be at most 8784h0m0s"
)

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Algorithm selects how a bucket counts.
type Algorithm uint8

// The algorithms. The zero value is FixedWindow.
const (
	// FixedWindow counts hits in epoch-aligned windows of length Scale:
	// window number floor(now_ms / scale_ms), at most Limit hits in each.
	FixedWindow Algorithm = iota
	// SlidingWindow approximates a rolling window of length Scale with two
	// fixed windows: the previous window's count, weighted by the share of
	// it still inside the rolling window, plus the current window's count.
	SlidingWindow
	// TokenBucket is GCRA: a bucket of Burst tokens (default Limit) that
	// refills at Limit per Scale, kept as one timestamp per key.
	TokenBucket
	// LeakyBucket is a pacer: GCRA with a bucket of Burst (default 1), so
	// hits are spaced Scale/Limit apart, and a denial's RetryAfter is the
	// exact time the caller's turn comes.
	LeakyBucket

	numAlgorithms = iota
)

var algorithmNames = [numAlgorithms]string{"fixed_window", "sliding_window", "token_bucket", "leaky_bucket"}

// msgAlgorithm is the rule of the algorithm field, naming every algorithm.
// msgNamespaceLen is the rule of a Request's Namespace (MaxNamespaceLen).
const msgNamespaceLen = "must be at most 64 bytes"

var msgAlgorithm = "must be one of: " + strings.Join(algorithmNames[:], ", ")

// valid reports whether a is one of the algorithms.
func (a Algorithm) valid() bool { return a < numAlgorithms }

// gcra reports whether a keeps a GCRA timestamp (token and leaky buckets).
func (a Algorithm) gcra() bool { return a == TokenBucket || a == LeakyBucket }

// String returns the wire name of a, e.g. "fixed_window".
func (a Algorithm) String() string {
	if a.valid() {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the Algorithm whose wire name is s.
// The empty string means FixedWindow.
func ParseAlgorithm(s string) (Algorithm, error) {
	if s == "" {
		return FixedWindow, nil
	}
	for a, name := range algorithmNames {
		if s == name {
			return Algorithm(a), nil
		}
	}
	return 0, &FieldError{Field: "algorithm", Message: msgAlgorithm}
}

// Policy is a limit: Limit hits per Scale, counted by Algorithm, in a
// bucket of Burst for the token and leaky buckets. Its zero value is not
// valid (Scale 0); see Validate.
type Policy struct {
	Algorithm Algorithm     // how to count; the zero value is FixedWindow
	Scale     time.Duration // window length, a whole number of milliseconds in [MinScale, MaxScale]
	Limit     int64         // hits admitted per Scale; 0 denies everything
	// Burst is the bucket size of TokenBucket (0 means Limit) and
	// LeakyBucket (0 means 1); the windows ignore it. Burst × Scale/Limit,
	// the time a drained bucket takes to refill, must be at most MaxScale.
	Burst int64
}

// Validate reports the first field of p that breaks its rule, as a
// *FieldError naming it by its wire name.
func (p *Policy) Validate() error {
	switch {
	case p.Scale < MinScale || p.Scale > MaxScale:
		return &FieldError{Field: "scale", Message: MsgScaleRange}
	case p.Scale%time.Millisecond != 0:
		return &FieldError{Field: "scale", Message: MsgScaleMs}
	case p.Limit < 0:
		return &FieldError{Field: "limit", Message: MsgNotNegative}
	case !p.Algorithm.valid():
		return &FieldError{Field: "algorithm", Message: msgAlgorithm}
	case p.Burst < 0:
		return &FieldError{Field: "burst", Message: MsgNotNegative}
	case p.Algorithm.gcra() && p.Limit > 0 && !fitsRefill(p.burst(), p.Scale, p.Limit):
		return &FieldError{Field: "burst", Message: MsgRefill}
	}
	return nil
}

// String returns p in the form ParsePolicy reads:
// LIMIT/SCALE[/ALGORITHM[/BURST]], e.g. 100/1s or 600/1m0s/token_bucket/50;
// the algorithm is left out when it is fixed_window with no burst.
func (p Policy) String() string {
	s := strconv.FormatInt(p.Limit, 10) + "/" + p.Scale.String()
	if p.Algorithm != FixedWindow || p.Burst != 0 {
		s += "/" + p.Algorithm.String()
	}
	if p.Burst != 0 {
		s += "/" + strconv.FormatInt(p.Burst, 10)
	}
	return s
}

// ErrPolicySyntax is matched (errors.Is) by the error ParsePolicy returns
// for text that is not LIMIT/SCALE[/ALGORITHM[/BURST]].
var ErrPolicySyntax = errors.New("must be LIMIT/SCALE[/ALGORITHM[/BURST]], such as 100/1s or 600/1m/token_bucket/50")

// ParsePolicy parses LIMIT/SCALE[/ALGORITHM[/BURST]] (SCALE a Go duration,
// ALGORITHM a wire name), e.g. 100/1s or 600/1m/token_bucket/50, and
// validates the result. Text of another shape returns ErrPolicySyntax; an
// unknown algorithm or a policy that breaks a rule, a *FieldError.
func ParsePolicy(s string) (Policy, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 4 {
		return Policy{}, ErrPolicySyntax
	}
	var p Policy
	var err error
	if p.Limit, err = strconv.ParseInt(parts[0], 10, 64); err != nil || p.Limit < 0 {
		return Policy{}, ErrPolicySyntax
	}
	if p.Scale, err = time.ParseDuration(parts[1]); err != nil {
		return Policy{}, ErrPolicySyntax
	}
	if len(parts) > 2 {
		if p.Algorithm, err = ParseAlgorithm(parts[2]); err != nil {
			return Policy{}, err
		}
	}
	if len(parts) > 3 {
		if p.Burst, err = strconv.ParseInt(parts[3], 10, 64); err != nil || p.Burst < 0 {
			return Policy{}, ErrPolicySyntax
		}
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// Request asks whether ID may spend Hits now under Policy.
//
// Without a Namespace, the same ID under a different Policy is a different
// bucket: limits never share counters. With a Namespace (a rule's name),
// buckets are keyed by (Namespace, Algorithm, Scale) only, so a rule whose
// Limit or Burst changes keeps its counts and no change hands out a fresh
// budget.
type Request struct {
	ID string // who is being limited; 1 to MaxIDLen bytes of valid UTF-8
	Policy
	Hits      int64  // cost of this request; 0 is a peek that changes nothing
	Namespace string // a rule's name, or empty; at most MaxNamespaceLen bytes
	// Window, on a Refund only, is the Reservation.Window of the check
	// whose hits are given back, so that only the window they were counted
	// in is credited; 0 credits the current window.
	Window int64
}

// Validate reports the first field of r that breaks its rule, as a *FieldError.
func (r *Request) Validate() error {
	switch {
	case r.ID == "":
		return &FieldError{Field: "id", Message: MsgRequired}
	case len(r.ID) > MaxIDLen:
		return &FieldError{Field: "id", Message: MsgIDLen}
	case !validUTF8(r.ID):
		return &FieldError{Field: "id", Message: MsgUTF8}
	}
	if err := r.Policy.Validate(); err != nil {
		return err
	}
	switch {
	case r.Hits < 0:
		return &FieldError{Field: "hits", Message: MsgNotNegative}
	case r.Window < 0:
		return &FieldError{Field: "window", Message: MsgNotNegative}
	case len(r.Namespace) > MaxNamespaceLen:
		return &FieldError{Field: "rule", Message: msgNamespaceLen}
	}
	return nil
}

// burst returns the effective bucket size of a GCRA policy.
func (r *Policy) burst() int64 {
	switch {
	case r.Burst > 0:
		return r.Burst
	case r.Algorithm == LeakyBucket:
		return 1
	}
	return r.Limit
}

// emission returns the GCRA emission interval in ns: one token per
// Scale/Limit, rounded up so that the rate is never exceeded. limit > 0.
func emission(scale time.Duration, limit int64) int64 {
	e := int64(scale) / limit // not (scale+limit-1)/limit, which overflows for a huge limit
	if int64(scale)%limit != 0 {
		e++
	}
	return e
}

// fitsRefill reports whether burst × emission is at most MaxScale.
func fitsRefill(burst int64, scale time.Duration, limit int64) bool {
	return burst <= int64(MaxScale)/emission(scale, limit)
}

// Decision is the answer to a Request.
type Decision struct {
	// Allowed reports whether the hits were admitted (for a peek: whether
	// one more hit would be).
	Allowed bool
	// Count is what the limit is measured against, after this request:
	// the hits in the current window (fixed window), the weighted count of
	// the rolling window rounded up (sliding window), or the tokens in use
	// (token and leaky buckets).
	Count int64
	// Limit is the limit the request was checked against: Limit for the
	// windows, the bucket size (Burst) for token and leaky buckets.
	Limit     int64
	Remaining int64 // Limit - Count, never negative
	// ResetAfter is the time until Count is back to 0 if no more hits come
	// (for a fixed window: until the window ends).
	ResetAfter time.Duration
	// RetryAfter, on a denial, is the exact time until the same request
	// would be admitted, if no other hits come; a cost that can never fit
	// gets ResetAfter. It is 0 when allowed.
	RetryAfter time.Duration
	// Full reports a denial because the table was full and the request
	// needed a new bucket (see Config.MaxBuckets): not the limit's doing.
	Full bool
}
