package actors

import (
	"context"

	"github.com/ratelimitd/ratelimitd/table"
)

// Limiter checks ids against one policy, fixed and validated when the
// Limiter is made, so that a check passes the id alone: the usual way to
// limit from Go when the limit is known in advance, as with
// golang.org/x/time/rate's Limiter or a store made with its rate.
//
// Its buckets are the ad-hoc ones (namespace ""), the very buckets that
// System.Check counts for a request of the same policy: a Limiter and Check
// share them, and the System's journal, sweep and cluster treat them alike.
// A Limiter is safe for concurrent use, and lives as long as its System.
//
// Why it is faster than Check with a request built for each call: Check
// takes a table.Request and returns a table.Decision by value, too large
// for registers, and a caller that builds the request just before the call
// has its fields written with 8-byte stores that the copy into Check's
// frame reads back with 16-byte loads, which cannot be forwarded from
// those stores and wait for them (the same for the decision on the way
// back). A Limiter's check takes a string, and Allow returns a bool
// (Limiter.Check still returns a Decision, and gains less).
// BenchmarkLimiter measures it against Check with a request literal
// written for each call, in alternating rounds on one System (its
// x-check); the comparison suite's embedded section runs both beside the
// other libraries.
type Limiter struct {
	s   *System
	req table.Request // the policy; ID and Hits are set per check on a copy
}

// Limiter returns a Limiter of p, or a *table.FieldError if p is not a
// valid policy.
func (s *System) Limiter(p table.Policy) (*Limiter, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{s: s, req: table.Request{Policy: p}}, nil
}

// Policy returns the Limiter's policy.
func (l *Limiter) Policy() table.Policy { return l.req.Policy }

// Allow counts one hit of id and reports whether it was admitted: Check
// with hits 1, without the decision's details. A check refused by a full
// table (Decision.Full) is not admitted. The errors are Check's.
func (l *Limiter) Allow(ctx context.Context, id string) (bool, error) {
	var r table.Reservation
	err := l.reserve(ctx, id, 1, &r)
	return r.Allowed, err
}

// Check counts hits (0: a peek, which counts nothing) of id against the
// Limiter's policy and returns the decision, as System.Check does for a
// request of id, hits and the policy.
func (l *Limiter) Check(ctx context.Context, id string, hits int64) (table.Decision, error) {
	var r table.Reservation
	err := l.reserve(ctx, id, hits, &r)
	return r.Decision, err
}

// reserve is System.reserve for a request of id and hits under the
// Limiter's policy, built on the Limiter's request by writing those two
// fields of a copy, which Request.Validate then checks (the policy again
// too: a dozen comparisons, not worth a second path).
func (l *Limiter) reserve(ctx context.Context, id string, hits int64, r *table.Reservation) error {
	req := l.req
	req.ID, req.Hits = id, hits
	return l.s.reserve(ctx, &req, r)
}
