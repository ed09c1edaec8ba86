package client

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// Limit is the limit a check counts under: ad hoc, at most Limit hits per
// Scale counted with Algorithm, or by a rule configured on the service.
// The same id under two different limits counts in two different buckets.
type Limit struct {
	// Policy is the limit, when no Rule supplies it; its fields are those
	// of the service's table.Policy.
	Policy
	// Rule names a rule configured on the service, which supplies the
	// Policy instead: it must then be zero (else the service answers 400
	// naming the field given).
	Rule string
}

// Policy is a limit, the client's mirror of the service's table.Policy
// (this package does not import the service).
type Policy struct {
	// Algorithm names how hits are counted: "fixed_window" (the default,
	// when empty), "sliding_window", "token_bucket" or "leaky_bucket" (see
	// package table).
	Algorithm string
	// Scale is the window: a whole number of milliseconds, from 1ms to
	// 8784h (one leap year). Required without Rule.
	Scale time.Duration
	// Limit is the number of hits admitted per Scale, at least 1; for
	// token_bucket and leaky_bucket, the refill rate. Required without
	// Rule.
	Limit int64
	// Burst is the bucket size of token_bucket (0 means Limit) and
	// leaky_bucket (0 means 1); ignored by the windows.
	Burst int64
}

// Decision is the service's answer to a check or a refund.
type Decision struct {
	// Allowed reports whether the hits were admitted (and counted). It is
	// true for a shadow rule's denial (see ShadowDenied) and for a
	// Degraded decision under FailOpen.
	Allowed bool
	// Count is the hits counted in the bucket (for token and leaky
	// buckets, the tokens in use); Limit is the limit (the bucket size);
	// Remaining is what is left.
	Count, Limit, Remaining int64
	// Reset is the time until the bucket is empty again (its window ends,
	// or it has refilled).
	Reset time.Duration
	// RetryAfter is, on a denial, the time until the same check would be
	// admitted; 0 when allowed.
	RetryAfter time.Duration
	// Rule is the rule checked, "" for an ad-hoc limit.
	Rule string
	// ShadowDenied reports that a shadow rule would have denied the check:
	// it was let through (Allowed is true), and counted.
	ShadowDenied bool
	// Degraded reports a decision taken by the failure policy (FailOpen)
	// because the service did not answer. Only Allowed and Rule are then
	// set; nothing was counted.
	Degraded bool
}

// Check is one check of a batch (CheckAll): ID spending Hits under Limit.
type Check struct {
	ID    string // who is limited: 1 to 1024 bytes of valid UTF-8
	Limit Limit  // the limit counted under
	Hits  int64  // the cost, ≥ 0; 0 peeks (the zero value is a peek, not 1)
}

// Check counts hits (≥ 0; 0 peeks without counting) for id under l, with
// one GET /check_rate, and returns the service's decision. A denial is not
// an error: it is a Decision with Allowed false and RetryAfter set; a
// denied check consumes nothing.
//
// When the service cannot answer, Check returns an error matching
// ErrUnavailable under FailClosed, and an allowed Degraded decision under
// FailOpen. Bad input is an error matching ErrInvalid, whatever the
// policy. If ctx ends first, the error wraps ctx.Err(); the hits may then
// have been counted. After Close, Check returns ErrClosed.
func (c *Client) Check(ctx context.Context, id string, l Limit, hits int64) (Decision, error) {
	d, _, err := c.single(ctx, ctx, c.checkURL, opCheck, id, &l, hits, 0)
	if err != nil {
		return c.failOpen(l.Rule, err)
	}
	return d, nil
}

// Reservation is the answer to Reserve: a Decision and where its hits
// were counted, so that Cancel gives back exactly those hits.
type Reservation struct {
	Decision
	// Window is where the hits were counted, as the service named it
	// (its Ratelimit-Window): 0 when nothing was counted (a denial, a
	// peek, a Degraded decision). RefundWindow takes it.
	Window int64

	c    *Client
	id   string
	l    Limit
	hits int64
}

// Reserve is Check that also keeps where the hits were counted, for Cancel
// to give them back if the work they paid for does not happen: a refund
// that arrives after a window boundary then credits nothing instead of
// the new window.
func (c *Client) Reserve(ctx context.Context, id string, l Limit, hits int64) (Reservation, error) {
	d, window, err := c.single(ctx, ctx, c.checkURL, opCheck, id, &l, hits, 0)
	if err != nil {
		d, err = c.failOpen(l.Rule, err)
		return Reservation{Decision: d}, err
	}
	return Reservation{Decision: d, Window: window, c: c, id: id, l: l, hits: hits}, nil
}

// Cancel gives back the reservation's hits, in the window they were
// counted in only (see RefundWindow), and returns the decision a peek gets
// afterwards. When nothing was counted it sends nothing and returns the
// zero Decision.
func (r *Reservation) Cancel(ctx context.Context) (Decision, error) {
	if r.Window == 0 || r.c == nil || r.hits <= 0 {
		return Decision{}, nil
	}
	return r.c.RefundWindow(ctx, r.id, r.l, r.hits, r.Window)
}

// Refund gives back hits (> 0) to id's bucket under l, in its current
// window, with one GET /refund, and returns the decision a peek gets
// afterwards. A refund never takes a bucket below empty and never creates
// one. Hits counted in a window that may have ended since are given back
// with Reserve and Cancel (or RefundWindow), which credit only that
// window. The failure policy does not apply: when the service cannot
// answer, the error matches ErrUnavailable, and the hits may or may not
// have been given back.
func (c *Client) Refund(ctx context.Context, id string, l Limit, hits int64) (Decision, error) {
	return c.RefundWindow(ctx, id, l, hits, 0)
}

// RefundWindow is Refund in the window its hits were counted in, window
// being a Reservation's Window: while that window lasts it is credited;
// once it is over nothing is (for token and leaky buckets: only what of
// those hits has not drained yet). Window 0 is Refund's current window.
func (c *Client) RefundWindow(ctx context.Context, id string, l Limit, hits, window int64) (Decision, error) {
	if hits <= 0 {
		return Decision{}, invalid(opRefund, "hits", "must be positive: the number of hits to give back")
	}
	if window < 0 {
		return Decision{}, invalid(opRefund, "window", "must not be negative")
	}
	d, _, err := c.single(ctx, ctx, c.refundURL, opRefund, id, &l, -hits, window)
	return d, err
}

// msgUTF8 is what an id that is not valid UTF-8 breaks, in the service's words (table.MsgUTF8).
const msgUTF8 = "must be valid UTF-8"

// invalid returns the ErrInvalid error of a request refused before it was
// sent.
func invalid(op, field, msg string) error {
	return invalidErr(op, &FieldError{Field: field, Message: msg})
}

// invalidErr returns the error of op for bad input: it matches ErrInvalid
// and wraps fe.
func invalidErr(op string, fe *FieldError) error {
	return fmt.Errorf("%w: %s: %w", ErrInvalid, op, fe)
}

// failOpen returns the answer to a single check that failed with err: an
// allowed, degraded decision if the policy is FailOpen and the service was
// unavailable, else err.
func (c *Client) failOpen(rule string, err error) (Decision, error) {
	if _, ok := err.(*unavailableError); ok && c.failure == FailOpen {
		return Decision{Allowed: true, Rule: rule, Degraded: true}, nil
	}
	return Decision{}, err
}

// single sends one GET of a check or refund (url is the path with its '?')
// under reqCtx, judging a failure by callerCtx (see Wait), and returns the
// decision and the answer's Ratelimit-Window. A refund's window, if not 0,
// is sent.
func (c *Client) single(reqCtx, callerCtx context.Context, url, op, id string, l *Limit, hits, window int64) (Decision, int64, error) {
	if c.closed.Load() {
		return Decision{}, 0, ErrClosed
	}
	if !utf8.ValidString(id) {
		return Decision{}, 0, invalid(op, "id", msgUTF8)
	}
	bp := c.getBuf()
	defer c.putBuf(bp)
	b := append((*bp)[:0], url...)
	b = appendQuery(b, id, l, hits)
	if window != 0 {
		b = append(b, "&window="...)
		b = strconv.AppendInt(b, window, 10)
	}
	*bp = b
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, string(b), nil)
	if err != nil { // cannot happen: New checked the base URL, the rest is escaped
		return Decision{}, 0, fmt.Errorf("client: %s: %w", op, err)
	}
	r, err := c.do(req, bp)
	if err != nil {
		return Decision{}, 0, c.transportFailed(callerCtx, op, err)
	}
	if !isDecisionStatus(r.status) {
		return Decision{}, 0, c.badAnswer(callerCtx, op, &r, nil)
	}
	d, err := decodeDecision(r.body, l.Rule)
	if err != nil {
		return Decision{}, 0, c.badAnswer(callerCtx, op, &r, err)
	}
	c.answered(callerCtx)
	return d, r.window, nil
}

// CheckAll checks all of checks at once, all or nothing, with one POST
// /check_rate of a JSON array: if every check is admitted, each is counted
// and allowed is true; if any is denied, nothing is consumed and allowed
// is false. The decisions are in the order of checks, each as if the
// checks before it had been counted. The service takes 1 to 1000 checks.
//
// The failure policy and errors are those of Check: under FailOpen, an
// unavailable service gives one Degraded decision per check and allowed
// true. A 400 names the check at fault in FieldError.Field, as
// "checks[I].FIELD".
func (c *Client) CheckAll(ctx context.Context, checks []Check) ([]Decision, bool, error) {
	if c.closed.Load() {
		return nil, false, ErrClosed
	}
	if len(checks) == 0 {
		return nil, false, invalid(opCheckAll, "checks", "must hold at least one check")
	}
	for i := range checks {
		if !utf8.ValidString(checks[i].ID) {
			return nil, false, invalid(opCheckAll, "checks["+strconv.Itoa(i)+"].id", msgUTF8)
		}
	}
	body := make([]byte, 0, 128*len(checks))
	body = append(body, '[')
	for i := range checks {
		if i > 0 {
			body = append(body, ',')
		}
		body = appendCheckJSON(body, &checks[i])
	}
	body = append(body, ']')
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.batchURL, bytes.NewReader(body))
	if err != nil { // cannot happen: New checked the base URL
		return nil, false, fmt.Errorf("client: %s: %w", opCheckAll, err)
	}
	req.Header["Content-Type"] = []string{"application/json"}
	bp := c.getBuf()
	defer c.putBuf(bp)
	r, err := c.do(req, bp)
	if err == nil && !isDecisionStatus(r.status) {
		err = c.badAnswer(ctx, opCheckAll, &r, nil)
	} else if err == nil {
		var ds []Decision
		var allowed bool
		if ds, allowed, err = decodeBatch(r.body, checks); err == nil {
			c.answered(ctx)
			return ds, allowed, nil
		}
		err = c.badAnswer(ctx, opCheckAll, &r, err)
	} else {
		err = c.transportFailed(ctx, opCheckAll, err)
	}
	if _, ok := err.(*unavailableError); ok && c.failure == FailOpen {
		ds := make([]Decision, len(checks))
		for i := range ds {
			ds[i] = Decision{Allowed: true, Rule: checks[i].Limit.Rule, Degraded: true}
		}
		return ds, true, nil
	}
	return nil, false, err
}

// Backoff of Wait while the service is unavailable and gives no
// Retry-After: from minBackoff, doubling at each failure, up to
// maxBackoff, each wait drawn in [d/2, d].
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// backoff returns the wait after the n-th (from 0) failure in a row.
func backoff(n int) time.Duration {
	d := maxBackoff
	if n < 7 { // 10ms << 7 > 1s
		d = min(minBackoff<<n, maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// Wait blocks until one hit for id under l is admitted, then returns nil.
// It checks; on a denial it sleeps the decision's RetryAfter (at least 1
// ms, so it never spins) on Options.Clock and checks again. With a
// leaky_bucket limit, callers of Wait are so paced at the limit's rate,
// and none is lost.
//
// When the service cannot answer, Wait returns nil at once under FailOpen;
// under FailClosed it retries after the 503's Retry-After if the service
// gave one, else after a capped exponential backoff (10 ms doubling to 1
// s, with jitter), until the hit is admitted or ctx ends. Bad input
// returns an error matching ErrInvalid at once, and after Close, Wait
// returns ErrClosed.
//
// If ctx ends first, Wait returns ctx.Err(), and the hit was not taken:
// Wait does not abandon a request in flight when ctx ends (it could have
// been counted) but waits for its answer, at most Options.Timeout; if that
// answer admits the hit, Wait returns nil. Only a request whose answer is
// lost (a timeout or a broken connection after it was sent) may have been
// counted without Wait knowing.
func (c *Client) Wait(ctx context.Context, id string, l Limit) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	failures := 0
	for {
		reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		d, _, err := c.single(reqCtx, ctx, c.checkURL, opCheck, id, &l, 1, 0)
		cancel()
		var sleep time.Duration
		switch ue, unavailable := err.(*unavailableError); {
		case err == nil && d.Allowed:
			return nil
		case ctx.Err() != nil:
			return ctx.Err() // the hit was not taken
		case err == nil:
			sleep = max(d.RetryAfter, time.Millisecond)
			failures = 0
		case unavailable && c.failure == FailOpen:
			return nil
		case unavailable && ue.retry > 0:
			sleep = ue.retry
			failures++
		case unavailable:
			sleep = backoff(failures)
			failures++
		default:
			return err
		}
		if err := c.clock.Sleep(ctx, sleep); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("client: Wait: Clock.Sleep: %w", err)
		}
	}
}
