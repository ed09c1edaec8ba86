package api

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/jsonstr"
	"github.com/ratelimitd/ratelimitd/table"
)

// Canonical header keys (textproto.CanonicalMIMEHeaderKey form), so headers
// are set by map assignment without canonicalizing on every response.
const (
	hdrContentType     = "Content-Type"
	hdrCacheControl    = "Cache-Control"
	hdrRetryAfter      = "Retry-After"
	hdrAllow           = "Allow"
	hdrRateLimit       = "Ratelimit"        // RateLimit
	hdrRateLimitPolicy = "Ratelimit-Policy" // RateLimit-Policy
	hdrRateLimitWindow = "Ratelimit-Window" // where admitted hits were counted, for /refund
)

const (
	ctJSON  = "application/json"
	noStore = "no-store"
)

// responder writes check_rate answers and JSON errors. NewHandler and
// Middleware share it, so both speak exactly the same format.
type responder struct {
	denyStatus         int
	noRateLimitHeaders bool      // leave RateLimit and RateLimit-Policy off (the middleware's option)
	bufs               sync.Pool // of *[]byte
}

// maxPooledBuf is the largest buffer returned to the pool: enough for the
// body of a batch of a few hundred checks, and for its answer.
const maxPooledBuf = 64 << 10

func (rs *responder) getBuf() *[]byte {
	if p, ok := rs.bufs.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 512)
	return &b
}

func (rs *responder) putBuf(p *[]byte) {
	if cap(*p) > maxPooledBuf {
		return
	}
	*p = (*p)[:0]
	rs.bufs.Put(p)
}

// ceilDiv returns d/unit rounded up, and 0 for a negative d.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := d / unit
	if d%unit != 0 {
		q++
	}
	return int64(q)
}

// retryAfterSeconds is the Retry-After of a denial: whole seconds, rounded
// up, at least 1.
func retryAfterSeconds(d table.Decision) int64 {
	return max(ceilDiv(d.RetryAfter, time.Second), 1)
}

// answer is a decision with what its response needs.
type answer struct {
	id    string
	rule  string        // the rule checked, or "" for an ad-hoc check
	scale time.Duration // the window
	d     table.Decision
	// window is where the hits were counted (table.Reservation.Window),
	// sent for a later /refund of them; 0 when nothing was counted.
	window int64
	// shadow says the rule is a shadow rule: a denial is reported, never
	// enforced.
	shadow bool
}

// denied reports whether a denies the request: a denial not of a shadow rule.
func (a *answer) denied() bool { return !a.d.Allowed && !a.shadow }

// shadowDenied reports whether a is a shadow rule's denial, let through.
func (a *answer) shadowDenied() bool { return !a.d.Allowed && a.shadow }

// result is what a check answered with a counts as in the metrics.
func (a *answer) result() result {
	switch {
	case a.d.Full:
		return resultFull
	case a.d.Allowed:
		return resultAllowed
	case a.shadow:
		return resultShadowDenied
	}
	return resultDenied
}

// policyName returns the name of the RateLimit policy of a: its rule's
// name (a token of [a-z0-9_.-], safe in a quoted string), or "default".
func (a *answer) policyName() string {
	if a.rule != "" {
		return a.rule
	}
	return "default"
}

// appendRateLimitFields appends the RateLimit-Policy field value and then
// the RateLimit field value of a, returning where the second one starts.
func appendRateLimitFields(b []byte, a *answer) ([]byte, int) {
	name := a.policyName()
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";q=`...)
	b = strconv.AppendInt(b, a.d.Limit, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, ceilDiv(a.scale, time.Second), 10)
	mid := len(b)
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, a.d.Remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, ceilDiv(a.d.ResetAfter, time.Second), 10)
	return b, mid
}

// setRateLimitHeaders sets RateLimit-Policy and RateLimit on h for a. The
// middleware uses it before calling the next handler.
func (rs *responder) setRateLimitHeaders(h http.Header, a *answer) {
	p := rs.getBuf()
	b, mid := appendRateLimitFields(*p, a)
	s := string(b)
	*p = b
	rs.putBuf(p)
	vals := make([]string, 2)
	vals[0], vals[1] = s[:mid], s[mid:]
	h[hdrRateLimitPolicy] = vals[0:1:1]
	h[hdrRateLimit] = vals[1:2:2]
}

