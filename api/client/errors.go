package client

import "errors"

// The sentinel errors of the package. Match them with errors.Is; the errors
// returned wrap them with the operation and the cause.
var (
	// ErrUnavailable is matched by the error of a call the service did not
	// answer: a refused or broken connection, a timeout (Options.Timeout,
	// not the caller's context), a 503 (a full table, a failing journal, a
	// server shutting down), any other 5xx or unexpected status, or an
	// answer that is not a ratelimitd answer. Under FailOpen, Check,
	// CheckAll and Wait do not return it: they allow instead (see
	// FailurePolicy). Refund returns it under either policy.
	ErrUnavailable = errors.New("client: rate limiter unavailable")

	// ErrInvalid is matched by the error of a request the service answered
	// 400 (bad input), and of one the client refused before sending it (a
	// Refund of hits ≤ 0, a CheckAll of no checks). Such an error wraps a
	// *FieldError naming the field at fault; get it with errors.As. The
	// failure policy never applies: bad input is the caller's to fix.
	ErrInvalid = errors.New("client: invalid request")

	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("client: closed")

	// ErrInvalidOption is matched by the error New returns for Options it
	// cannot use.
	ErrInvalidOption = errors.New("client: invalid option")
)

// FieldError is bad input, as the service reported it in a 400 answer
// {"error": "...", "field": "..."}. It matches ErrInvalid with errors.Is.
type FieldError struct {
	// Field names the parameter at fault, as the service names it: "id",
	// "scale", "limit", "hits", "algorithm", "burst", "rule", or
	// "checks[I].FIELD" for check I of a CheckAll; "" when no single
	// parameter is at fault.
	Field string
	// Message is the rule the field broke, such as "must be an integer
	// between 1 and 9223372036854775807", without the field's name.
	Message string
}

// Error returns "FIELD: MESSAGE", or MESSAGE alone when Field is empty.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Is reports whether target is ErrInvalid, so that a *FieldError matches it.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }
