package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/ratelimitd/ratelimitd/table"
)

// ErrInvalidOption is matched (errors.Is) by every error a transport's
// constructor returns for options it cannot use.
var ErrInvalidOption = errors.New("api: invalid option")

// Checker decides rate-limit checks. *actors.System is one; tests and
// embedders may supply their own. Its methods must be safe for concurrent
// use; see actors.System for their contracts. It validates every request
// (an invalid one is a *table.FieldError, or a *table.IndexError in a
// batch), and its other errors are table's (see Classify).
type Checker interface {
	// Check counts req against its limit and returns the decision.
	Check(ctx context.Context, req table.Request) (table.Decision, error)
	// CheckAll checks reqs all or nothing: allowed only if every one is
	// admitted, and then each is counted; otherwise nothing is consumed.
	// The decisions are in the order of reqs.
	CheckAll(ctx context.Context, reqs []table.Request) ([]table.Decision, bool, error)
	// Refund gives back up to req.Hits (≥ 1) hits to req's bucket and
	// returns the decision a peek gets afterwards.
	Refund(ctx context.Context, req table.Request) (table.Decision, error)
}

// Reserver is a Checker that also says where a check's hits were counted
// (table.Reservation.Window), so that an answer can tell the client which
// window a later refund of them is for. *actors.System is one.
type Reserver interface {
	Reserve(ctx context.Context, req table.Request) (table.Reservation, error)
}

// BatchAppender is a Checker whose CheckAll can append its decisions to a
// slice of the caller's (nil is a fresh one) instead of a new one, so that
// a transport reusing its buffers allocates nothing per batch; where
// CheckAll returns no decisions it returns dst as it was. *actors.System
// is one.
type BatchAppender interface {
	AppendCheckAll(ctx context.Context, dst []table.Decision, reqs []table.Request) ([]table.Decision, bool, error)
}

// AppendCheckAll is c's CheckAll with its decisions appended to dst:
// through BatchAppender when c is one, else copied from CheckAll's.
func AppendCheckAll(ctx context.Context, c Checker, dst []table.Decision, reqs []table.Request) ([]table.Decision, bool, error) {
	if a, ok := c.(BatchAppender); ok {
		return a.AppendCheckAll(ctx, dst, reqs)
	}
	ds, allowed, err := c.CheckAll(ctx, reqs)
	if ds == nil {
		return dst, allowed, err
	}
	return append(dst, ds...), allowed, err
}

// Class is what an error of a Checker means to its client.
type Class uint8

// The classes of Checker errors.
const (
	ClassFailed      Class = iota // anything else: the limiter failed
	ClassInvalid                  // table.ErrInvalid: bad input, the client's to fix
	ClassCanceled                 // the context ended: the client went away or timed out
	ClassStopped                  // table.ErrStopped: the limiter is shutting down
	ClassUnavailable              // table.ErrUnavailable: a shard cannot answer for now
)

var classNames = [...]string{"failed", "invalid", "canceled", "stopped", "unavailable"}

// String returns the name of c, e.g. "unavailable".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Classify returns the class of err, an error of a Checker. Only
// ClassInvalid is the client's fault; a transport answers every other
// class as "cannot answer now" (HTTP 503), never as an admission.
func Classify(err error) Class {
	switch {
	case errors.Is(err, table.ErrInvalid):
		return ClassInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ClassCanceled
	case errors.Is(err, table.ErrStopped):
		return ClassStopped
	case errors.Is(err, table.ErrUnavailable):
		return ClassUnavailable
	}
	return ClassFailed
}