// writeDecision answers a check: 200 when allowed (or let through by a
// shadow rule), rs.denyStatus with Retry-After when denied; the RateLimit
// headers and the JSON body either way. An answer to a refund (refund
// true) is always 200, without Retry-After.
func (rs *responder) writeDecision(w http.ResponseWriter, a *answer, refund bool) {
	p := rs.getBuf()
	b, mid := appendRateLimitFields(*p, a)
	end := len(b)
	status := http.StatusOK
	deny := a.denied() && !refund
	if deny {
		status = rs.denyStatus
		b = strconv.AppendInt(b, retryAfterSeconds(a.d), 10)
	}
	retryEnd := len(b)
	if a.window != 0 {
		b = strconv.AppendInt(b, a.window, 10)
	}
	s := string(b) // one allocation for every dynamic header value

	// One allocation for the value slices of all six headers; each gets a
	// full slice expression so that an append by a later handler copies.
	vals := make([]string, 6)
	vals[0], vals[1], vals[2], vals[3] = ctJSON, noStore, s[:mid], s[mid:end]
	h := w.Header()
	h[hdrContentType] = vals[0:1:1]
	h[hdrCacheControl] = vals[1:2:2]
	h[hdrRateLimitPolicy] = vals[2:3:3]
	h[hdrRateLimit] = vals[3:4:4]
	if deny {
		vals[4] = s[end:retryEnd]
		h[hdrRetryAfter] = vals[4:5:5]
	}
	if a.window != 0 {
		vals[5] = s[retryEnd:]
		h[hdrRateLimitWindow] = vals[5:6:6]
	}
	if rs.noRateLimitHeaders {
		delete(h, hdrRateLimitPolicy)
		delete(h, hdrRateLimit)
	}

	b = appendDecisionJSON(b[:0], a)
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*p = b
	rs.putBuf(p)
}

