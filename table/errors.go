package table

import (
	"errors"
	"strconv"
)

// Errors a limiter deciding Requests (actors.System, or anything standing
// in for it behind a transport) returns when it cannot decide one. They
// live here, with the Request, so that a transport can tell them apart
// without importing the limiter. Match them with errors.Is; the texts name
// the System, which returns them.
var (
	// ErrStopped: the limiter is stopping or stopped and takes no more
	// checks.
	ErrStopped = errors.New("actors: system stopped")
	// ErrUnavailable: the shard that owns the check could not decide it
	// (its owner crashed while holding it, or its journal fails); the check
	// may or may not have been counted.
	ErrUnavailable = errors.New("actors: shard owner unavailable")
	// ErrJournal: the shard's journal could not take the check's batch (a
	// full disk, an I/O error), so the check is refused rather than
	// admitted without being durable. Errors matching ErrJournal also match
	// ErrUnavailable.
	ErrJournal = errors.New("actors: journal failed")
)

// MaxBatch is the most Requests one all-or-nothing batch holds.
const MaxBatch = 1000

// MsgBatchSize is what the number of Requests of a batch must be (MaxBatch).
const MsgBatchSize = "must hold 1 to 1000 checks"

// IndexError is the error of Request Index of a batch: Err, usually a
// *FieldError, is about that Request alone. It reads
// "checks[INDEX].FIELD: MESSAGE" for a *FieldError, as a transport names
// the field of a batch element, and unwraps to Err (so a *FieldError
// still matches ErrInvalid).
type IndexError struct {
	Index int
	Err   error
}

// Error implements error.
func (e *IndexError) Error() string {
	if fe, ok := e.Err.(*FieldError); ok {
		return e.Field(fe.Field) + ": " + fe.Message
	}
	return e.Field("") + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *IndexError) Unwrap() error { return e.Err }

// Field returns the name of field of the Request at e.Index:
// "checks[INDEX].FIELD", or "checks[INDEX]" for the Request itself
// (field "").
func (e *IndexError) Field(field string) string {
	f := "checks[" + strconv.Itoa(e.Index) + "]"
	if field != "" {
		f += "." + field
	}
	return f
}