// appendDecisionJSON appends the check_rate body of a: allowed is true for
// a shadow rule's denial, which also gets "shadow_denied":true; "rule" is
// there for a check by rule.
func appendDecisionJSON(b []byte, a *answer) []byte {
	d := &a.d
	if d.Allowed || a.shadow {
		b = append(b, `{"allowed":true,"id":`...)
	} else {
		b = append(b, `{"allowed":false,"id":`...)
	}
	b = jsonstr.Append(b, a.id)
	if a.rule != "" {
		b = append(b, `,"rule":`...)
		b = jsonstr.Append(b, a.rule)
	}
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, d.Count, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"reset_ms":`...)
	b = strconv.AppendInt(b, ceilDiv(d.ResetAfter, time.Millisecond), 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, ceilDiv(d.RetryAfter, time.Millisecond), 10)
	if a.shadowDenied() {
		b = append(b, `,"shadow_denied":true`...)
	}
	return append(b, '}')
}

// batchOutcome is what a batch of answers comes to.
type batchOutcome struct {
	allowed bool
	// binding is the answer the RateLimit headers describe; -1 for none.
	binding int
	// limited reports a denial by a limit (not only by a full table).
	limited bool
	// retry is the longest RetryAfter of the denials.
	retry time.Duration
	res   result
}

// outcome sums up the answers of a batch whose checks were allowed (all
// or nothing) or not. The binding answer is, among the answers that count
// (the denials of a denied batch; else those not of shadow rules; else all),
// the one with the least remaining, and on a tie the longer wait (retry,
// then reset), then the first.
func outcome(as []answer, allowed bool) batchOutcome {
	o := batchOutcome{allowed: allowed, binding: -1, res: resultAllowed}
	counts := func(a *answer) bool { return a.denied() }
	if allowed {
		counts = func(a *answer) bool { return !a.shadow }
		if !slices.ContainsFunc(as, func(a answer) bool { return !a.shadow }) {
			counts = func(*answer) bool { return true }
		}
	}
	for i := range as {
		a := &as[i]
		if a.shadowDenied() && allowed {
			o.res = resultShadowDenied
		}
		if a.denied() {
			o.retry = max(o.retry, a.d.RetryAfter)
			o.limited = o.limited || !a.d.Full
		}
		if !counts(a) {
			continue
		}
		if o.binding < 0 || bindsMore(a, &as[o.binding]) {
			o.binding = i
		}
	}
	switch {
	case allowed:
	case o.limited:
		o.res = resultDenied
	default:
		o.res = resultFull
	}
	return o
}

// bindsMore reports whether a is more restrictive than b.
func bindsMore(a, b *answer) bool {
	switch {
	case a.d.Remaining != b.d.Remaining:
		return a.d.Remaining < b.d.Remaining
	case a.d.RetryAfter != b.d.RetryAfter:
		return a.d.RetryAfter > b.d.RetryAfter
	}
	return a.d.ResetAfter > b.d.ResetAfter
}

// writeBatch answers a batch of checks, all or nothing: 200 when allowed,
// rs.denyStatus with Retry-After (the longest wait of the denials) when
// denied by a limit, 503 when denied only because the table is full. The
// RateLimit headers describe the binding check (see outcome); the body is
// {"allowed":BOOL,"checks":[DECISION...]}. It returns the result to record.
func (rs *responder) writeBatch(w http.ResponseWriter, as []answer, allowed bool) result {
	o := outcome(as, allowed)
	if !allowed && !o.limited {
		rs.writeFull(w, o.retry)
		return o.res
	}
	// One string for the dynamic header values: the RateLimit fields of
	// the binding answer, then Retry-After when denied.
	p := rs.getBuf()
	b := *p
	mid, end := 0, 0
	if o.binding >= 0 {
		b, mid = appendRateLimitFields(b, &as[o.binding])
		end = len(b)
	}
	if !allowed {
		b = strconv.AppendInt(b, max(ceilDiv(o.retry, time.Second), 1), 10)
	}
	s := string(b)
	vals := make([]string, 5) // each header gets a full slice expression, as in writeDecision
	vals[0], vals[1] = ctJSON, noStore
	h := w.Header()
	h[hdrContentType] = vals[0:1:1]
	h[hdrCacheControl] = vals[1:2:2]
	if o.binding >= 0 {
		vals[2], vals[3] = s[:mid], s[mid:end]
		h[hdrRateLimitPolicy] = vals[2:3:3]
		h[hdrRateLimit] = vals[3:4:4]
	}
	status := http.StatusOK
	if !allowed {
		status = rs.denyStatus
		vals[4] = s[end:]
		h[hdrRetryAfter] = vals[4:5:5]
	}
	b = append(b[:0], `{"allowed":`...)
	b = strconv.AppendBool(b, allowed)
	b = append(b, `,"checks":[`...)
	for i := range as {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendDecisionJSON(b, &as[i])
	}
	b = append(b, "]}"...)
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*p = b
	rs.putBuf(p)
	return o.res
}

// msgFull is the error of a check refused because the table is full.
const msgFull = "the rate limiter is full (max buckets); retry"

// writeFull answers 503 for a check the table had no room for, with
// Retry-After the table's estimate of when room frees (at least 1 s).
func (rs *responder) writeFull(w http.ResponseWriter, retry time.Duration) {
	rs.writeErrorRetry(w, http.StatusServiceUnavailable, "", msgFull, max(ceilDiv(retry, time.Second), 1))
}

// writeError answers status with the JSON body {"error":msg,"field":field}.
// A 503 also carries Retry-After: 1.
func (rs *responder) writeError(w http.ResponseWriter, status int, field, msg string) {
	rs.writeErrorRetry(w, status, field, msg, 1)
}

// writeErrorRetry is writeError with the Retry-After of a 503 in seconds.
func (rs *responder) writeErrorRetry(w http.ResponseWriter, status int, field, msg string, retry int64) {
	p := rs.getBuf()
	b := append(*p, `{"error":`...)
	b = jsonstr.Append(b, msg)
	b = append(b, `,"field":`...)
	b = jsonstr.Append(b, field)
	b = append(b, '}')
	h := w.Header()
	h[hdrContentType] = []string{ctJSON}
	h[hdrCacheControl] = []string{noStore}
	if status == http.StatusServiceUnavailable {
		h[hdrRetryAfter] = []string{strconv.FormatInt(retry, 10)}
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*p = b
	rs.putBuf(p)
}

// writeFieldError answers 400 for a field error.
func (rs *responder) writeFieldError(w http.ResponseWriter, fe *table.FieldError) {
	rs.writeError(w, http.StatusBadRequest, fe.Field, fe.Error())
}
